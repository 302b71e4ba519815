package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

const userSettingsMain = `
[policy]
timezone = "UTC"

[[interface]]
name = "lan0"
bandwidth = "100mbit"

[tiers.gold]
rate = "10mbit"
ceil = "20mbit"
burst = "20kb"
prio = 3
quota = "100gb"
over_quota_rate = "2mbit"
over_quota_ceil = "4mbit"
leaf_qdisc = "sfq"
`

const userSettingsUsers = `
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.1.10"]

[[user]]
name = "bob"
tier = "gold"
addresses = ["198.18.1.11"]
burst = "64kb"
cburst = "32kb"
prio = 0
quota = "1kb"
quota_period = "day"
over_quota_rate = "1mbit"
over_quota_ceil = "1mbit"
leaf_qdisc = "pfifo"
leaf_limit = 50
`

// A user's own burst, cburst, prio, quota (with its period and over-quota
// rates) and leaf replace the tier's; a user without them keeps the tier's.
func TestUserSettingsPrecedence(t *testing.T) {
	p := loadPlan(t, userSettingsMain, userSettingsUsers)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	usage := NewUsage(time.UTC)
	usage.Configure(p)
	key := CounterKey("lan0", config.Egress, "1:100")
	for _, name := range []string{"alice", "bob"} {
		usage.Observe(name, key, 0, now)
		usage.Observe(name, key, 4096, now) // 4 KiB: over bob's 1kb, far under alice's 100gb
	}
	r := Evaluate(p, Overrides{}, usage, now)
	users := map[string]model.UserTarget{}
	for _, u := range r.Interfaces[0].Targets.Users {
		users[u.Name] = u
	}
	alice, bob := users["alice"], users["bob"]
	if alice.Burst != 20*tbf.Kibibyte || alice.CBurst != 0 || alice.Prio != 3 || alice.Rate != 10*tbf.Mbit || alice.Ceil != 20*tbf.Mbit ||
		alice.Leaf == nil || alice.Leaf.Kind != "sfq" {
		t.Errorf("alice (the tier's settings): %+v leaf %+v", alice, alice.Leaf)
	}
	if bob.Burst != 64*tbf.Kibibyte || bob.CBurst != 32*tbf.Kibibyte || bob.Prio != 0 || bob.Rate != tbf.Mbit || bob.Ceil != tbf.Mbit ||
		bob.Leaf == nil || *bob.Leaf != (model.LeafQdisc{Kind: "pfifo", Limit: 50, Latency: 50 * time.Millisecond}) {
		t.Errorf("bob (own settings, over his own quota): %+v leaf %+v", bob, bob.Leaf)
	}
	xb := explain(t, r, 0, "bob")
	if xb.Source != SourceQuota || xb.Quota == nil || xb.Quota.Limit != 1024 || !xb.Quota.PeriodEnd.Equal(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("bob's quota: source %s, %+v", xb.Source, xb.Quota)
	}
	if xa := explain(t, r, 0, "alice"); xa.Source != SourceTier || xa.Quota == nil || xa.Quota.Exceeded {
		t.Errorf("alice's quota: source %s, %+v", xa.Source, xa.Quota)
	}
	if errs := Check(p); len(errs) != 0 {
		t.Errorf("Check: %v", errs)
	}
}

// A user's own burst that does not fit one of the user's outcomes is a
// --check error at the user's key.
func TestUserBurstCheck(t *testing.T) {
	p := loadPlan(t, userSettingsMain, strings.Replace(userSettingsUsers, `burst = "64kb"`, `burst = "64mb"`, 1))
	errs := Check(p)
	found := false
	for _, e := range errs {
		if e.Key == "user[1].burst" && strings.Contains(e.Msg, "user bob's burst 64mb does not fit rate") {
			found = true
		}
	}
	if !found {
		t.Errorf("no error at user[1].burst in %v", errs)
	}
}
