package policy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// Period boundaries come from the calendar in the zone: a DST day in
// Berlin has 23 or 25 hours, weeks start on Monday, months on the 1st and
// December rolls into January.
func TestPeriodBounds(t *testing.T) {
	loc := berlin(t)
	d := func(y int, m time.Month, day, h int) time.Time { return time.Date(y, m, day, h, 0, 0, 0, loc) }
	cases := []struct {
		p          config.Period
		at         time.Time
		start, end time.Time
		hours      float64
	}{
		{config.PeriodDay, d(2026, 3, 29, 12), d(2026, 3, 29, 0), d(2026, 3, 30, 0), 23},
		{config.PeriodDay, d(2026, 10, 25, 23), d(2026, 10, 25, 0), d(2026, 10, 26, 0), 25},
		{config.PeriodDay, d(2026, 12, 2, 0), d(2026, 12, 2, 0), d(2026, 12, 3, 0), 24},
		{config.PeriodWeek, d(2026, 12, 6, 23), d(2026, 11, 30, 0), d(2026, 12, 7, 0), 168}, // Sunday -> Monday before
		{config.PeriodWeek, d(2026, 12, 7, 0), d(2026, 12, 7, 0), d(2026, 12, 14, 0), 168},  // Monday itself
		{config.PeriodWeek, d(2026, 3, 25, 8), d(2026, 3, 23, 0), d(2026, 3, 30, 0), 167},   // week with the March change
		{config.PeriodMonth, d(2026, 12, 31, 23), d(2026, 12, 1, 0), d(2027, 1, 1, 0), 744},
		{config.PeriodMonth, d(2026, 3, 1, 0), d(2026, 3, 1, 0), d(2026, 4, 1, 0), 743},
		{"", d(2026, 2, 10, 5), d(2026, 2, 1, 0), d(2026, 3, 1, 0), 672},
	}
	for _, c := range cases {
		s, e := PeriodBounds(c.p, c.at.UTC(), loc)
		if !s.Equal(c.start) || !e.Equal(c.end) {
			t.Errorf("%s at %s: [%s, %s), want [%s, %s)", c.p, c.at, s, e, c.start, c.end)
		}
		if h := e.Sub(s).Hours(); h != c.hours {
			t.Errorf("%s at %s: %v hours, want %v", c.p, c.at, h, c.hours)
		}
		if c.at.Before(s) || !c.at.Before(e) {
			t.Errorf("%s: %s not in its period", c.p, c.at)
		}
	}
}

// Counters: the first reading is a baseline, increases add, a reading
// below the last one is a restarted counter counted whole, and every
// counter of a user adds up.
func TestUsageCounters(t *testing.T) {
	loc := berlin(t)
	u := NewUsage(loc)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, loc)
	k1 := CounterKey("lan0", config.Egress, "1:100")
	k2 := CounterKey("wan0", config.Ingress, "1:100")
	steps := []struct {
		key   string
		value uint64
		add   uint64
	}{
		{k1, 1000, 0},   // baseline
		{k1, 1500, 500}, // +500
		{k2, 0, 0},      // baseline of a new class
		{k2, 300, 300},
		{k1, 200, 200}, // class re-created: counter restarted
		{k1, 250, 50},
		{k1, 250, 0},
	}
	var want uint64
	for i, s := range steps {
		now = now.Add(time.Second)
		u.Observe("alice", s.key, s.value, now)
		want += s.add
		if got, _, _ := u.Used("alice", config.PeriodMonth, now); got != want {
			t.Fatalf("step %d: used %d, want %d", i, got, want)
		}
	}
	// Forget drops a baseline: the next reading is a baseline again.
	u.Forget("alice", k2)
	u.Observe("alice", k2, 9999, now)
	if got, _, _ := u.Used("alice", config.PeriodMonth, now); got != want {
		t.Errorf("after Forget: used %d, want %d", got, want)
	}
	if got, _, _ := u.Used("bob", config.PeriodMonth, now); got != 0 {
		t.Errorf("unknown user: %d", got)
	}
}

