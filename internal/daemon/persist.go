package daemon

import (
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// saveOverrides writes ov to the state directory; a failure is logged and
// returned.
func (d *Daemon) saveOverrides(ov policy.Overrides) error {
	if err := saveJSON(d.plan.Daemon.StateDir, OverridesFile, &ov); err != nil {
		d.stats.errors.WithLabelValues("state").Inc()
		d.log.Error("cannot save overrides", "err", err)
		return err
	}
	return nil
}

// saveUsage writes the quota usage and marks it flushed at now.
func (d *Daemon) saveUsage(now time.Time) {
	if err := saveJSON(d.plan.Daemon.StateDir, UsageFile, d.usage); err != nil {
		d.stats.errors.WithLabelValues("state").Inc()
		d.log.Error("cannot save quota usage", "err", err)
		return
	}
	d.usage.Flushed(now)
}

// saveAssignments writes every interface's class assignment when it
// differs from what the state file holds.
func (d *Daemon) saveAssignments() {
	next := make(map[string]*model.Assignment, len(d.ifaces))
	same := len(d.assignState) == len(d.ifaces)
	for _, st := range d.ifaces {
		next[st.key] = st.ids.Clone()
		if old, ok := d.assignState[st.key]; !ok || !sameAssignment(old, st.ids) {
			same = false
		}
	}
	if same {
		return
	}
	if err := saveJSON(d.plan.Daemon.StateDir, AssignmentsFile, next); err != nil {
		d.stats.errors.WithLabelValues("state").Inc()
		d.log.Error("cannot save class assignments", "err", err)
		return
	}
	d.assignState = next
}

// sameAssignment compares the user and tier minors of a and b.
func sameAssignment(a, b *model.Assignment) bool {
	au, bu := a.Users(), b.Users()
	at, bt := a.Tiers(), b.Tiers()
	if len(au) != len(bu) || len(at) != len(bt) {
		return false
	}
	for k, v := range au {
		if bu[k] != v {
			return false
		}
	}
	for k, v := range at {
		if bt[k] != v {
			return false
		}
	}
	return true
}
