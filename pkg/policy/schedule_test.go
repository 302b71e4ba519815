package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// A window that crosses midnight belongs to the day it starts on: the
// weekend window sat/sun 22:00-02:00 covers Saturday night, Sunday night
// into Monday 02:00, and not Friday night.
func TestScheduleMidnightCrossing(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	loc := p.Policy.Location
	cases := []struct {
		at   time.Time
		want int
	}{
		{time.Date(2026, 12, 5, 21, 59, 0, 0, loc), -1}, // Sat before
		{time.Date(2026, 12, 5, 22, 0, 0, 0, loc), 1},   // Sat opens
		{time.Date(2026, 12, 6, 1, 59, 0, 0, loc), 1},   // Sun early: Saturday's window
		{time.Date(2026, 12, 6, 2, 0, 0, 0, loc), -1},   // closes
		{time.Date(2026, 12, 7, 1, 0, 0, 0, loc), 1},    // Mon early: Sunday's window
		{time.Date(2026, 12, 8, 1, 0, 0, 0, loc), -1},   // Tue early: Monday is not a day
		{time.Date(2026, 12, 5, 1, 0, 0, 0, loc), -1},   // Sat early: Friday is not a day
		{time.Date(2026, 12, 4, 22, 30, 0, 0, loc), 0},  // Fri 22:30: the weekday window
		{time.Date(2026, 12, 4, 23, 0, 0, 0, loc), -1},  // Fri 23:00: closed ([from, to))
	}
	gold, _ := p.Tier("gold")
	for _, c := range cases {
		if got := ActiveSchedule(gold, c.at, loc); got != c.want {
			t.Errorf("%s: schedule %d, want %d", c.at.Format(time.RFC1123), got, c.want)
		}
		// Evaluate reads now in the plan's zone whatever zone now carries.
		r := Evaluate(p, Overrides{}, nil, c.at.UTC())
		x := explain(t, r, 0, "alice")
		if (x.Source == SourceSchedule) != (c.want >= 0) {
			t.Errorf("%s: source %s (%s), want schedule %d", c.at, x.Source, x.Reason, c.want)
		}
	}
}

// Overlapping windows: the first in file order applies. Mon-fri 19-23 and
// every day 20-21 overlap on weekdays; the weekday one (index 0) wins, the
// daily one applies on Saturday.
func TestScheduleOverlapFirstWins(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	loc := p.Policy.Location
	wed := time.Date(2026, 12, 2, 20, 30, 0, 0, loc)
	sat := time.Date(2026, 12, 5, 20, 30, 0, 0, loc)
	gold, _ := p.Tier("gold")
	if !gold.Schedules[2].Contains(wed.In(loc)) || !gold.Schedules[0].Contains(wed.In(loc)) {
		t.Fatal("test premise: both windows contain Wednesday 20:30")
	}
	for _, c := range []struct {
		at   time.Time
		want int
	}{{wed, 0}, {sat, 2}} {
		r := Evaluate(p, Overrides{}, nil, c.at)
		x := explain(t, r, 0, "alice")
		s := gold.Schedules[c.want]
		if x.Ceil != s.Ceil || x.Rate != s.Rate || x.Source != SourceSchedule {
			t.Errorf("%s: %s/%s from %s, want schedule %d (%s/%s)", c.at, x.Rate, x.Ceil, x.Source, c.want, s.Rate, s.Ceil)
		}
		if want := describeSchedule("gold", c.want, &s); x.Reason != want {
			t.Errorf("reason %q, want %q", x.Reason, want)
		}
	}
}

// countMinutes counts the real minutes in [from, to) during which s is
// active in loc.
func countMinutes(s config.Schedule, from, to time.Time, loc *time.Location) int {
	n := 0
	for at := from; at.Before(to); at = at.Add(time.Minute) {
		if s.Contains(at.In(loc)) {
			n++
		}
	}
	return n
}

