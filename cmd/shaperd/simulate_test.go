package main

import (
	"strings"
	"testing"
)

// --simulate runs offline on the example configuration: gold's peak
// schedule (weekdays 19:00-23:00) caps alice at 60mbit on a Friday evening.
func TestSimulateFlag(t *testing.T) {
	code, out, errOut := runMain("--config", "../../configs/shaperd.toml", "--simulate", "--at", "2026-12-04 21:00")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "alice") || !strings.Contains(out, "60mbit") || !strings.Contains(out, "schedule gold#0") {
		t.Errorf("output lacks alice's scheduled ceil:\n%s", out)
	}
	if code, _, errOut := runMain("--config", "../../configs/shaperd.toml", "--simulate", "--demand", "nobody=max"); code != 2 || !strings.Contains(errOut, "nobody") {
		t.Errorf("unknown user: exit %d, stderr %q", code, errOut)
	}
}
