package daemon

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestQuotaCountersReadOnPolicyTick: with a quota, the policy tick reads
// the counters (policy.quota_interval, 1 s) and a user over quota is
// slowed at that tick, not at the next reconcile tick (5 s); without a
// quota the policy tick reads nothing.
func TestQuotaCountersReadOnPolicyTick(t *testing.T) {
	for _, quota := range []bool{false, true} {
		k := newFakeKernel("lan0", "ifb-lan0")
		clk := newFakeClock()
		cfg := testConfig
		if quota {
			cfg = strings.Replace(cfg, "[tiers.gold]\n", "[tiers.gold]\nquota = \"1mb\"\nquota_period = \"day\"\nover_quota_rate = \"2mbit\"\n", 1)
		}
		_, c := runDaemonConfig(t, k, clk, io.Discard, &recNotifier{}, cfg)
		syncLoop(t, c)
		if got := userRate(t, k, "alice"); got != mbit(50) {
			t.Fatalf("quota %v: alice before any traffic: %v, want 50mbit", quota, got)
		}
		reads := k.counterReadCount()
		aliceSent := func(bytes uint64) {
			k.setUserBytes("alice", bytes)
			clk.Advance(t, time.Second)
			syncLoop(t, c)
		}
		aliceSent(0)
		aliceSent(2 << 20)
		got, n := userRate(t, k, "alice"), k.counterReadCount()-reads
		switch {
		case !quota && n != 0:
			t.Errorf("no quota: a policy tick read the counters %d times", n)
		case quota && n == 0:
			t.Errorf("quota: the policy tick read no counters")
		case quota && got != mbit(2):
			t.Errorf("quota: alice at 2 MiB of 1 MiB, one policy tick later: %v, want the over-quota 2mbit", got)
		}
	}
}

// A user's quota usage survives their removal (a reload of a users file
// without them, a restart meanwhile) and counts again when the same name
// comes back.
func TestQuotaUsageSurvivesRemoval(t *testing.T) {
	k := newFakeKernel("lan0", "ifb-lan0")
	clk := newFakeClock()
	dir := t.TempDir()
	cfg := strings.Replace(testConfig, "[tiers.gold]\n", "[tiers.gold]\nquota = \"10mb\"\nquota_period = \"month\"\nover_quota_rate = \"2mbit\"\n", 1)
	writeConfig(t, dir, cfg, testUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.setUserBytes("alice", 3<<20)
	d.refreshCounters(clk.Now(), 0)
	used := func(d *Daemon) uint64 {
		t.Helper()
		for _, u := range d.status().Users {
			if u.Name == "alice" && u.Quota != nil {
				return u.Quota.Used
			}
		}
		t.Fatal("alice has no quota in status")
		return 0
	}
	before := used(d)
	if before < 3<<20 {
		t.Fatalf("alice used %d before the removal, want at least 3 MiB", before)
	}
	bobOnly := testUsers[strings.Index(testUsers, "[[user]]\nname = \"bob\""):]
	writeConfig(t, dir, cfg, bobOnly)
	if err := d.reload(false); err != nil {
		t.Fatal(err)
	}
	// A restart while alice is gone: the state file keeps her count.
	d2, _ := newTestDaemon(t, k, clk, dir)
	if err := d2.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, dir, cfg, testUsers)
	if err := d2.reload(false); err != nil {
		t.Fatal(err)
	}
	if got := used(d2); got != before {
		t.Errorf("alice back: used %d, want the %d counted before her removal", got, before)
	}
}
