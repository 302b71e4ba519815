package config

import (
	"testing"
	"time"
)

func TestParseTimeOfDay(t *testing.T) {
	good := map[string]TimeOfDay{"00:00": 0, "07:05": 425, "23:59": 1439, "24:00": 1440}
	for s, want := range good {
		if got, err := parseTimeOfDay(s); err != nil || got != want {
			t.Errorf("%q: got %v, %v; want %v", s, got, err, want)
		}
		if got := want.String(); got != s {
			t.Errorf("String(%d) = %q, want %q", int(want), got, s)
		}
	}
	for _, s := range []string{"", "7:00", "24:01", "12:60", "1a:00", "+1:00", "12-00", "12:00:00", " 1:00"} {
		if _, err := parseTimeOfDay(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestScheduleContains(t *testing.T) {
	at := func(day time.Weekday, hhmm string) time.Time {
		tod, err := parseTimeOfDay(hhmm)
		if err != nil {
			t.Fatal(err)
		}
		// 2026-11-30 is a Monday.
		base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
		return base.AddDate(0, 0, (int(day)+6)%7).Add(time.Duration(tod) * time.Minute)
	}
	evening := Schedule{Days: dayWords["weekdays"], From: 19 * 60, To: 23 * 60}
	night := Schedule{Days: dayWords["fri"], From: 22 * 60, To: 2 * 60}
	untilMidnight := Schedule{Days: dayWords["sun"], From: 20 * 60, To: 24 * 60}
	cases := []struct {
		s    Schedule
		day  time.Weekday
		hhmm string
		want bool
	}{
		{evening, time.Monday, "19:00", true},
		{evening, time.Monday, "22:59", true},
		{evening, time.Monday, "23:00", false},
		{evening, time.Monday, "18:59", false},
		{evening, time.Saturday, "20:00", false},
		{night, time.Friday, "21:59", false},
		{night, time.Friday, "22:00", true},
		{night, time.Friday, "23:59", true},
		{night, time.Saturday, "00:00", true},
		{night, time.Saturday, "01:59", true},
		{night, time.Saturday, "02:00", false},
		{night, time.Saturday, "22:30", false},
		{night, time.Thursday, "01:00", false},
		{untilMidnight, time.Sunday, "23:59", true},
		{untilMidnight, time.Monday, "00:00", false},
	}
	for _, c := range cases {
		tm := at(c.day, c.hhmm)
		if tm.Weekday() != c.day {
			t.Fatalf("test clock: %v is not a %v", tm, c.day)
		}
		if got := c.s.Contains(tm); got != c.want {
			t.Errorf("%s %s-%s contains %s %s: got %v, want %v", c.s.Days, c.s.From, c.s.To, c.day, c.hhmm, got, c.want)
		}
	}
	if got := dayWords["weekend"].String(); got != "sat,sun" {
		t.Errorf("weekend = %q", got)
	}
}
