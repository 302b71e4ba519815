package daemon

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// probingKernel is the fake kernel with a fixed set of leaf kinds.
type probingKernel struct {
	*fakeKernel
	kinds map[string]bool
}

func (k probingKernel) LeafKinds() (map[string]bool, error) { return k.kinds, nil }

// A kernel without fq_codel gets every user class a bfifo sized to
// queue_latency at the class's ceil (the default leaf's fallback); with
// fq_codel the default is fq_codel.
func TestDaemonDefaultLeaf(t *testing.T) {
	for _, tt := range []struct {
		kinds map[string]bool
		want  model.LeafQdisc
	}{
		{map[string]bool{"fq_codel": false, "bfifo": true}, model.LeafQdisc{Kind: "bfifo", Limit: 625000, Latency: 50 * time.Millisecond}}, // gold ceil 100mbit * 50ms
		{map[string]bool{"fq_codel": true, "bfifo": true}, model.LeafQdisc{Kind: "fq_codel"}},
	} {
		k := probingKernel{newFakeKernel("lan0"), tt.kinds}
		d, _ := newTestDaemon(t, k, newFakeClock(), "")
		if err := d.Once(context.Background()); err != nil {
			t.Fatal(err)
		}
		alice := userClass(t, d, k.fakeKernel, "lan0/egress", "lan0", "alice")
		if alice.Leaf == nil || *alice.Leaf != tt.want {
			t.Errorf("kinds %v: alice's leaf %+v, want %+v", tt.kinds, alice.Leaf, tt.want)
		}
	}
}

// The daemon's change paths (a ramp up, a clear, a --for that expires; the
// test plan's default ramp is 0s) hand the kernel a latency-sized leaf for
// the class's new ceil every time. The fake kernel takes every change it
// is given, so this covers the daemon's side; that the real kernel is
// written for a small resize too (a ramp step) is TestLeafQdiscsInKernel's
// part in pkg/kernel.
func TestLeafFollowsEveryRateChange(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	cfg := strings.Replace(testConfig, `default_tier = "bronze"`, `default_tier = "bronze"
leaf_qdisc = "bfifo"`, 1)
	d, c := runDaemonConfig(t, k, clk, io.Discard, &recNotifier{}, cfg)
	syncLoop(t, c)
	check := func(when string, ceil tbf.Rate) {
		t.Helper()
		bob := userClass(t, d, k, "lan0/egress", "lan0", "bob")
		want := uint32(ceil.BytesPerSecond() * 50 / 1000) // 50ms at the ceil
		if bob.Ceil != ceil || bob.Leaf == nil || bob.Leaf.Limit != want {
			t.Errorf("%s: bob's ceil %v, leaf %+v; want ceil %v and a queue of %d bytes", when, bob.Ceil, bob.Leaf, ceil, want)
		}
	}
	check("at start", 20*tbf.Mbit)
	steps := func(n int) {
		for i := 0; i < n; i++ {
			clk.Advance(t, RampStep)
			syncLoop(t, c)
		}
	}
	if _, err := c.SetRate(context.Background(), control.SetRateRequest{Target: "bob", Rate: 40 * tbf.Mbit, Ramp: control.DurationPtr(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	steps(12)
	check("after a 2s ramp up to 40mbit", 40*tbf.Mbit)
	if _, err := c.Clear(context.Background(), control.ClearRequest{Target: "bob"}); err != nil {
		t.Fatal(err)
	}
	steps(12)
	check("after a clear (the policy's default ramp)", 20*tbf.Mbit)
	if _, err := c.SetRate(context.Background(), control.SetRateRequest{Target: "bob", Rate: 30 * tbf.Mbit, Ramp: control.DurationPtr(0), For: control.DurationPtr(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	syncLoop(t, c)
	check("set-rate 30mbit --for 1m", 30*tbf.Mbit)
	clk.Advance(t, time.Minute+time.Second)
	syncLoop(t, c)
	steps(4)
	check("after --for expired", 20*tbf.Mbit)
}

// The other paths that raise a class's ceil (a quota reset, the end of a
// schedule window that lowered it, a reload whose new rates ramp in) also
// hand the kernel a leaf sized for the new ceil, not the old one.
func TestLeafFollowsQuotaScheduleAndReload(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock() // Wednesday 2026-12-02 10:00 UTC
	cfg := strings.Replace(testConfig, `default_tier = "bronze"`, `default_tier = "bronze"
leaf_qdisc = "bfifo"`, 1)
	cfg = strings.Replace(cfg, "[tiers.gold]\n", "[tiers.gold]\nquota = \"1mb\"\nquota_period = \"day\"\nover_quota_rate = \"2mbit\"\n", 1)
	withWindow := cfg + `
[[tiers.bronze.schedule]]
days = ["all"]
from = "10:00"
to = "10:30"
ceil = "10mbit"
`
	d, c := runDaemonConfig(t, k, clk, io.Discard, &recNotifier{}, withWindow)
	syncLoop(t, c)
	check := func(when, user string, ceil tbf.Rate) {
		t.Helper()
		cl := userClass(t, d, k, "lan0/egress", "lan0", user)
		want := uint32(ceil.BytesPerSecond() * 50 / 1000) // 50ms at the ceil
		if cl.Ceil != ceil || cl.Leaf == nil || cl.Leaf.Limit != want {
			t.Errorf("%s: %s's ceil %v, leaf %+v; want ceil %v and a queue of %d bytes", when, user, cl.Ceil, cl.Leaf, ceil, want)
		}
	}
	check("in bronze's 10:00-10:30 window", "bob", 10*tbf.Mbit)
	clk.Advance(t, 31*time.Minute)
	syncLoop(t, c)
	check("after the window ended", "bob", 20*tbf.Mbit)

	check("before any traffic", "alice", 100*tbf.Mbit)
	k.setUserBytes("alice", 2<<20)
	clk.Advance(t, time.Second)
	syncLoop(t, c)
	check("over quota", "alice", 2*tbf.Mbit)
	if _, err := c.ResetQuota(context.Background(), control.QuotaResetRequest{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(t, time.Second)
	syncLoop(t, c)
	check("after quota reset", "alice", 100*tbf.Mbit)

	// A reload that raises gold's ceil, ramped over 2 s.
	raised := strings.Replace(strings.Replace(withWindow, `ceil = "100mbit"`, `ceil = "200mbit"`, 1), `ramp = "0s"`, `ramp = "2s"`, 1)
	writeConfig(t, filepath.Dir(d.opts.ConfigPath), raised, testUsers)
	if _, err := c.Reload(context.Background(), control.ReloadRequest{}); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		clk.Advance(t, RampStep)
		syncLoop(t, c)
	}
	check("after a reload ramped gold's ceil up", "alice", 200*tbf.Mbit)
}
