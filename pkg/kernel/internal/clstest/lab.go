// Package clstest is the test bench shared by shaperd's classifiers
// (pkg/kernel/u32, pkg/kernel/bpfcls): a namespace lab with an HTB tree to
// classify into, the table of classification cases both must pass, and the
// throughput comparison. It is imported by tests only.
package clstest

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
)

// Lab is a shaper namespace whose device Dev (a veth to a peer namespace)
// has an HTB root 1: with root class 1:1, default class 1:2 and user
// classes made by AddClasses. Traffic sent from the shaper namespace to
// 198.18.0.0/15 and 2001:db8::/32 leaves through Dev towards the peer.
type Lab struct {
	T       testing.TB
	Shaper  *netnslab.NS
	Peer    *netnslab.NS
	Dev     string
	Ifindex uint32
	// Conn is an rtnetlink socket in the shaper namespace, NSFD that
	// namespace (open until cleanup).
	Conn *netlink.Conn
	NSFD int
}

// Addresses of the lab's link: the shaper's (sources of test packets) and
// the peer's (the gateway to every destination).
const (
	Src4 = "198.19.255.1"
	Gw4  = "198.19.255.2"
	Src6 = "2001:db8:ffff::1"
	Gw6  = "2001:db8:ffff::2"
)

// NewLab makes a lab; role names its namespaces (at most 4 characters).
func NewLab(t testing.TB, role string) *Lab {
	t.Helper()
	netnslab.Require(t)
	l := &Lab{T: t, Dev: "sh0"}
	l.Shaper = netnslab.NewNS(t, role+"s")
	l.Peer = netnslab.NewNS(t, role+"p")
	netnslab.Veth(t, l.Shaper, l.Dev, l.Peer, "pe0")
	l.Shaper.AddAddr(l.Dev, Src4+"/30")
	l.Peer.AddAddr("pe0", Gw4+"/30")
	l.Shaper.AddAddr(l.Dev, Src6+"/64")
	l.Peer.AddAddr("pe0", Gw6+"/64")
	l.Shaper.AddRoute("198.18.0.0/15", Gw4)
	l.Shaper.AddRoute("2001:db8::/32", Gw6)
	// Static neighbours: test packets are never held back for ARP/ND, and
	// no ARP/ND traffic runs through the shaper during a test.
	mac := strings.TrimSpace(l.Peer.MustRun("cat", "/sys/class/net/pe0/address"))
	l.Shaper.MustRun("ip", "neigh", "replace", Gw4, "lladdr", mac, "dev", l.Dev, "nud", "permanent")
	l.Shaper.MustRun("ip", "neigh", "replace", Gw6, "lladdr", mac, "dev", l.Dev, "nud", "permanent")
	// And the other way: the peer's ICMP answers (port unreachable) need
	// no neighbour solicitation, whose advertisement in answer would leave
	// through the shaper and be counted by a prefix covering the peer.
	smac := strings.TrimSpace(l.Shaper.MustRun("cat", "/sys/class/net/"+l.Dev+"/address"))
	l.Peer.MustRun("ip", "neigh", "replace", Src4, "lladdr", smac, "dev", "pe0", "nud", "permanent")
	l.Peer.MustRun("ip", "neigh", "replace", Src6, "lladdr", smac, "dev", "pe0", "nud", "permanent")
	l.Shaper.MustRun("tc", "qdisc", "add", "dev", l.Dev, "root", "handle", "1:", "htb", "default", "2")
	l.Shaper.MustRun("tc", "class", "add", "dev", l.Dev, "parent", "1:", "classid", "1:1", "htb", "rate", "20gbit", "quantum", "200000")
	l.Shaper.MustRun("tc", "class", "add", "dev", l.Dev, "parent", "1:1", "classid", "1:2", "htb", "rate", "1gbit", "ceil", "20gbit", "quantum", "200000")
	idx, err := strconv.ParseUint(strings.TrimSpace(l.Shaper.MustRun("cat", "/sys/class/net/"+l.Dev+"/ifindex")), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	l.Ifindex = uint32(idx)
	h, err := netns.GetFromName(l.Shaper.Name)
	if err != nil {
		t.Fatalf("open netns %s: %v", l.Shaper.Name, err)
	}
	t.Cleanup(func() { h.Close() })
	l.NSFD = int(h)
	l.Conn, err = netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: int(h)})
	if err != nil {
		t.Fatalf("netlink in netns %s: %v", l.Shaper.Name, err)
	}
	t.Cleanup(func() { l.Conn.Close() })
	return l
}

