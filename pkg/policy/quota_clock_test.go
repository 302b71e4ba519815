package policy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// dayUsage is a Usage in Berlin with alice on period p.
func dayUsage(t *testing.T, p config.Period) *Usage {
	t.Helper()
	loc := berlin(t)
	u := NewUsage(loc)
	u.Configure(&config.Plan{
		Policy: config.Policy{Location: loc},
		Tiers:  []config.Tier{{Name: "q", Quota: 1 << 30, QuotaPeriod: p}},
		Users:  []config.User{{Name: "alice", Tier: "q"}},
	})
	return u
}

// clockStep is one reading of alice's counter at a time (the injected
// clock), with the usage and the period start expected after it.
type clockStep struct {
	what    string
	at      time.Time
	counter uint64
	used    uint64
	start   time.Time
}

func runClockSteps(t *testing.T, p config.Period, steps []clockStep) {
	t.Helper()
	u := dayUsage(t, p)
	for _, s := range steps {
		u.Observe("alice", "k", s.counter, s.at)
		used, start, end := u.Used("alice", p, s.at)
		if used != s.used || !start.Equal(s.start) {
			t.Errorf("%s (%s): used %d in the period from %s, want %d from %s",
				s.what, s.at, used, start, s.used, s.start)
		}
		if !end.After(start) {
			t.Errorf("%s: period [%s, %s) is empty", s.what, start, end)
		}
	}
}

// A clock stepped back never resets the count: 1 h back within the period,
// and back across a period boundary, where the stored period stays the
// current one (it rolls over only when the time reaches the next one).
func TestUsageClockStepsBack(t *testing.T) {
	loc := berlin(t)
	at := func(m time.Month, d, h, min int) time.Time { return time.Date(2026, m, d, h, min, 0, 0, loc) }
	dec2, dec3 := at(12, 2, 0, 0), at(12, 3, 0, 0)
	t.Run("1h back within the period", func(t *testing.T) {
		runClockSteps(t, config.PeriodDay, []clockStep{
			{"baseline", at(12, 2, 10, 0), 0, 0, dec2},
			{"traffic", at(12, 2, 11, 0), 500, 500, dec2},
			{"step back 1h", at(12, 2, 10, 0), 800, 800, dec2},
			{"time moves on", at(12, 2, 12, 0), 1000, 1000, dec2},
		})
	})
	t.Run("back across the boundary", func(t *testing.T) {
		runClockSteps(t, config.PeriodDay, []clockStep{
			{"baseline", at(12, 2, 0, 10), 0, 0, dec2},
			{"traffic", at(12, 2, 0, 30), 700, 700, dec2},
			{"step back into Dec 1", at(12, 1, 23, 30), 900, 900, dec2},
			{"still Dec 1 by the clock", at(12, 1, 23, 59), 1000, 1000, dec2},
			{"back at Dec 2: no rollover", at(12, 2, 0, 5), 1100, 1100, dec2},
			{"Dec 3: rollover", at(12, 3, 0, 1), 1200, 100, dec3},
		})
	})
	t.Run("boot with a clock years behind (monthly)", func(t *testing.T) {
		runClockSteps(t, config.PeriodMonth, []clockStep{
			{"baseline", at(12, 5, 9, 0), 0, 0, at(12, 1, 0, 0)},
			{"traffic", at(12, 5, 10, 0), 4000, 4000, at(12, 1, 0, 0)},
			{"clock at 1970", time.Date(1970, 1, 1, 0, 0, 5, 0, time.UTC), 4500, 4500, at(12, 1, 0, 0)},
			{"NTP steps forward", at(12, 5, 10, 5), 5000, 5000, at(12, 1, 0, 0)},
		})
	})
}

