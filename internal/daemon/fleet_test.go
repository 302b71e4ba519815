package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// fleetTestConfig is testConfig with a [fleet] whose etcd is unreachable
// (nothing listens on port 1): these tests hand the daemon what the agent
// would.
const fleetTestConfig = testConfig + `
[fleet]
endpoints = ["http://127.0.0.1:1"]
router = "r1"
dial_timeout = "100ms"
`

// sharedPlan is a shared plan where gold is 30mbit and alice and bob are
// users.
func sharedPlan(rev int64, goldRate string) *fleet.Plan {
	return &fleet.Plan{Revision: rev, Shared: config.Shared{
		Main: []byte("[policy]\nramp = \"0s\"\ntimezone = \"UTC\"\n[tiers.bronze]\nrate = \"5mbit\"\nceil = \"20mbit\"\n" +
			"[tiers.gold]\nrate = \"" + goldRate + "\"\nceil = \"100mbit\"\n"),
		Users: []byte(testUsers)}}
}

// userRate is the download rate of user's class in the fake kernel.
func userRate(t *testing.T, k *fakeKernel, user string) tbf.Rate {
	t.Helper()
	for _, c := range k.tree("lan0").Classes {
		if c.Labels.User == user {
			return c.Rate
		}
	}
	t.Fatalf("no class of %s on lan0", user)
	return 0
}

func mbit(n uint64) tbf.Rate { return tbf.Rate(n * 1_000_000) }

