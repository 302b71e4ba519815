package main

import (
	"strings"
	"testing"
)

// TestCheckDiff: `shaperd --check --diff` beside the running daemon (as an
// operator runs it before a reload) lists what applying a new
// configuration would change, users before -> after with their predicted
// rates, and writes nothing.
func TestCheckDiff(t *testing.T) {
	u := newUnitLab(t, 3, daemonConfig, labUsers)
	bin, _ := binaries(t)
	w := u.metric("shaperd_kernel_writes_total")
	code, out := runCmd(t, u.Router.Command(bin, "--config", u.cfg, "--check", "--diff"))
	if code != 0 || !strings.Contains(out, "r-lan/egress (r-lan): the kernel holds the plan; nothing to change") {
		t.Errorf("--check --diff of the plan in force: exit %d\n%s", code, out)
	}
	// gold's ceil 40 -> 30mbit (rate too), and a new user.
	next := strings.Replace(strings.Replace(daemonConfig, `rate = "40mbit"`, `rate = "30mbit"`, 1), `ceil = "40mbit"`, `ceil = "30mbit"`, 1)
	users := labUsers(u.RouterLab) + "[[user]]\nname = \"newbie\"\ntier = \"silver\"\naddresses = [\"198.18.77.1\"]\n"
	u.writeConfig(next, users)
	code, out = runCmd(t, u.Router.Command(bin, "--config", u.cfg, "--check", "--diff", "-v"))
	t.Logf("--check --diff -v:\n%s", out)
	for _, want := range []string{
		"r-lan/egress (r-lan): ", " kernel changes (",
		"u2", "40mbit/40mbit", "30mbit/30mbit", "40.00 Mbit/s", "30.00 Mbit/s",
		"newbie", "(new)",
		"add class", // -v lists each change
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--check --diff lacks %q (exit %d)", want, code)
		}
	}
	if got := u.metric("shaperd_kernel_writes_total") - w; got != 0 {
		t.Errorf("%v kernel writes", got)
	}
	if c := u.classOf("r-lan", u.Users4[2]); c.Rate != 40e6 {
		t.Errorf("u2 is at %v after --check --diff: it applied something", c.Rate)
	}
	if code, out := runCmd(t, u.Router.Command(bin, "--config", u.cfg, "--diff")); code != 2 || !strings.Contains(out, "--diff goes with --check") {
		t.Errorf("--diff alone: exit %d\n%s", code, out)
	}
}
