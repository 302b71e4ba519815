package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// A restart with a changed plan ramps from the rates the kernel holds
// (the Ramper is seeded from the adopted tree) instead of jumping.
func TestRestartRampsFromKernelRates(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	dir := t.TempDir()
	cfg := strings.Replace(testConfig, `ramp = "0s"`, `ramp = "4s"`, 1)
	writeConfig(t, dir, cfg, testUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "alice").Ceil; c != 100*tbf.Mbit {
		t.Fatalf("alice's ceil %v after the first apply, want 100mbit", c)
	}
	// Restart with gold's ceil lowered to 60mbit.
	writeConfig(t, dir, strings.Replace(cfg, `ceil = "100mbit"`, `ceil = "60mbit"`, 1), testUsers)
	d2, _ := newTestDaemon(t, k, clk, dir)
	if err := d2.policyStep(clk.Now()); err != nil {
		t.Fatal(err)
	}
	if c := userClass(t, d2, k, "lan0/egress", "lan0", "alice").Ceil; c != 100*tbf.Mbit {
		t.Errorf("alice's ceil right after the restart: %v, want 100mbit (ramping from the kernel's)", c)
	}
	if !d2.ramper.Active() {
		t.Error("no ramp after a restart with a lower ceil")
	}
	prev := 100 * tbf.Mbit
	for i := 0; i < 20; i++ {
		clk.now = clk.now.Add(RampStep)
		if err := d2.policyTick(clk.Now()); err != nil {
			t.Fatal(err)
		}
		c := userClass(t, d2, k, "lan0/egress", "lan0", "alice").Ceil
		if c > prev {
			t.Errorf("step %d: ceil rose from %v to %v", i, prev, c)
		}
		prev = c
	}
	if prev != 60*tbf.Mbit {
		t.Errorf("after the ramp alice's ceil is %v, want 60mbit", prev)
	}
	// Bob's class did not change and was not rewritten into a ramp.
	if c := userClass(t, d2, k, "lan0/egress", "lan0", "bob").Ceil; c != 20*tbf.Mbit {
		t.Errorf("bob's ceil %v, want 20mbit", c)
	}
	_ = time.Second
}