// UserClass is the class id of user i.
func UserClass(i int) model.Handle { return model.MakeHandle(1, model.FirstUserMinor+uint16(i)) }

// AddClasses makes user classes 0..n-1 with one tc -batch.
func (l *Lab) AddClasses(n int) {
	l.T.Helper()
	f, err := os.CreateTemp(l.T.TempDir(), "classes")
	if err != nil {
		l.T.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, "class add dev %s parent 1:1 classid %v htb rate 1mbit ceil 20gbit quantum 200000\n", l.Dev, UserClass(i))
	}
	if err := w.Flush(); err != nil {
		l.T.Fatal(err)
	}
	f.Close()
	l.Shaper.MustRun("tc", "-batch", f.Name())
}

var classStatRE = regexp.MustCompile(`(?m)^class htb (\S+) .*\n\s+Sent (\d+) bytes (\d+) pkt`)

// Packets reads every class's packet counter.
func (l *Lab) Packets() map[string]uint64 {
	l.T.Helper()
	out := l.Shaper.MustRun("tc", "-s", "class", "show", "dev", l.Dev)
	m := map[string]uint64{}
	for _, s := range classStatRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.ParseUint(s[3], 10, 64)
		m[s[1]] = n
	}
	if len(m) == 0 {
		l.T.Fatalf("no class counters in:\n%s", out)
	}
	return m
}

// Send sends n UDP datagrams from src to dst (port 9) out of the shaper
// namespace. src must be one of its addresses.
func (l *Lab) Send(src, dst netip.Addr, n int) {
	l.T.Helper()
	conn, err := l.socket(src)
	if err != nil {
		l.T.Fatalf("socket on %v in %s: %v", src, l.Shaper.Name, err)
	}
	defer conn.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9))
	for range n {
		if _, err := conn.WriteTo([]byte("shaperd classifier test"), to); err != nil {
			l.T.Fatalf("send %v -> %v: %v", src, dst, err)
		}
	}
}

// socket opens a UDP socket bound to src inside the shaper namespace.
func (l *Lab) socket(src netip.Addr) (net.PacketConn, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return nil, err
	}
	defer orig.Close()
	h, err := netns.GetFromName(l.Shaper.Name)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		return nil, err
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("cannot return to the original netns: %v", err)) // the thread would stay in the lab
		}
	}()
	network := "udp4"
	if src.Is6() {
		network = "udp6"
	}
	return net.ListenPacket(network, netip.AddrPortFrom(src, 0).String())
}

// ExpectClass sends n packets from src to dst and checks that exactly class
// want counted them (want 1:2, the default, for unclassified traffic).
func (l *Lab) ExpectClass(src, dst netip.Addr, want model.Handle) {
	l.T.Helper()
	l.ExpectClassNoisy(src, dst, want)
}

// ExpectClassNoisy is ExpectClass where the classes in noisy, like the
// default class, may also count the namespace's background traffic (a
// class of 0.0.0.0/0 or ::/0 counts MLD reports and router solicitations).
func (l *Lab) ExpectClassNoisy(src, dst netip.Addr, want model.Handle, noisy ...model.Handle) {
	l.T.Helper()
	const n = 3
	before := l.Packets()
	l.Send(src, dst, n)
	after := l.Packets()
	// The default class also carries the namespace's own background traffic
	// (IPv6 MLD, router solicitations), so it may count more; user classes
	// must count exactly the test packets.
	quiet := func(cls string) bool {
		return cls != model.DefaultClass.String() && !slices.ContainsFunc(noisy, func(h model.Handle) bool { return h.String() == cls })
	}
	for cls, a := range after {
		d := a - before[cls]
		switch {
		case cls == want.String() && (d < n || d > n && quiet(cls)):
			l.T.Errorf("%v -> %v: class %s counted %d packets, want %d", src, dst, cls, d, n)
		case cls != want.String() && cls != "1:1" && quiet(cls) && d != 0:
			l.T.Errorf("%v -> %v: class %s counted %d packets, want them in %v", src, dst, cls, d, want)
		}
	}
	if _, ok := after[want.String()]; !ok {
		l.T.Errorf("class %v does not exist", want)
	}
}
