package netnslab

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// NS is a network namespace created by NewNS and deleted on test cleanup.
type NS struct {
	// Name is the namespace's name as `ip netns` knows it (unique per call).
	Name string
	t    testing.TB
}

// suffix returns a short random hex string for unique names.
func suffix() string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// UniqueName returns prefix followed by "-" and 6 random hex digits. With a
// prefix of at most 8 characters it is a valid interface name (<= 15).
func UniqueName(prefix string) string { return prefix + "-" + suffix() }

// NewNS creates a namespace named "sd-<role>-<random>", brings its loopback
// up and deletes it (with every device in it) on test cleanup.
func NewNS(t testing.TB, role string) *NS {
	t.Helper()
	n := &NS{Name: "sd-" + role + "-" + suffix(), t: t}
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", n.Name, err, out)
	}
	var st syscall.Stat_t
	_ = syscall.Stat("/run/netns/"+n.Name, &st)
	t.Cleanup(func() {
		// A daemon run with --netns from this mount namespace pins its
		// bpf classifier under the host's /sys/fs/bpf/shaperd: those pins
		// belong to the namespace and go with it.
		if st.Ino != 0 {
			_ = os.RemoveAll(BPFPinDir(st.Ino))
		}
		if out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.Name, err, out)
		}
	})
	n.MustRun("ip", "link", "set", "lo", "up")
	return n
}

// BPFPinDir is where shaperd's bpf classifiers of the network namespace
// with nsfs inode ino pin their maps and program by default
// (bpfcls.NetNSPinDir(bpfcls.DefaultPinRoot, ino); a test in bpfcls keeps
// the two equal: netnslab cannot import bpfcls, whose tests import it).
func BPFPinDir(ino uint64) string { return fmt.Sprintf("/sys/fs/bpf/shaperd/netns-%d", ino) }

// Command returns an exec.Cmd that runs argv inside the namespace
// (`ip netns exec NAME argv...`).
func (n *NS) Command(argv ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name}, argv...)...)
}

// Run runs argv inside the namespace and returns its standard output. The
// error includes the command and its standard error.
func (n *NS) Run(argv ...string) (string, error) {
	cmd := n.Command(argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("netns %s: %s: %w: %s", n.Name, strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// MustRun is Run that fails the test on error.
func (n *NS) MustRun(argv ...string) string {
	n.t.Helper()
	out, err := n.Run(argv...)
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

// Veth creates a veth pair: device aDev in namespace a and bDev in b, both up.
// Device names are per namespace, so fixed names (<= 15 chars) are fine.
func Veth(t testing.TB, a *NS, aDev string, b *NS, bDev string) {
	t.Helper()
	a.MustRun("ip", "link", "add", aDev, "type", "veth", "peer", "name", bDev, "netns", b.Name)
	a.MustRun("ip", "link", "set", aDev, "up")
	b.MustRun("ip", "link", "set", bDev, "up")
}

// VethQueues is Veth with queues transmit and receive queues on both ends
// (`numtxqueues N numrxqueues N`), the multi-queue device mq needs.
func VethQueues(t testing.TB, a *NS, aDev string, b *NS, bDev string, queues int) {
	t.Helper()
	n := strconv.Itoa(queues)
	a.MustRun("ip", "link", "add", aDev, "numtxqueues", n, "numrxqueues", n, "type", "veth",
		"peer", "name", bDev, "numtxqueues", n, "numrxqueues", n, "netns", b.Name)
	a.MustRun("ip", "link", "set", aDev, "up")
	b.MustRun("ip", "link", "set", bDev, "up")
}

// AddAddr adds an address in CIDR form ("198.18.0.1/24", "2001:db8:1::1/64")
// to dev; IPv6 addresses get `nodad` so they are usable at once.
func (n *NS) AddAddr(dev, cidr string) {
	n.t.Helper()
	args := []string{"ip", "addr", "add", cidr, "dev", dev}
	if strings.Contains(cidr, ":") {
		args = append(args, "nodad")
	}
	n.MustRun(args...)
}

// AddRoute adds a route to dst ("198.18.0.0/24", "default") via gw.
func (n *NS) AddRoute(dst, gw string) {
	n.t.Helper()
	if strings.Contains(gw, ":") {
		n.MustRun("ip", "-6", "route", "add", dst, "via", gw)
		return
	}
	n.MustRun("ip", "route", "add", dst, "via", gw)
}

// Forwarding turns on IPv4 and IPv6 forwarding in the namespace.
func (n *NS) Forwarding() {
	n.t.Helper()
	n.MustRun("sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
}
