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
