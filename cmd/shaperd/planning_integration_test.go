package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPlanningCommands: shaperctl simulate (live plan, what-ifs), status
// --explain and reload --dry-run against the daemon as the unit runs it;
// none of them changes anything.
func TestPlanningCommands(t *testing.T) {
	u := newUnitLab(t, 3, daemonConfig, labUsers)
	u.Download(t, u.Users4[2], 1) // u2 (gold, 40mbit) has a measured rate
	w := u.metric("shaperd_kernel_writes_total")

	out := u.mustCtl("simulate", "--demand", "*=max")
	for _, want := range []string{"u0", "bronze", "10mbit", "u2", "gold", "40mbit", "ceil"} {
		if !strings.Contains(out, want) {
			t.Errorf("simulate --demand '*=max' lacks %q:\n%s", want, out)
		}
	}
	// What if u0 had 5mbit? JSON in bits per second.
	out = u.mustCtl("simulate", "--demand", "*=max", "--set", "u0=5mbit", "--json")
	var rep struct {
		Users []struct {
			User          string  `json:"user"`
			Interface     string  `json:"interface"`
			Direction     string  `json:"direction"`
			BitsPerSecond *uint64 `json:"bits_per_second"`
		} `json:"users"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("simulate --json: %v\n%s", err, out)
	}
	found := false
	for _, r := range rep.Users {
		if r.User == "u0" && r.Interface == "r-lan" && r.Direction == "download" {
			found = true
			if r.BitsPerSecond == nil || *r.BitsPerSecond != 5_000_000 {
				t.Errorf("u0 with --set u0=5mbit: %v bit/s, want 5000000", r.BitsPerSecond)
			}
		}
	}
	if !found {
		t.Errorf("no u0 download row in:\n%s", out)
	}
	if c := u.classOf("r-lan", u.Users4[0]); c.Rate != 10e6 {
		t.Errorf("simulate --set changed u0 in the kernel: %v", c.Rate)
	}
	if code, out := u.shaperctl("simulate", "--demand", "nobody=max"); code != 1 || !strings.Contains(out, "nobody") {
		t.Errorf("simulate with an unknown user: exit %d\n%s", code, out)
	}

	t.Logf("simulate on measured demand:\n%s", u.mustCtl("simulate"))
	_, out = u.shaperctl("status", "--explain")
	t.Logf("status --explain:\n%s", out)
	if !strings.Contains(out, "limited by") {
		t.Errorf("status --explain says nothing of what limits users:\n%s", out)
	}

	u.writeConfig(strings.Replace(daemonConfig, `ceil = "20mbit"`, `ceil = "25mbit"`, 1), labUsers(u.RouterLab))
	out = u.mustCtl("reload", "--dry-run")
	for _, want := range []string{"r-lan/egress (r-lan): ", "change class", "u1", "20mbit/20mbit", "20mbit/25mbit"} {
		if !strings.Contains(out, want) {
			t.Errorf("reload --dry-run lacks %q:\n%s", want, out)
		}
	}
	if c := u.classOf("r-lan", u.Users4[1]); c.Ceil != 20e6 {
		t.Errorf("reload --dry-run applied the new ceil: %v", c.Ceil)
	}
	if got := u.metric("shaperd_kernel_writes_total") - w; got != 0 {
		t.Errorf("%v kernel writes from the planning commands", got)
	}
}
