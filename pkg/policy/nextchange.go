package policy

import (
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// NextChange returns the earliest instant after now at which Evaluate
// (plan, ov, usage, t) can differ from Evaluate(plan, ov, usage, now) while
// plan, ov and usage stay as they are: the next wall-clock minute in
// plan.Policy.Location (schedule windows open and close, and quota periods
// begin, on whole local minutes) or the earliest expiry (Until) of an
// override still in force, whichever comes first. A change of plan, ov or
// usage (a reload, set-rate/clear, new quota usage) is the caller's to
// notice. The result is always after now.
func NextChange(plan *config.Plan, ov *Overrides, now time.Time) time.Time {
	loc := plan.Policy.Location
	if loc == nil {
		loc = time.Local
	}
	lt := now.In(loc)
	next := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute()+1, 0, 0, loc)
	if !next.After(now) { // a zone whose normalisation lands before now
		next = now.Add(time.Minute).Truncate(time.Second)
	}
	if ov != nil {
		for _, o := range ov.m {
			if !o.Until.IsZero() && o.Until.After(now) && o.Until.Before(next) {
				next = o.Until
			}
		}
	}
	return next
}