// A clock moved forward within the period changes nothing; into the next
// period it rolls over, and the bytes since the last reading count there.
func TestUsageClockStepsForward(t *testing.T) {
	loc := berlin(t)
	at := func(m time.Month, d, h, min int) time.Time { return time.Date(2026, m, d, h, min, 0, 0, loc) }
	runClockSteps(t, config.PeriodDay, []clockStep{
		{"baseline", at(12, 2, 1, 0), 0, 0, at(12, 2, 0, 0)},
		{"traffic", at(12, 2, 1, 30), 300, 300, at(12, 2, 0, 0)},
		{"jump 22h forward, same day", at(12, 2, 23, 30), 400, 400, at(12, 2, 0, 0)},
		{"jump into the next day", at(12, 3, 0, 30), 1000, 600, at(12, 3, 0, 0)},
	})
	runClockSteps(t, config.PeriodMonth, []clockStep{
		{"baseline", at(12, 2, 1, 0), 0, 0, at(12, 1, 0, 0)},
		{"jump 20 days forward, same month", at(12, 22, 1, 0), 900, 900, at(12, 1, 0, 0)},
		{"jump into January", time.Date(2027, 1, 1, 0, 0, 1, 0, loc), 1000, 100, time.Date(2027, 1, 1, 0, 0, 0, 0, loc)},
	})
}

// DST: a day period lasts from local midnight to local midnight, 25 h on
// the October change and 23 h on the March one; a month period spans the
// change without a rollover. A wall-clock hour repeated in October is no
// step back (the instant moves on) and resets nothing.
func TestUsageDSTChanges(t *testing.T) {
	loc := berlin(t)
	at := func(m time.Month, d, h, min int) time.Time { return time.Date(2026, m, d, h, min, 0, 0, loc) }
	oct25 := at(10, 25, 0, 0)
	twoThirty := at(10, 25, 2, 30) // the first 02:30 (CEST)
	runClockSteps(t, config.PeriodDay, []clockStep{
		{"00:30 CEST", at(10, 25, 0, 30), 0, 0, oct25},
		{"02:30 CEST", twoThirty, 100, 100, oct25},
		{"02:30 CET, the repeated hour", twoThirty.Add(time.Hour), 200, 200, oct25},
		{"23:30 CET, 24h after 23:30 the day before", at(10, 25, 23, 30), 300, 300, oct25},
		{"00:10 the next day", at(10, 26, 0, 10), 350, 50, at(10, 26, 0, 0)},
	})
	mar29 := at(3, 29, 0, 0)
	runClockSteps(t, config.PeriodDay, []clockStep{
		{"00:30 CET", at(3, 29, 0, 30), 0, 0, mar29},
		{"23:30 CEST, 22h later", at(3, 29, 23, 30), 100, 100, mar29},
		{"00:30 the next day, 23h after the first reading", at(3, 29, 0, 30).Add(23 * time.Hour), 150, 50, at(3, 30, 0, 0)},
	})
	runClockSteps(t, config.PeriodMonth, []clockStep{
		{"March 1", at(3, 1, 0, 30), 0, 0, at(3, 1, 0, 0)},
		{"after the change", at(3, 31, 23, 59), 100, 100, at(3, 1, 0, 0)},
		{"April", at(4, 1, 0, 0), 150, 50, at(4, 1, 0, 0)},
	})
}

// Over quota stays over quota when the clock steps back into the previous
// period: Evaluate keeps throttling and reports the stored period.
func TestEvaluateQuotaClockStepBack(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	loc := p.Policy.Location
	now := time.Date(2026, 12, 2, 0, 30, 0, 0, loc)
	u := NewUsage(nil)
	u.Configure(p)
	u.Observe("bob", "k", 0, now)
	u.Observe("bob", "k", 1<<30, now)
	back := now.Add(-time.Hour)
	x := explain(t, Evaluate(p, Overrides{}, u, back), 0, "bob")
	if x.Source != SourceQuota || !x.Quota.Exceeded || x.Quota.Used != 1<<30 {
		t.Fatalf("after a step back: source %s quota %+v, want still exceeded", x.Source, x.Quota)
	}
	if ps, pe := PeriodBounds(config.PeriodDay, now, loc); !x.Quota.PeriodStart.Equal(ps) || !x.Quota.PeriodEnd.Equal(pe) {
		t.Errorf("period [%s, %s), want [%s, %s)", x.Quota.PeriodStart, x.Quota.PeriodEnd, ps, pe)
	}
}

