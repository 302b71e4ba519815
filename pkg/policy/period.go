package policy

import (
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// PeriodBounds returns the quota period p that contains t: [start, end).
// Periods start at midnight in loc (nil: time.Local): a day at 00:00, a week
// on Monday at 00:00, a month on the 1st at 00:00; an unknown or empty period
// is a month. Boundaries come from time.Date in loc, never from adding 24h,
// so days of 23 or 25 hours (DST changes) are handled; where midnight does
// not exist in loc, time.Date's normalisation picks the boundary.
func PeriodBounds(p config.Period, t time.Time, loc *time.Location) (start, end time.Time) {
	if loc == nil {
		loc = time.Local
	}
	lt := t.In(loc)
	y, m, d := lt.Date()
	switch p {
	case config.PeriodDay:
		return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case config.PeriodWeek:
		back := (int(lt.Weekday()) + 6) % 7 // days since Monday
		return time.Date(y, m, d-back, 0, 0, 0, 0, loc), time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	default:
		return time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	}
}
