package daemon

import (
	"bytes"
	"encoding/json"
	"path/filepath"
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
	ids := make(map[string]*model.Assignment, len(d.ifaces))
	for _, st := range d.ifaces {
		ids[st.key] = st.ids
	}
	b, err := json.Marshal(ids)
	if err == nil && bytes.Equal(b, d.savedIDs) {
		return
	}
	if err == nil {
		err = writeFileAtomic(filepath.Join(d.plan.Daemon.StateDir, AssignmentsFile), append(b, '\n'), 0o640)
	}
	if err != nil {
		d.stats.errors.WithLabelValues("state").Inc()
		d.log.Error("cannot save class assignments", "err", err)
		return
	}
	d.savedIDs = b
}