// A step back makes an unflushed change due at once rather than after the
// step's length.
func TestUsageFlushDueAfterStepBack(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	u := NewUsage(time.UTC)
	u.Observe("alice", "k", 1, t0)
	u.Flushed(t0)
	u.Observe("alice", "k", 2, t0.Add(time.Second))
	if !u.FlushDue(t0.Add(-time.Hour)) {
		t.Error("a change is not due after the clock stepped back 1h")
	}
	if u.FlushDue(t0.Add(30 * time.Second)) {
		t.Error("due within FlushInterval without a step back")
	}
}

// Rebuild: with the state lost, a counter's first reading counts whole
// (the class's bytes since its creation); without it, it is a baseline.
func TestUsageRebuild(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	plain, rebuilt := NewUsage(time.UTC), NewUsage(time.UTC)
	rebuilt.Rebuild()
	for _, u := range []*Usage{plain, rebuilt} {
		u.Observe("alice", "lan0/egress/1:100", 5000, now)
		u.Observe("alice", "lan0/ingress/1:100", 700, now)
		u.Observe("alice", "lan0/egress/1:100", 5100, now.Add(time.Second))
	}
	if got, _, _ := plain.Used("alice", config.PeriodMonth, now); got != 100 {
		t.Errorf("without Rebuild: used %d, want 100", got)
	}
	if got, _, _ := rebuilt.Used("alice", config.PeriodMonth, now); got != 5800 {
		t.Errorf("after Rebuild: used %d, want 5800", got)
	}
	if n := rebuilt.Rebuilt(); n != 2 {
		t.Errorf("Rebuilt() = %d, want 2", n)
	}
}

// Stored entries with an unknown period or without a start are errors,
// not a silent reset at the next reading.
func TestUsageUnmarshalRejectsBadPeriods(t *testing.T) {
	for _, bad := range []string{
		`{"version":1,"users":{"a":{"period":"year","start":"2026-12-01T00:00:00Z","used":5}}}`,
		`{"version":1,"users":{"a":{"period":"month","used":5}}}`,
		`{"version":1,"users":{"a":{"period":"month","start":"9999-12-01T00:00:00Z","used":5}}}`,
	} {
		if err := json.Unmarshal([]byte(bad), NewUsage(time.UTC)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// Changing a tier's quota_period carries the count into the new period
// when the old period began inside it (day -> month), and starts afresh
// when it did not (month -> day); Configure names the users it concerns.
func TestUsagePeriodKindChange(t *testing.T) {
	main := func(period string) string {
		return "[policy]\ntimezone = \"UTC\"\n\n[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n\n" +
			"[tiers.t]\nrate = \"1mbit\"\nquota = \"1gb\"\nquota_period = \"" + period + "\"\nover_quota_rate = \"8kbit\"\n"
	}
	users := "[[user]]\nname = \"a\"\ntier = \"t\"\naddresses = [\"198.18.0.1\"]\n"
	now := time.Date(2026, 12, 15, 10, 0, 0, 0, time.UTC)
	u := NewUsage(time.UTC)
	u.Configure(loadPlan(t, main("day"), users))
	u.Observe("a", "k", 0, now)
	u.Observe("a", "k", 5000, now.Add(time.Minute))
	if changed := u.Configure(loadPlan(t, main("month"), users)); len(changed) != 1 || changed[0] != "a" {
		t.Fatalf("Configure day -> month: changed %v, want [a]", changed)
	}
	if used, start, _ := u.Used("a", config.PeriodMonth, now.Add(2*time.Minute)); used != 5000 || start.Day() != 1 {
		t.Errorf("day -> month: used %d from %v, want today's 5000 carried into the month", used, start)
	}
	u.Observe("a", "k", 6000, now.Add(3*time.Minute))
	if used, _, _ := u.Used("a", config.PeriodMonth, now.Add(3*time.Minute)); used != 6000 {
		t.Errorf("day -> month, after a reading: used %d, want 6000", used)
	}
	u.Configure(loadPlan(t, main("day"), users))
	if used, _, _ := u.Used("a", config.PeriodDay, now.Add(4*time.Minute)); used != 0 {
		t.Errorf("month -> day: used %d, want 0 (the month's bytes are not all today's)", used)
	}
}