// TestFleetSharedPlan: a shared revision is applied like a reload (only
// the difference reaches the kernel) and cached; an invalid one is
// refused with the old plan kept and the reason in status; a restart
// without etcd starts from the cache.
func TestFleetSharedPlan(t *testing.T) {
	k := newFakeKernel("lan0", "ifb-lan0")
	clk := newFakeClock()
	dir := t.TempDir()
	writeConfig(t, dir, fleetTestConfig, testUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	if d.fleet == nil || d.fleet.shared != nil {
		t.Fatalf("fleet state at start without etcd or cache: %+v", d.fleet)
	}
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := userRate(t, k, "alice"); got != mbit(50) {
		t.Fatalf("alice before any shared plan: %v, want the local 50mbit", got)
	}

	writes := k.writeCount()
	d.applyShared(sharedPlan(7, "30mbit"))
	if got := userRate(t, k, "alice"); got != mbit(30) {
		t.Fatalf("alice after revision 7: %v, want 30mbit", got)
	}
	if n := k.writeCount() - writes; n == 0 || n > 2 {
		t.Errorf("revision 7 wrote %d kernel objects; want alice's class on each direction at most", n)
	}
	if st := d.status().Fleet; st == nil || st.Revision != 7 || st.Router != "r1" || st.Refused != 0 {
		t.Errorf("status.fleet after revision 7: %+v", st)
	}
	if got := gauges(t, d); got["shaperd_fleet_connected"] != 0 || got["shaperd_fleet_revision"] != 7 {
		t.Errorf("fleet metrics: %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", FleetCacheFile)); err != nil {
		t.Errorf("no cache after an applied revision: %v", err)
	}

	// The same revision again (a reconnect reads everything again): not
	// applied again.
	reloads := counterValue(t, d.stats.reloads.WithLabelValues("ok"))
	d.applyShared(sharedPlan(7, "30mbit"))
	if n := counterValue(t, d.stats.reloads.WithLabelValues("ok")); n != reloads {
		t.Errorf("revision 7 seen again was applied again (%v reloads, was %v)", n, reloads)
	}

	bad := sharedPlan(8, "30mbit")
	bad.Shared.Main = []byte(strings.Replace(string(bad.Shared.Main), `ceil = "100mbit"`, `ceil = "1mbit"`, 1))
	d.applyShared(bad)
	if got := userRate(t, k, "alice"); got != mbit(30) {
		t.Errorf("alice after the invalid revision 8: %v, want 30mbit kept", got)
	}
	st := d.status().Fleet
	if st.Revision != 7 || st.Refused != 8 || len(st.Errors) == 0 || !strings.Contains(st.Errors[0], "fleet rev 8: shared.toml:9:1: tiers.gold.ceil") {
		t.Errorf("status.fleet after the invalid revision 8: %+v", st)
	}

	// A restart while etcd is unreachable: revision 7 from the cache.
	d.Close()
	k2 := newFakeKernel("lan0", "ifb-lan0")
	d2, _ := newTestDaemon(t, k2, clk, dir)
	defer d2.Close()
	if d2.fleet.shared == nil || d2.fleet.shared.Revision != 7 {
		t.Fatalf("restart without etcd: shared %+v, want the cached revision 7", d2.fleet.shared)
	}
	if err := d2.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := userRate(t, k2, "alice"); got != mbit(30) {
		t.Errorf("alice after a restart from the cache: %v, want 30mbit", got)
	}
}

// TestFleetOverrides: fleet overrides apply; a local override of the same
// target wins on this router; one the plan cannot apply is reported; one
// above this router's bandwidth (routers of a fleet have links of
// different sizes) is capped to it.
func TestFleetOverrides(t *testing.T) {
	k := newFakeKernel("lan0", "ifb-lan0")
	clk := newFakeClock()
	dir := t.TempDir()
	writeConfig(t, dir, fleetTestConfig, testUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	defer d.Close()
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	alice := policy.Target{Kind: policy.TargetUser, Name: "alice"}
	ghost := policy.Target{Kind: policy.TargetUser, Name: "ghost"}
	d.applyFleetOverrides([]policy.Override{
		{Target: alice, Rate: mbit(7), Ceil: mbit(7), Set: clk.Now()},
		{Target: ghost, Rate: mbit(1), Set: clk.Now()},
		{Target: policy.Target{Kind: policy.TargetIface, Name: "eth9"}, Rate: mbit(10), Set: clk.Now()},                // not on this router
		{Target: policy.Target{Kind: policy.TargetUser, Name: "bob"}, Rate: mbit(5), Ceil: mbit(5000), Set: clk.Now()}, // a ceil above the bandwidth
		{Target: policy.Target{Kind: policy.TargetIface, Name: "lan0"}, Rate: mbit(5000), Set: clk.Now()},              // above both sides'
	}, nil)
	if got := userRate(t, k, "alice"); got != mbit(7) {
		t.Fatalf("alice with a fleet override: %v, want 7mbit", got)
	}
	if st := d.status().Fleet; st.Overrides != 3 || len(st.Errors) != 2 || !strings.Contains(st.Errors[0], "ghost") ||
		!strings.Contains(st.Errors[1], "eth9") {
		t.Errorf("status.fleet: %+v", st)
	}
	for _, c := range []struct {
		device string
		bw     tbf.Rate
	}{{"lan0", mbit(1000)}, {"ifb-lan0", mbit(100)}} {
		var root, bob model.Class
		for _, cl := range k.tree(c.device).Classes {
			switch {
			case cl.Handle == model.RootClass:
				root = cl
			case cl.Labels.User == "bob":
				bob = cl
			}
		}
		if root.Ceil != c.bw || bob.Ceil != c.bw {
			t.Errorf("%s: root ceil %v, bob's %v; want both capped to the bandwidth %v", c.device, root.Ceil, bob.Ceil, c.bw)
		}
	}
	if _, err := d.setRate(control.SetRateRequest{Target: "alice", Rate: mbit(3)}, nil); err != nil {
		t.Fatal(err)
	}
	if got := userRate(t, k, "alice"); got != mbit(3) {
		t.Fatalf("alice with a local override over the fleet one: %v, want 3mbit", got)
	}
	// shaperctl overrides lists both, the fleet's marked as such and as
	// replaced by the local one here.
	var sources []string
	for _, o := range d.overrideList(clk.Now()) {
		if o.Target == "alice" {
			sources = append(sources, fmt.Sprintf("%s %v %s", o.Source, o.Shadowed, o.Rate))
		}
	}
	if want := []string{"local false 3mbit", "fleet true 7mbit"}; !slices.Equal(sources, want) {
		t.Errorf("overrides of alice: %q, want %q", sources, want)
	}
	if _, err := d.clear(control.ClearRequest{Target: "alice"}); err != nil {
		t.Fatal(err)
	}
	if got := userRate(t, k, "alice"); got != mbit(7) {
		t.Fatalf("alice after the local override is cleared: %v, want the fleet's 7mbit", got)
	}
	if ovs := d.overrideList(clk.Now()); len(ovs) != 3 || ovs[1].Target != "alice" || ovs[1].Source != control.SourceFleet || ovs[1].Shadowed {
		t.Errorf("overrides with the fleet's alone: %+v, want the fleet's, alice's in force", ovs)
	}
	d.applyFleetOverrides(nil, nil)
	if got := userRate(t, k, "alice"); got != mbit(50) {
		t.Fatalf("alice without overrides: %v, want 50mbit", got)
	}
}

// gauges returns the shaperd_fleet_* gauges the daemon exports.
func gauges(t *testing.T, d *Daemon) map[string]float64 {
	t.Helper()
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "shaperd_fleet_") {
			out[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return out
}

// TestNoFleetNoFleetState: without [fleet] the daemon has no fleet state,
// no fleet status and no fleet metrics.
func TestNoFleetNoFleetState(t *testing.T) {
	d, _ := newTestDaemon(t, newFakeKernel("lan0", "ifb-lan0"), newFakeClock(), "")
	defer d.Close()
	if d.fleet != nil || d.status().Fleet != nil {
		t.Errorf("fleet state without [fleet]: %+v", d.fleet)
	}
	if g := gauges(t, d); len(g) != 0 {
		t.Errorf("fleet metrics without [fleet]: %v", g)
	}
}

// TestFleetQuotaLedger: other routers' usage of a user adds to the quota:
// the user goes over quota on this router as soon as the fleet-wide sum
// passes it, although this router alone counted nothing.
func TestFleetQuotaLedger(t *testing.T) {
	k := newFakeKernel("lan0", "ifb-lan0")
	clk := newFakeClock()
	dir := t.TempDir()
	writeConfig(t, dir, fleetTestConfig, testUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	defer d.Close()
	p := sharedPlan(3, "30mbit")
	p.Shared.Main = append(p.Shared.Main, []byte("quota = \"1mb\"\nquota_period = \"day\"\nover_quota_rate = \"2mbit\"\n")...)
	d.applyShared(p)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := userRate(t, k, "alice"); got != mbit(30) {
		t.Fatalf("alice under quota: %v, want 30mbit", got)
	}
	// Run's loop is past its first pass: remote usage is evaluated at once,
	// not at the next policy tick.
	d.ready = true
	start := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC) // the fake clock's day
	d.applyFleetUsage(map[string][]policy.RemoteUsage{"alice": {{Router: "r2", Start: start, Bytes: 600 << 10}}})
	if got := userRate(t, k, "alice"); got != mbit(30) {
		t.Fatalf("alice at 600kb of 1mb fleet-wide: %v, want 30mbit", got)
	}
	d.applyFleetUsage(map[string][]policy.RemoteUsage{"alice": {{Router: "r2", Start: start, Bytes: 600 << 10}, {Router: "r3", Start: start, Bytes: 600 << 10}}})
	if got := userRate(t, k, "alice"); got != mbit(2) {
		t.Fatalf("alice at 1.2mb of 1mb fleet-wide: %v, want the over-quota 2mbit", got)
	}
}

// TestFleetRefusedRetriedAtReload: a revision refused because of this
// router's own file (its default tier is not in the fleet's plan) is
// applied by the reload that fixes the file.
func TestFleetRefusedRetriedAtReload(t *testing.T) {
	k := newFakeKernel("lan0", "ifb-lan0")
	clk := newFakeClock()
	dir := t.TempDir()
	writeConfig(t, dir, fleetTestConfig, testUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	defer d.Close()
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := sharedPlan(4, "30mbit")
	p.Shared.Main = []byte(strings.Replace(string(p.Shared.Main), "[tiers.bronze]", "[tiers.silver]", 1))
	p.Shared.Users = []byte(strings.Replace(string(p.Shared.Users), `tier = "bronze"`, `tier = "silver"`, 1))
	d.applyShared(p)
	if st := d.status().Fleet; st.Refused != 4 || st.Revision != 0 || !strings.Contains(strings.Join(st.Errors, "\n"), "default_tier") {
		t.Fatalf("revision 4 with a tier this router's file lacks: %+v", st)
	}
	writeConfig(t, dir, strings.ReplaceAll(fleetTestConfig, `default_tier = "bronze"`, `default_tier = "silver"`), testUsers)
	if err := d.reload(false); err != nil {
		t.Fatal(err)
	}
	if st := d.status().Fleet; st.Refused != 0 || st.Revision != 4 || len(st.Errors) != 0 {
		t.Errorf("after the reload that fixes the file: %+v", st)
	}
	if got := userRate(t, k, "alice"); got != mbit(30) {
		t.Errorf("alice: %v, want revision 4's 30mbit", got)
	}
}