// Daylight saving time in Europe/Berlin: a 01:30-03:30 window is
// wall-clock time, one real hour on the last Sunday of March (02:00 is
// skipped) and three on the last Sunday of October (02:00-02:59 twice).
func TestScheduleDST(t *testing.T) {
	loc := berlin(t)
	s := config.Schedule{Days: 0x7f, From: 90, To: 210}
	tier := &config.Tier{Name: "x", Schedules: []config.Schedule{s}}
	// 2026-03-29 and 2026-10-25 are the last Sundays of March and October.
	for _, c := range []struct {
		day  time.Time
		want int
	}{
		{time.Date(2026, 3, 29, 0, 0, 0, 0, loc), 60},
		{time.Date(2026, 10, 25, 0, 0, 0, 0, loc), 180},
		{time.Date(2026, 3, 22, 0, 0, 0, 0, loc), 120}, // an ordinary Sunday
	} {
		end := time.Date(c.day.Year(), c.day.Month(), c.day.Day()+1, 0, 0, 0, 0, loc)
		if got := countMinutes(s, c.day, end, loc); got != c.want {
			t.Errorf("%s: window lasts %d real minutes, want %d", c.day.Format(time.DateOnly), got, c.want)
		}
	}
	// Instants around the March change (01:00 UTC is 03:00 CEST).
	for _, c := range []struct {
		utc  time.Time
		want int
	}{
		{time.Date(2026, 3, 29, 0, 29, 0, 0, time.UTC), -1}, // 01:29 CET
		{time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC), 0},  // 01:30 CET
		{time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), 0},   // 03:00 CEST
		{time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC), -1}, // 03:30 CEST
		{time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), 0}, // 02:30 CEST
		{time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), 0}, // 02:30 CET, the second time
		{time.Date(2026, 10, 25, 2, 30, 0, 0, time.UTC), -1},
	} {
		if got := ActiveSchedule(tier, c.utc, loc); got != c.want {
			t.Errorf("%s (%s): %d, want %d", c.utc, c.utc.In(loc).Format("15:04 MST"), got, c.want)
		}
	}
}

// Weekday boundaries are read in the policy's zone: Friday 22:59 Berlin is
// in the weekday window even though it is 21:59 UTC, Saturday 19:00 is not;
// Monday 18:59 is not, 19:00 is.
func TestScheduleWeekdayBoundaries(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	loc := p.Policy.Location
	gold, _ := p.Tier("gold")
	for _, c := range []struct {
		at time.Time
		in bool
	}{
		{time.Date(2026, 12, 4, 22, 59, 0, 0, loc), true},
		{time.Date(2026, 12, 5, 19, 0, 0, 0, loc), false},
		{time.Date(2026, 12, 7, 18, 59, 0, 0, loc), false},
		{time.Date(2026, 12, 7, 19, 0, 0, 0, loc), true},
	} {
		got := ActiveSchedule(gold, c.at.UTC(), loc) == 0
		if got != c.in {
			t.Errorf("%s: in weekday window %v, want %v", c.at.Format(time.RFC1123), got, c.in)
		}
	}
	// A nil location means time.Local, like config's "local".
	at := time.Date(2026, 12, 7, 19, 30, 0, 0, time.Local)
	if got := ActiveSchedule(gold, at, nil); got != 0 {
		t.Errorf("nil location: %d, want 0", got)
	}
}

// TierRatesAt gives the schedule's rates inside its window and the tier's
// outside, with the reason naming which.
func TestTierRatesAt(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	gold, _ := p.Tier("gold")
	loc := p.Policy.Location
	r, c, why := TierRatesAt(gold, config.Egress, time.Date(2026, 12, 2, 19, 30, 0, 0, loc), loc)
	if r != mbit(50) || c != mbit(60) || !strings.HasPrefix(why, "schedule gold#0") {
		t.Errorf("peak: %s/%s %q", r, c, why)
	}
	r, c, why = TierRatesAt(gold, config.Egress, time.Date(2026, 12, 2, 10, 0, 0, 0, loc), loc)
	if r != mbit(50) || c != mbit(100) || why != "tier gold" {
		t.Errorf("off-peak: %s/%s %q", r, c, why)
	}
}
