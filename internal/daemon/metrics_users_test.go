package daemon

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/shaperd/shaperd/pkg/model"
)

const metricsUsers = `
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.1.10"]

[[user]]
name = "bob"
tier = "bronze"
addresses = ["198.18.1.20"]

[[user]]
name = "carol"
tier = "gold"
addresses = ["198.18.1.30"]

[[user]]
name = "dave"
tier = "bronze"
addresses = ["198.18.1.40"]
`

// metricsDaemon is a daemon on the fake kernel with testConfig plus
// daemon.metrics_per_user = setting ("" leaves it out) and metricsUsers,
// applied once.
func metricsDaemon(t *testing.T, setting string) (*Daemon, *fakeKernel, *fakeClock, string) {
	t.Helper()
	cfg := testConfig
	if setting != "" {
		cfg = strings.Replace(cfg, "[daemon]\n", "[daemon]\nmetrics_per_user = "+setting+"\n", 1)
	}
	k, clk, dir := newFakeKernel("lan0"), newFakeClock(), t.TempDir()
	writeConfig(t, dir, cfg, metricsUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d, k, clk, dir
}

// dumpBytes gives the egress interface's user classes these byte
// counters in a dump the daemon samples.
func dumpBytes(t *testing.T, d *Daemon, k *fakeKernel, clk *fakeClock, bytes map[string]uint64) {
	t.Helper()
	st := d.ifaces[0]
	tr := k.tree("lan0")
	for i, c := range tr.Classes {
		if j, ok := st.want.Index(c.Handle); ok {
			if b, ok := bytes[st.tree().Classes[j].Labels.User]; ok {
				tr.Classes[i].Stats = &model.Stats{Bytes: b, Packets: b / 100, Drops: uint32(b / 1000)}
				continue
			}
		}
		tr.Classes[i].Stats = &model.Stats{}
	}
	clk.now = clk.now.Add(5 * time.Second)
	d.sample(st, tr, clk.Now())
}

// scrape gathers the daemon's registry.
func scrape(t *testing.T, d *Daemon) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// egressUsers lists the users with a series of name on the egress
// interface, sorted.
func egressUsers(mfs map[string]*dto.MetricFamily, name string) []string {
	var users []string
	for _, m := range mfs[name].GetMetric() {
		if label(m, "direction") == "egress" && label(m, "kind") == "user" {
			users = append(users, label(m, "user"))
		}
	}
	slices.Sort(users)
	return users
}

// value is the value of the series of name whose labels include want.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
next:
	for _, m := range mfs[name].GetMetric() {
		for k, v := range want {
			if label(m, k) != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return 0
}

// TestMetricsPerUser checks each daemon.metrics_per_user setting: which
// user classes get series, and that the interface's other classes always do.
func TestMetricsPerUser(t *testing.T) {
	bytes := map[string]uint64{"alice": 100, "bob": 5000, "carol": 300, "dave": 5000}
	for _, c := range []struct {
		setting string
		want    []string
	}{
		{"", []string{"alice", "bob", "carol", "dave"}},
		{"true", []string{"alice", "bob", "carol", "dave"}},
		{"false", nil},
		{`"top:2"`, []string{"bob", "dave"}}, // most bytes
		{`"top:3"`, []string{"bob", "carol", "dave"}},
		{`"top:10"`, []string{"alice", "bob", "carol", "dave"}},
	} {
		t.Run(c.setting, func(t *testing.T) {
			d, k, clk, _ := metricsDaemon(t, c.setting)
			dumpBytes(t, d, k, clk, bytes)
			mfs := scrape(t, d)
			for _, name := range []string{"shaperd_class_bytes_total", "shaperd_class_rate_bytes_per_second"} {
				if got := egressUsers(mfs, name); !slices.Equal(got, c.want) {
					t.Errorf("%s: users %v, want %v", name, got, c.want)
				}
			}
			kinds := map[string]bool{}
			for _, m := range mfs["shaperd_class_bytes_total"].GetMetric() {
				kinds[label(m, "kind")] = true
			}
			if !kinds["root"] || !kinds["default"] {
				t.Errorf("class kinds with series: %v; want root and default always", kinds)
			}
			if n := value(t, mfs, "shaperd_tier_users", map[string]string{"direction": "egress", "tier": "gold"}); n != 2 {
				t.Errorf("shaperd_tier_users{tier=gold} = %v, want 2", n)
			}
		})
	}
}

// TestTierCountersOnlyGrow checks shaperd_tier_*_total: the first sight of
// a class counts its kernel counter (the totals are the kernel's, across
// restarts of the daemon), later dumps add each user's change, a class
// counter that went back (recreated) counts from 0, and a tier keeps its
// counters through a reload that moves its users away.
func TestTierCountersOnlyGrow(t *testing.T) {
	d, k, clk, dir := metricsDaemon(t, "false")
	gold := map[string]string{"direction": "egress", "tier": "gold"}
	dumpBytes(t, d, k, clk, map[string]uint64{"alice": 10000, "carol": 20000}) // first sight
	if v := value(t, scrape(t, d), "shaperd_tier_bytes_total", gold); v != 30000 {
		t.Errorf("after the first dump: %v bytes, want the classes' 30000", v)
	}
	dumpBytes(t, d, k, clk, map[string]uint64{"alice": 15000, "carol": 21000})
	mfs := scrape(t, d)
	if v := value(t, mfs, "shaperd_tier_bytes_total", gold); v != 36000 {
		t.Errorf("bytes %v, want 36000", v)
	}
	if v := value(t, mfs, "shaperd_tier_packets_total", gold); v != 360 {
		t.Errorf("packets %v, want 360", v)
	}
	if v := value(t, mfs, "shaperd_tier_drops_total", gold); v != 36 {
		t.Errorf("drops %v, want 36", v)
	}
	dumpBytes(t, d, k, clk, map[string]uint64{"alice": 500, "carol": 21000}) // alice's class recreated
	if v := value(t, scrape(t, d), "shaperd_tier_bytes_total", gold); v != 36500 {
		t.Errorf("after a counter reset: %v bytes, want 36500", v)
	}

	// Everyone moves to bronze: gold keeps its count with 0 users.
	writeConfig(t, dir, strings.Replace(testConfig, "[daemon]\n", "[daemon]\nmetrics_per_user = false\n", 1),
		strings.ReplaceAll(metricsUsers, `"gold"`, `"bronze"`))
	if err := d.reload(false); err != nil {
		t.Fatal(err)
	}
	mfs = scrape(t, d)
	if v := value(t, mfs, "shaperd_tier_bytes_total", gold); v != 36500 {
		t.Errorf("after the reload: gold %v bytes, want 36500", v)
	}
	if v := value(t, mfs, "shaperd_tier_users", gold); v != 0 {
		t.Errorf("after the reload: gold has %v users, want 0", v)
	}
}

// TestQuotaMetrics checks shaperd_users_over_quota and
// shaperd_quota_exhausted_total across policy evaluations.
func TestQuotaMetrics(t *testing.T) {
	cfg := strings.Replace(testConfig, "[tiers.gold]\n", "[tiers.gold]\nquota = \"1kb\"\nover_quota_rate = \"1mbit\"\n", 1)
	k, clk, dir := newFakeKernel("lan0"), newFakeClock(), t.TempDir()
	writeConfig(t, dir, cfg, metricsUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	gold := map[string]string{"tier": "gold"}
	step := func() map[string]*dto.MetricFamily {
		t.Helper()
		if err := d.policyStep(clk.Now()); err != nil {
			t.Fatal(err)
		}
		return scrape(t, d)
	}
	mfs := step()
	if v := value(t, mfs, "shaperd_users_over_quota", gold); v != 0 {
		t.Errorf("over quota at start: %v", v)
	}
	if v := value(t, mfs, "shaperd_quota_exhausted_total", gold); v != 0 {
		t.Errorf("exhausted at start: %v", v)
	}
	if _, ok := mfs["shaperd_users_over_quota"]; ok {
		for _, m := range mfs["shaperd_users_over_quota"].GetMetric() {
			if label(m, "tier") == "bronze" {
				t.Error("a series for bronze, which has no quota")
			}
		}
	}
	d.usage.Observe("alice", "test", 0, clk.Now()) // a baseline, then 4kb
	d.usage.Observe("alice", "test", 4096, clk.Now())
	mfs = step()
	if v := value(t, mfs, "shaperd_users_over_quota", gold); v != 1 {
		t.Errorf("over quota after alice used 4kb of 1kb: %v, want 1", v)
	}
	if v := value(t, mfs, "shaperd_quota_exhausted_total", gold); v != 1 {
		t.Errorf("exhausted after alice went over: %v, want 1", v)
	}
	mfs = step() // still over: not counted again
	if v := value(t, mfs, "shaperd_quota_exhausted_total", gold); v != 1 {
		t.Errorf("exhausted after another evaluation: %v, want 1", v)
	}
}

// TestBuildInfo checks shaperd_build_info's labels.
func TestBuildInfo(t *testing.T) {
	for _, c := range []struct{ version, want string }{{"", "devel"}, {"0.0~git20261202.abc1234", "0.0~git20261202.abc1234"}} {
		d := &Daemon{opts: Options{Version: c.version}}
		d.stats.init()
		d.quota = newQuotaStats()
		mfs := scrape(t, d)
		if v := value(t, mfs, "shaperd_build_info", map[string]string{"version": c.want, "goversion": runtime.Version()}); v != 1 {
			t.Errorf("Version %q: shaperd_build_info = %v, want 1", c.version, v)
		}
	}
}
