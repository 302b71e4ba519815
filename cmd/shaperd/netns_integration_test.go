package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

const labConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
reconcile_interval = "1s"
log_level = "debug"

[policy]
timezone = "UTC"

[[interface]]
name = "%[2]s"
bandwidth = "1gbit"
default_tier = "bronze"

[[interface]]
name = "%[2]s"
direction = "ingress"
ifb = "r-ifb"
bandwidth = "1gbit"
default_tier = "bronze"

[tiers.bronze]
rate = "10mbit"
ceil = "20mbit"
`

func writeLabConfig(t *testing.T, dir, iface string, lab *netnslab.RouterLab) string {
	t.Helper()
	p := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(labConfig, dir, iface)), 0o644); err != nil {
		t.Fatal(err)
	}
	users := fmt.Sprintf("[[user]]\nname = \"u0\"\ntier = \"bronze\"\naddresses = [%q]\n", lab.Users4[0])
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBinaryInNetns is the --netns flag's own test (shaping another
// namespace from outside it); every other daemon test starts shaperd inside
// the namespace as the systemd unit does (see unitlab_test.go).
func TestBinaryInNetns(t *testing.T) {
	netnslab.Require(t)
	bin := buildShaperd(t)
	lab := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: 1})
	dir := t.TempDir()
	cfg := writeLabConfig(t, dir, netnslab.RouterLANDev, lab)
	qdisc := func(dev string) string {
		out, _ := lab.Router.Run("tc", "qdisc", "show", "dev", dev)
		return out
	}
	shaperd := func(args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"--config", cfg, "--netns", lab.Router.Name}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}

	if code, out := shaperd("--once", "--log-format", "json"); code != 0 || !strings.Contains(out, `"msg":"applied"`) {
		t.Fatalf("--once: exit %d\n%s", code, out)
	}
	if q := qdisc("r-lan"); !strings.Contains(q, "qdisc htb 1:") {
		t.Fatalf("--once left no htb on r-lan:\n%s", q)
	}
	if q := qdisc("r-ifb"); !strings.Contains(q, "qdisc htb 1:") {
		t.Fatalf("--once left no htb on r-ifb:\n%s", q)
	}
	// Again: nothing to do.
	if code, out := shaperd("--once"); code != 0 || strings.Contains(out, "msg=applied") {
		t.Errorf("second --once: exit %d, wrote something:\n%s", code, out)
	}

	if code, out := shaperd("--teardown"); code != 0 {
		t.Fatalf("--teardown: exit %d\n%s", code, out)
	}
	if q := qdisc("r-lan"); strings.Contains(q, "htb") {
		t.Errorf("--teardown left htb:\n%s", q)
	}
	if out, err := lab.Router.Run("ip", "link", "show", "r-ifb"); err == nil {
		t.Errorf("--teardown left the IFB:\n%s", out)
	}

	// A missing interface: --once fails naming it.
	writeLabConfig(t, dir, "r-nope", lab)
	if code, out := shaperd("--once"); code != 1 || !strings.Contains(out, "r-nope") {
		t.Errorf("--once with a missing interface: exit %d\n%s", code, out)
	}
}
