package kernel

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/netnslab"
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
