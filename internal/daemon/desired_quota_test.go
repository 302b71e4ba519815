package daemon

import (
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
