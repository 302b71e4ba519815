package daemon

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// capsConfig is testConfig with a 50mbit upload side: gold's ceil
// (100mbit, uploads too) is above it and capped there, not on the 1gbit
// download side.
var capsConfig = strings.Replace(testConfig, "direction = \"ingress\"\nifb = \"ifb-lan0\"\nbandwidth = \"100mbit\"",
	"direction = \"ingress\"\nifb = \"ifb-lan0\"\nbandwidth = \"50mbit\"", 1)

// TestCapsStatusAndMetrics: a tier made for a bigger link is shaped on a
// smaller one with its ceil capped to the bandwidth: the kernel class,
// shaperctl status (configured and effective values, the tier's cap, the
// interface's list) and the metrics say so; an explicit set-rate above
// the small link stays refused (likely a typo).
func TestCapsStatusAndMetrics(t *testing.T) {
	if capsConfig == testConfig {
		t.Fatal("capsConfig did not change the ingress bandwidth")
	}
	k := newFakeKernel("lan0")
	d, c := runDaemonConfig(t, k, newFakeClock(), io.Discard, &recNotifier{}, capsConfig)
	st := syncLoop(t, c)

	if cl := userClass(t, d, k, "lan0/ingress", "ifb-lan0", "alice"); cl.Ceil != 50*tbf.Mbit || cl.Rate > cl.Ceil {
		t.Errorf("alice upload class: rate %s ceil %s, want the ceil capped to 50mbit", cl.Rate, cl.Ceil)
	}
	if cl := userClass(t, d, k, "lan0/egress", "lan0", "alice"); cl.Ceil != 100*tbf.Mbit {
		t.Errorf("alice download class: ceil %s, want 100mbit (fits 1gbit)", cl.Ceil)
	}
	for _, u := range st.Users {
		if u.Name != "alice" {
			continue
		}
		capped := u.Direction == "upload"
		want := 100 * tbf.Mbit
		if capped {
			want = 50 * tbf.Mbit
		}
		if u.Ceil != 100*tbf.Mbit || u.EffectiveCeil != want || strings.Contains(u.Reason, "capped") != capped {
			t.Errorf("alice %s: ceil %s effective %s reason %q; want 100mbit, %s, capped %v", u.Direction, u.Ceil, u.EffectiveCeil, u.Reason, want, capped)
		}
	}
	for _, is := range st.Interfaces {
		i := slices.IndexFunc(is.Tiers, func(ts control.TierStatus) bool { return ts.Name == "gold" })
		if i < 0 {
			t.Fatalf("%s %s: no tier gold in %+v", is.Name, is.Direction, is.Tiers)
		}
		gold := is.Tiers[i]
		if is.Direction == "ingress" {
			if gold.CappedCeil != 50*tbf.Mbit || !slices.Contains(is.Capped, "tier gold: ceil 100mbit capped to the bandwidth 50mbit (1 user)") {
				t.Errorf("ingress: gold %+v, capped %q", gold, is.Capped)
			}
			continue
		}
		if gold.CappedCeil != 0 || len(is.Capped) != 0 {
			t.Errorf("egress (1gbit): gold %+v, capped %q; want nothing capped", gold, is.Capped)
		}
	}

	mfs := scrape(t, d)
	for dir, want := range map[string]float64{"ingress": 50e6 / 8, "egress": 100e6 / 8} {
		l := map[string]string{"interface": "lan0", "direction": dir, "tier": "gold"}
		if v := value(t, mfs, "shaperd_tier_ceil_configured_bytes_per_second", l); v != 100e6/8 {
			t.Errorf("%s: configured gold ceil %v B/s, want 100mbit", dir, v)
		}
		if v := value(t, mfs, "shaperd_tier_ceil_effective_bytes_per_second", l); v != want {
			t.Errorf("%s: effective gold ceil %v B/s, want %v", dir, v, want)
		}
	}

	// set-rate above the small link is refused; at it, accepted.
	_, err := c.SetRate(context.Background(), control.SetRateRequest{Target: "alice", Rate: 60 * tbf.Mbit})
	var br *control.BadRequestError
	if !errors.As(err, &br) || !strings.Contains(err.Error(), "rate 60mbit is above lan0 ingress's bandwidth 50mbit") {
		t.Errorf("set-rate alice 60mbit: %v; want a refusal naming the 50mbit bound", err)
	}
	if _, err := c.SetRate(context.Background(), control.SetRateRequest{Target: "alice", Rate: 50 * tbf.Mbit}); err != nil {
		t.Errorf("set-rate alice 50mbit: %v", err)
	}
}

// TestFleetSharedPlanCapped: a shared plan whose gold tier (ceil 100mbit)
// was written for bigger links applies on a router whose upload side is
// 50mbit, with gold's ceil capped there, instead of being refused.
func TestFleetSharedPlanCapped(t *testing.T) {
	k := newFakeKernel("lan0", "ifb-lan0")
	dir := t.TempDir()
	writeConfig(t, dir, capsConfig+strings.TrimPrefix(fleetTestConfig, testConfig), testUsers)
	d, _ := newTestDaemon(t, k, newFakeClock(), dir)
	defer d.Close()
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.applyShared(sharedPlan(7, "30mbit"))
	if st := d.status().Fleet; st == nil || st.Revision != 7 || st.Refused != 0 {
		t.Fatalf("status.fleet after revision 7: %+v; want it in force", st)
	}
	if cl := userClass(t, d, k, "lan0/ingress", "ifb-lan0", "alice"); cl.Ceil != 50*tbf.Mbit || cl.Rate != 30*tbf.Mbit {
		t.Errorf("alice upload: rate %s ceil %s; want 30mbit and the ceil capped to 50mbit", cl.Rate, cl.Ceil)
	}
	if got := userRate(t, k, "alice"); got != mbit(30) {
		t.Errorf("alice download: %v, want 30mbit", got)
	}
}
