package daemon

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/shaperd/shaperd/internal/statefile"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// Files in daemon.state_dir.
const (
	// OverridesFile holds the operator's overrides (policy.Overrides JSON).
	OverridesFile = "overrides.json"
	// UsageFile holds the quota counts (policy.Usage JSON).
	UsageFile = "usage.json"
	// AssignmentsFile maps "NAME/DIRECTION" of each interface to its
	// model.Assignment (user and tier class minors).
	AssignmentsFile = "assignments.json"
)

// saveOverrides writes ov to the state directory. A failure is recorded
// (stateWritten), returned, and retried on later reconcile ticks.
func (d *Daemon) saveOverrides(ov policy.Overrides) error {
	err := statefile.SaveJSON(d.plan.Daemon.StateDir, OverridesFile, &ov)
	d.stateWritten(OverridesFile, err)
	d.overridesUnsaved = err != nil
	return err
}

// saveUsage writes the quota usage and marks it flushed at now. A failure
// leaves it due; it is retried on later reconcile ticks, and the counts
// keep growing in memory meanwhile (they come from the kernel's counters,
// so the next successful write holds everything). Removed users whose
// quota period has ended are forgotten first (policy.Usage.PruneEnded).
func (d *Daemon) saveUsage(now time.Time) {
	d.usage.PruneEnded(now)
	err := statefile.SaveJSON(d.plan.Daemon.StateDir, UsageFile, d.usage)
	d.stateWritten(UsageFile, err)
	if err == nil {
		d.usage.Flushed(now)
	}
}

// saveAssignments writes every interface's class assignment when it
// differs from what the state file holds (a failure leaves it differing,
// so a later call writes it).
func (d *Daemon) saveAssignments() {
	ids := make(map[string]*model.Assignment, len(d.ifaces))
	for _, st := range d.ifaces {
		ids[st.key] = st.ids
	}
	b, err := json.Marshal(ids)
	if err == nil && bytes.Equal(b, d.savedIDs) {
		d.assignmentsDue = false
		return
	}
	if err == nil {
		err = statefile.WriteAtomic(filepath.Join(d.plan.Daemon.StateDir, AssignmentsFile), append(b, '\n'), 0o640)
	}
	d.stateWritten(AssignmentsFile, err)
	if err == nil {
		d.savedIDs, d.assignmentsDue = b, false
	}
}