// Rollover: a daily quota restarts at midnight in the zone; bytes read
// after midnight count in the new day. Used reads a stale period as 0 even
// before the next Observe.
func TestUsageRollover(t *testing.T) {
	loc := berlin(t)
	for _, c := range []struct {
		p            config.Period
		before, next time.Time
	}{
		{config.PeriodDay, time.Date(2026, 3, 28, 23, 59, 0, 0, loc), time.Date(2026, 3, 29, 0, 0, 1, 0, loc)},
		{config.PeriodWeek, time.Date(2026, 12, 6, 23, 59, 0, 0, loc), time.Date(2026, 12, 7, 0, 0, 1, 0, loc)},
		{config.PeriodMonth, time.Date(2026, 12, 31, 23, 59, 0, 0, loc), time.Date(2027, 1, 1, 0, 0, 1, 0, loc)},
	} {
		plan := &config.Plan{
			Policy: config.Policy{Location: loc},
			Tiers:  []config.Tier{{Name: "q", Quota: 1 << 30, QuotaPeriod: c.p}},
			Users:  []config.User{{Name: "alice", Tier: "q"}},
		}
		u := NewUsage(nil)
		u.Configure(plan)
		u.Observe("alice", "k", 0, c.before.Add(-time.Minute))
		u.Observe("alice", "k", 700, c.before)
		if got, _, _ := u.Used("alice", c.p, c.before); got != 700 {
			t.Fatalf("%s: used %d before rollover", c.p, got)
		}
		if got, s, _ := u.Used("alice", c.p, c.next); got != 0 {
			t.Errorf("%s: used %d in the new period starting %s, want 0", c.p, got, s)
		}
		u.Observe("alice", "k", 1000, c.next)
		if got, _, _ := u.Used("alice", c.p, c.next); got != 300 {
			t.Errorf("%s: used %d after rollover, want 300", c.p, got)
		}
	}
}

