package daemon

import "time"

// readQuotaCounters reads the class counters of every interface that is
// in sync (ok or degraded), when some tier has a quota and policy.quota_interval has
// passed since the last read: quota decisions (and, in a fleet, the
// usage this router reports) then lag the traffic by about that interval,
// not by reconcile_interval. It runs on the policy tick, before the
// evaluation, which the new counts mark due (see sample). An interface
// that is not in sync is left to the reconcile tick.
func (d *Daemon) readQuotaCounters(now time.Time) {
	if !d.quotas || !due(d.lastQuotaRead, now, d.plan.Policy.QuotaInterval) {
		return
	}
	d.lastQuotaRead = now
	for _, st := range d.ifaces {
		if st.state == stateOK || st.state == stateDegraded {
			d.readCounters(st, now)
		}
	}
}

// due reports whether every has passed since last, allowing a tenth of
// it early: a ticker's ticks may come a little early or late, and work
// meant for every tick must not skip one because of that.
func due(last, now time.Time, every time.Duration) bool {
	return now.Sub(last) >= every-every/10
}
