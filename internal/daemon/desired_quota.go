package daemon

import "time"

// readQuotaCounters has refreshCounters read the counters that are
// policy.quota_interval old (less a tenth, see due) when some tier has a
// quota: quota decisions (and, in a fleet, the usage this router reports)
// then lag the traffic by about that interval, not by reconcile_interval.
// It runs on the policy tick, before the evaluation, which the new counts
// mark due (see sample).
func (d *Daemon) readQuotaCounters(now time.Time) {
	if d.quotas {
		every := d.plan.Policy.QuotaInterval
		d.refreshCounters(now, every-every/10)
	}
}

// due reports whether every has passed since last, allowing a tenth of
// it early: a ticker's ticks may come a little early or late, and work
// meant for every tick must not skip one because of that.
func due(last, now time.Time, every time.Duration) bool {
	return now.Sub(last) >= every-every/10
}