// Persistence: marshal, unmarshal into a fresh Usage, and continuing gives
// the same counts as never stopping (the baselines are kept, so a restart
// neither loses nor double-counts).
func TestUsagePersistence(t *testing.T) {
	loc := berlin(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, loc)
	a := NewUsage(loc)
	a.Observe("alice", "x", 100, now)
	a.Observe("alice", "x", 400, now.Add(time.Second))
	a.Observe("bob", "y", 5, now)
	a.Observe("bob", "y", 6, now.Add(time.Second))
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	b := NewUsage(loc)
	if err := json.Unmarshal(data, b); err != nil {
		t.Fatalf("unmarshal %s: %v", data, err)
	}
	later := now.Add(time.Hour)
	for _, u := range []*Usage{a, b} {
		u.Observe("alice", "x", 1000, later)
		u.Observe("bob", "y", 2, later) // restarted
	}
	for _, name := range []string{"alice", "bob"} {
		ga, _, _ := a.Used(name, config.PeriodMonth, later)
		gb, _, _ := b.Used(name, config.PeriodMonth, later)
		if ga != gb || ga == 0 {
			t.Errorf("%s: continuous %d, restored %d", name, ga, gb)
		}
	}
	if got, _, _ := b.Used("alice", config.PeriodMonth, later); got != 900 {
		t.Errorf("alice: %d, want 900", got)
	}
	for _, bad := range []string{`{"version":2,"users":{}}`, `{"version":1,"users":{"a":null}}`, `[`} {
		if err := json.Unmarshal([]byte(bad), NewUsage(loc)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// A user the plan no longer has keeps their count (the counter baselines
// go with their classes) and it counts again when the same name comes back;
// PruneEnded forgets them only once their period is over.
func TestUsageKeptForRemovedUser(t *testing.T) {
	loc := berlin(t)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, loc)
	plan := func(users ...string) *config.Plan {
		p := &config.Plan{Policy: config.Policy{Location: loc},
			Tiers: []config.Tier{{Name: "q", Quota: 1 << 30, QuotaPeriod: config.PeriodDay}}}
		for _, n := range users {
			p.Users = append(p.Users, config.User{Name: n, Tier: "q"})
		}
		return p
	}
	u := NewUsage(loc)
	u.Configure(plan("alice", "bob"))
	u.Observe("alice", "lan0/egress/1:105", 0, now)
	u.Observe("alice", "lan0/egress/1:105", 700, now.Add(time.Minute))
	u.Configure(plan("bob"))
	if n := u.PruneEnded(now.Add(time.Hour)); n != 0 {
		t.Errorf("PruneEnded within alice's day forgot %d users", n)
	}
	data, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	u = NewUsage(loc) // a restart while alice is gone
	if err := json.Unmarshal(data, u); err != nil {
		t.Fatal(err)
	}
	u.Configure(plan("bob", "alice"))
	// Her new class reuses the old id: its counter starts again at 0.
	u.Observe("alice", "lan0/egress/1:105", 0, now.Add(2*time.Hour))
	u.Observe("alice", "lan0/egress/1:105", 300, now.Add(3*time.Hour))
	if got, _, _ := u.Used("alice", config.PeriodDay, now.Add(3*time.Hour)); got != 1000 {
		t.Errorf("alice back: used %d, want 700 before her removal + 300 since", got)
	}
	u.Configure(plan("bob"))
	if n := u.PruneEnded(now.Add(13 * time.Hour)); n != 0 { // 23:00, still her day
		t.Errorf("PruneEnded forgot %d users before the day ended", n)
	}
	if n := u.PruneEnded(now.Add(14 * time.Hour)); n != 1 { // midnight
		t.Errorf("PruneEnded at the day's end forgot %d users, want alice", n)
	}
	u.Configure(plan("bob", "alice"))
	if got, _, _ := u.Used("alice", config.PeriodDay, now.Add(14*time.Hour)); got != 0 {
		t.Errorf("alice in a new day after being forgotten: used %d", got)
	}
	if got, _, _ := u.Used("bob", config.PeriodDay, now); got != 0 {
		t.Errorf("bob used %d, never observed", got)
	}
}

// The flush contract: not due while clean, due FlushInterval after the
// first change, clean after Flushed.
func TestUsageFlushDue(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	u := NewUsage(time.UTC)
	if u.FlushDue(t0) {
		t.Fatal("clean usage is due")
	}
	u.Observe("alice", "k", 1, t0)
	if u.FlushDue(t0.Add(FlushInterval - time.Second)) {
		t.Error("due before FlushInterval")
	}
	if !u.FlushDue(t0.Add(FlushInterval)) {
		t.Error("not due after FlushInterval")
	}
	t1 := t0.Add(FlushInterval)
	u.Flushed(t1)
	if u.FlushDue(t1.Add(time.Hour)) {
		t.Error("due after Flushed with no change")
	}
	u.Observe("alice", "k", 2, t1.Add(10*time.Second))
	if u.FlushDue(t1.Add(FlushInterval - time.Second)) {
		t.Error("due within FlushInterval of the last flush")
	}
	if !u.FlushDue(t1.Add(FlushInterval)) {
		t.Error("not due FlushInterval after the last flush")
	}
}

// Evaluate with usage: under the quota the tier decides; at the quota the
// user is capped at over_quota_rate/ceil in both directions until the
// period ends; a user override still wins, a tier override too.
func TestEvaluateQuota(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	loc := p.Policy.Location
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, loc)
	u := NewUsage(nil)
	u.Configure(p)
	u.Observe("bob", "k", 0, now)
	u.Observe("bob", "k", 1<<30-1, now)
	silver, _ := p.Tier("silver")

	x := explain(t, Evaluate(p, Overrides{}, u, now), 0, "bob")
	if x.Source != SourceTier || x.Quota == nil || x.Quota.Exceeded || x.Quota.Used != 1<<30-1 || x.Quota.Limit != 1<<30 {
		t.Fatalf("under quota: %+v %+v", x, x.Quota)
	}
	if ps, pe := PeriodBounds(config.PeriodDay, now, loc); !x.Quota.PeriodStart.Equal(ps) || !x.Quota.PeriodEnd.Equal(pe) {
		t.Errorf("quota period [%s, %s)", x.Quota.PeriodStart, x.Quota.PeriodEnd)
	}
	u.Observe("bob", "k", 1<<30, now.Add(time.Second))
	r := Evaluate(p, Overrides{}, u, now.Add(time.Second))
	for i := range 2 { // egress and ingress
		x = explain(t, r, i, "bob")
		if x.Source != SourceQuota || x.Reason != "quota exceeded" || !x.Quota.Exceeded ||
			x.Rate != silver.OverQuotaRate || x.Ceil != silver.OverQuotaCeil {
			t.Errorf("iface %d over quota: %s/%s %s %q", i, x.Rate, x.Ceil, x.Source, x.Reason)
		}
		if x.ConfiguredRate != silver.Rate {
			t.Errorf("configured rate %s", x.ConfiguredRate)
		}
	}
	// Next day: the quota is fresh again without any Observe.
	x = explain(t, Evaluate(p, Overrides{}, u, now.Add(24*time.Hour)), 0, "bob")
	if x.Source != SourceTier || x.Quota.Used != 0 {
		t.Errorf("next day: %s used %d", x.Source, x.Quota.Used)
	}
	// Overrides beat the quota.
	var ov Overrides
	mustSet(t, &ov, Override{Target: Target{TargetTier, "silver"}, Rate: mbit(8)})
	x = explain(t, Evaluate(p, ov, u, now.Add(time.Second)), 0, "bob")
	if x.Source != SourceTierOverride || x.Rate != mbit(8) || x.Ceil != mbit(8) {
		t.Errorf("tier override over quota: %s/%s %s", x.Rate, x.Ceil, x.Source)
	}
	mustSet(t, &ov, Override{Target: Target{TargetUser, "bob"}, Rate: mbit(3), Ceil: mbit(30)})
	x = explain(t, Evaluate(p, ov, u, now.Add(time.Second)), 0, "bob")
	if x.Source != SourceUserOverride || x.Rate != mbit(3) || x.Ceil != mbit(30) || !x.Quota.Exceeded {
		t.Errorf("user override over quota: %s/%s %s", x.Rate, x.Ceil, x.Source)
	}
}

func mustSet(t *testing.T, ov *Overrides, o Override) {
	t.Helper()
	if err := ov.Set(o); err != nil {
		t.Fatal(err)
	}
}

// Reset zeroes the period's count and keeps the baselines: only bytes
// read after it count.
func TestUsageReset(t *testing.T) {
	u := NewUsage(time.UTC)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	u.Observe("alice", "k", 0, now)
	u.Observe("alice", "k", 5000, now)
	if was := u.Reset("alice", now); was != 5000 {
		t.Errorf("Reset returned %d, want 5000", was)
	}
	u.Observe("alice", "k", 5300, now)
	if used, _, _ := u.Used("alice", config.PeriodMonth, now); used != 300 {
		t.Errorf("after reset used %d, want 300", used)
	}
	if was := u.Reset("nobody", now); was != 0 {
		t.Errorf("Reset of an unknown user returned %d", was)
	}
}

// A fleet-wide reset applies once: again (a restart reading the key
// again) it forgives nothing counted after it; a newer one applies; a user
// with nothing counted yet remembers it.
func TestUsageResetFleet(t *testing.T) {
	u := NewUsage(time.UTC)
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	u.Observe("alice", "k", 0, t0)
	u.Observe("alice", "k", 1000, t0.Add(time.Minute))
	at := t0.Add(2 * time.Minute)
	if was, ok := u.ResetFleet("alice", at, at.Add(time.Second)); !ok || was != 1000 {
		t.Fatalf("first reset: was %d applied %v, want 1000, true", was, ok)
	}
	u.Observe("alice", "k", 1500, at.Add(time.Minute))
	if was, ok := u.ResetFleet("alice", at, at.Add(2*time.Minute)); ok || was != 0 {
		t.Fatalf("the same reset again: was %d applied %v, want nothing", was, ok)
	}
	if used, _, _ := u.Used("alice", config.PeriodMonth, at.Add(2*time.Minute)); used != 500 {
		t.Fatalf("used %d after the repeated reset, want the 500 bytes counted after it", used)
	}
	if was, ok := u.ResetFleet("alice", at.Add(3*time.Minute), at.Add(3*time.Minute)); !ok || was != 500 {
		t.Fatalf("a newer reset: was %d applied %v, want 500, true", was, ok)
	}
	// The reset survives a save and a load.
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	v := NewUsage(time.UTC)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.ResetFleet("alice", at.Add(3*time.Minute), at.Add(4*time.Minute)); ok {
		t.Fatal("a reset applied before the save applied again after the load")
	}
	if _, ok := v.ResetFleet("bob", at, at); !ok {
		t.Fatal("a reset of a user with nothing counted did not apply")
	}
	if _, ok := v.ResetFleet("bob", at, at.Add(time.Minute)); ok {
		t.Fatal("bob's reset applied twice")
	}
}
