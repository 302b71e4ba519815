package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Schedule is one [[tiers.NAME.schedule]] window with the tier's values
// during it, resolved, so the policy uses them as they are:
//   - Rate is the schedule's rate or the tier's; Ceil the schedule's ceil or
//     else the larger of the tier's ceil and Rate.
//   - UploadRate is the schedule's upload_rate, else the tier's UploadRate
//     when the tier sets upload_rate, else Rate.
//   - UploadCeil is the schedule's upload_ceil, else the larger of
//     UploadRate and (the tier's UploadCeil when the tier sets upload_ceil,
//     else Ceil).
type Schedule struct {
	// Days are the days a window starts on.
	Days Weekdays
	// From is when the window opens; To when it closes, on the next day
	// when To <= From (the window crosses midnight). To may be 24:00.
	From, To TimeOfDay
	// Rate, Ceil, UploadRate and UploadCeil are in force during the window
	// (Ceil >= Rate, UploadCeil >= UploadRate).
	Rate, Ceil, UploadRate, UploadCeil tbf.Rate
}

// TimeOfDay is minutes after midnight, 0 (00:00) to 1440 (24:00).
type TimeOfDay int

// String formats the time as HH:MM.
func (t TimeOfDay) String() string { return fmt.Sprintf("%02d:%02d", int(t)/60, int(t)%60) }

// parseTimeOfDay reads HH:MM (00:00 to 24:00).
func parseTimeOfDay(s string) (TimeOfDay, error) {
	digit := func(i int) (int, bool) { return int(s[i] - '0'), s[i] >= '0' && s[i] <= '9' }
	bad := fmt.Errorf("%q is not a time of day HH:MM between 00:00 and 24:00", s)
	if len(s) != 5 || s[2] != ':' {
		return 0, bad
	}
	h1, ok1 := digit(0)
	h2, ok2 := digit(1)
	m1, ok3 := digit(3)
	m2, ok4 := digit(4)
	h, m := h1*10+h2, m1*10+m2
	if !ok1 || !ok2 || !ok3 || !ok4 || h > 24 || m > 59 || (h == 24 && m != 0) {
		return 0, bad
	}
	return TimeOfDay(h*60 + m), nil
}

// Weekdays is a set of days, bit i for time.Weekday(i).
type Weekdays uint8

// Has reports whether d is in the set.
func (w Weekdays) Has(d time.Weekday) bool { return w&(1<<uint(d)) != 0 }

// String lists the days as "mon,tue".
func (w Weekdays) String() string {
	var out []string
	for _, d := range dayOrder {
		if w.Has(d) {
			out = append(out, dayNames[d])
		}
	}
	return strings.Join(out, ",")
}

var dayOrder = []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday, time.Sunday}

var dayNames = map[time.Weekday]string{
	time.Sunday: "sun", time.Monday: "mon", time.Tuesday: "tue", time.Wednesday: "wed",
	time.Thursday: "thu", time.Friday: "fri", time.Saturday: "sat",
}

// dayWords are the accepted spellings of days and day groups.
var dayWords = map[string]Weekdays{
	"sun": 1 << time.Sunday, "mon": 1 << time.Monday, "tue": 1 << time.Tuesday,
	"wed": 1 << time.Wednesday, "thu": 1 << time.Thursday, "fri": 1 << time.Friday,
	"sat":      1 << time.Saturday,
	"weekdays": 1<<time.Monday | 1<<time.Tuesday | 1<<time.Wednesday | 1<<time.Thursday | 1<<time.Friday,
	"weekend":  1<<time.Saturday | 1<<time.Sunday,
	"all":      0x7f,
}

// Contains reports whether t, read in its own location (use
// t.In(plan.Policy.Location)), lies in the window: [From, To) on one of
// Days, or, for a window that crosses midnight, [From, 24:00) on one of
// Days and [00:00, To) on the day after.
func (s Schedule) Contains(t time.Time) bool {
	m := TimeOfDay(t.Hour()*60 + t.Minute())
	day := t.Weekday()
	if s.From < s.To {
		return s.Days.Has(day) && m >= s.From && m < s.To
	}
	yesterday := (day + 6) % 7
	return (s.Days.Has(day) && m >= s.From) || (s.Days.Has(yesterday) && m < s.To)
}
