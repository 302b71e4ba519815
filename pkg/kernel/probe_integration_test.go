package kernel

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// The probe finds exactly the kinds `tc` can create on a device (checked
// with tc on a veth in a lab namespace), and leaves the caller's
// namespace, and so its devices, untouched.
func TestProbeQdiscKinds(t *testing.T) {
	netnslab.Require(t)
	before, err := exec.Command("ip", "-o", "link").Output()
	if err != nil {
		t.Fatal(err)
	}
	kinds := append([]string{"no_such_qdisc_kind"}, LeafKinds...)
	have, err := ProbeQdiscKinds(kinds)
	if err != nil {
		t.Fatalf("ProbeQdiscKinds: %v", err)
	}
	t.Logf("leaf kinds in this kernel: %v", have)
	ns := netnslab.NewNS(t, "probe")
	peer := netnslab.NewNS(t, "probe2")
	netnslab.Veth(t, ns, "p0", peer, "p1")
	for _, kind := range kinds {
		_, tcErr := ns.Run("tc", "qdisc", "add", "dev", "p0", "root", "handle", "1:", kind)
		if tcErr == nil {
			ns.MustRun("tc", "qdisc", "del", "dev", "p0", "root")
		}
		if have[kind] != (tcErr == nil) {
			t.Errorf("%s: probe says %v, tc says %v", kind, have[kind], tcErr)
		}
	}
	if !have["pfifo"] || !have["bfifo"] || have["no_such_qdisc_kind"] {
		t.Errorf("probe result %v: pfifo and bfifo exist everywhere, no_such_qdisc_kind nowhere", have)
	}
	after, err := exec.Command("ip", "-o", "link").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(before), "\n") != strings.Count(string(after), "\n") {
		t.Errorf("the probe changed this namespace's links:\n%s\n->\n%s", before, after)
	}
	again, err := LeafKindsAvailable()
	if err != nil || again["pfifo"] != true {
		t.Errorf("cached probe: %v, %v", again, err)
	}
}

// Without namespaces to spare (the systemd unit's sandbox), the probe runs
// on a temporary device of its own in the Kernel's namespace: the same
// answer, and the device is gone afterwards while the namespace's other
// devices are as they were.
func TestProbeOnOwnLink(t *testing.T) {
	lab, k := labKernel(t, 1)
	want, err := ProbeQdiscKinds(LeafKinds)
	if err != nil {
		t.Fatal(err)
	}
	before := lab.Router.MustRun("ip", "-o", "link")
	k.mu.Lock()
	have, err := k.probeOnOwnLink(LeafKinds)
	k.mu.Unlock()
	if err != nil {
		t.Fatalf("probeOnOwnLink: %v", err)
	}
	for _, kind := range LeafKinds {
		if have[kind] != want[kind] {
			t.Errorf("%s: on a device %v, in a throwaway namespace %v", kind, have[kind], want[kind])
		}
	}
	if after := lab.Router.MustRun("ip", "-o", "link"); after != before {
		t.Errorf("links changed:\n%s\n->\n%s", before, after)
	}
	// A stale probe device (a crash during a probe) is replaced.
	lab.Router.MustRun("ip", "link", "add", ProbeLinkName, "type", "ifb")
	k.mu.Lock()
	_, err = k.probeOnOwnLink(LeafKinds)
	k.mu.Unlock()
	if err != nil {
		t.Fatalf("probe with a stale device: %v", err)
	}
	if out, _ := lab.Router.Run("ip", "link", "show", ProbeLinkName); strings.Contains(out, ProbeLinkName) {
		t.Errorf("the probe device is still there: %s", out)
	}
}

// As the systemd unit runs it (CAP_NET_ADMIN only, so no namespace can be
// created), LeafKinds still answers, from a temporary device of its own,
// the same as the throwaway-namespace probe, and leaves the namespace's
// devices as they were. The test runs itself in a lab namespace under
// setpriv with that capability set.
func TestLeafKindsWithNetAdminOnly(t *testing.T) {
	if os.Getenv("SHAPERD_PROBE_CHILD") == "1" {
		k, err := Open(Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		if _, err := ProbeQdiscKinds(LeafKinds); err == nil {
			t.Fatal("a namespace could be created: the capabilities were not dropped")
		}
		have, err := k.LeafKinds()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(have)
		fmt.Printf("KINDS %s\n", b)
		return
	}
	netnslab.Require(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is needed: %v", err)
	}
	want, err := ProbeQdiscKinds(LeafKinds)
	if err != nil {
		t.Fatal(err)
	}
	ns := netnslab.NewNS(t, "probecap")
	peer := netnslab.NewNS(t, "probecap2")
	netnslab.Veth(t, ns, "c0", peer, "c1")
	before := ns.MustRun("ip", "-o", "link")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := ns.Command("setpriv", "--bounding-set", "-all,+net_admin", "--inh-caps", "-all,+net_admin",
		"--ambient-caps", "-all,+net_admin", "--", self, "-test.run", "^TestLeafKindsWithNetAdminOnly$", "-test.v")
	cmd.Env = append(os.Environ(), "SHAPERD_PROBE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`KINDS (\{.*\})`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("child printed no kinds:\n%s", out)
	}
	var have map[string]bool
	if err := json.Unmarshal(m[1], &have); err != nil {
		t.Fatal(err)
	}
	for _, kind := range LeafKinds {
		if have[kind] != want[kind] {
			t.Errorf("%s: with CAP_NET_ADMIN only %v, in a throwaway namespace %v", kind, have[kind], want[kind])
		}
	}
	if after := ns.MustRun("ip", "-o", "link"); after != before {
		t.Errorf("links changed:\n%s\n->\n%s", before, after)
	}
}
