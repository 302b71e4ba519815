package policy

import (
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// ActiveSchedule returns the index of the schedule of tier that applies at
// now, read in loc (nil: time.Local), and -1 when none does.
//
// Rule for overlapping windows: the first schedule in the tier's list (file
// order) that contains the time applies; later ones are ignored while it
// does. Windows are wall-clock times: on a day when the clocks go forward
// (Europe/Berlin, last Sunday of March, 02:00 -> 03:00) a 01:30-03:30 window
// lasts one real hour; when they go back (last Sunday of October, 03:00 ->
// 02:00) it lasts three, because 02:00-02:59 happens twice. A window that
// crosses midnight (to <= from) belongs to the day it starts on.
func ActiveSchedule(tier *config.Tier, now time.Time, loc *time.Location) int {
	if loc == nil {
		loc = time.Local
	}
	t := now.In(loc)
	for i, s := range tier.Schedules {
		if s.Contains(t) {
			return i
		}
	}
	return -1
}

// scheduleRates returns the schedule's rate and ceil for direction d.
func scheduleRates(s *config.Schedule, d config.Direction) (rate, ceil tbf.Rate) {
	if d == config.Ingress {
		return s.UploadRate, s.UploadCeil
	}
	return s.Rate, s.Ceil
}

// describeSchedule names a schedule for people: "schedule gold#1 mon,tue 19:00-23:00"
// (index from 0 in file order).
func describeSchedule(tier string, i int, s *config.Schedule) string {
	return fmt.Sprintf("schedule %s#%d %s %s-%s", tier, i, s.Days, s.From, s.To)
}

// TierRatesAt returns tier t's rates for direction d at now, in loc (nil:
// time.Local): its schedule's when one is active, else its own; reason
// names the schedule or the tier, as Explanation.Reason does.
func TierRatesAt(t *config.Tier, d config.Direction, now time.Time, loc *time.Location) (rate, ceil tbf.Rate, reason string) {
	rate, ceil = t.Rates(d)
	reason = "tier " + t.Name
	if i := ActiveSchedule(t, now, loc); i >= 0 {
		s := &t.Schedules[i]
		rate, ceil = scheduleRates(s, d)
		reason = describeSchedule(t.Name, i, s)
	}
	return rate, max(ceil, rate), reason
}
