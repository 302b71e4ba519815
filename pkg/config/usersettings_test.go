package config

import (
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestUserTierSettings(t *testing.T) {
	plan := mustLoad(t, `
[[interface]]
name = "lan0"
bandwidth = "1gbit"

[tiers.gold]
rate = "10mbit"
burst = "20kb"
prio = 3
quota = "100gb"
quota_period = "month"
over_quota_rate = "1mbit"
over_quota_ceil = "2mbit"
`, `
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.1.10"]

[[user]]
name = "bob"
tier = "gold"
addresses = ["198.18.1.11"]
burst = "64kb"
cburst = "128kb"
prio = 0
quota = "5gb"
quota_period = "day"
over_quota_rate = "512kbit"
leaf_qdisc = "fq_codel"
leaf_target = "2ms"
queue_latency = "20ms"

[[user]]
name = "carol"
tier = "gold"
addresses = ["198.18.1.12"]
over_quota_rate = "1500kbit"
`)
	gold, _ := plan.Tier("gold")
	alice, bob, carol := &plan.Users[0], &plan.Users[1], &plan.Users[2]
	if TierFor(gold, alice) != gold || alice.OwnTierSettings() {
		t.Error("alice sets nothing: TierFor must return the tier itself")
	}
	b := TierFor(gold, bob)
	if b == gold || b.Burst != 64*tbf.Kibibyte || b.CBurst != 128*tbf.Kibibyte || b.Prio != 0 ||
		b.Quota != 5*tbf.Gibibyte || b.QuotaPeriod != PeriodDay || b.OverQuotaRate != 512*tbf.Kbit || b.OverQuotaCeil != 2*tbf.Mbit {
		t.Errorf("bob's tier settings: %+v", *b)
	}
	if bob.Leaf.Kind != "fq_codel" || bob.Leaf.Target != 2*time.Millisecond || bob.QueueLatency != 20*time.Millisecond ||
		bob.Leaf.Key != "user[1].leaf_qdisc" || bob.Leaf.Source != "etc/users.toml:17:1" {
		t.Errorf("bob's leaf: %+v, latency %v", bob.Leaf, bob.QueueLatency)
	}
	// carol: her over_quota_rate with the tier's larger over_quota_ceil.
	if c := TierFor(gold, carol); c.OverQuotaRate != 1500*tbf.Kbit || c.OverQuotaCeil != 2*tbf.Mbit || c.Quota != gold.Quota || c.Prio != 3 {
		t.Errorf("carol's tier settings: %+v", *c)
	}
	if gold.Burst != 20*tbf.Kibibyte || gold.Prio != 3 || gold.Quota != 100*tbf.Gibibyte {
		t.Errorf("the tier itself changed: %+v", *gold)
	}
}
