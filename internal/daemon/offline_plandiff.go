package daemon

import (
	"errors"
	"time"

	"github.com/shaperd/shaperd/internal/check"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// DiffPlan evaluates the plan at now as the daemon would apply it (the
// overrides, the fleet's among them, and quota usage in state_dir, class
// ids from the state file or the kernel, no ramps) and compares it with
// each device's tree in the kernel. It writes nothing: `shaperd --check
// --diff` runs it on a Daemon made with Options.ReadOnly, beside a running
// daemon.
func (d *Daemon) DiffPlan(now time.Time) []check.PlanDiff {
	return d.planDiff(d.plan, d.ifaces, d.evalOverrides(d.overrides), now)
}

// planDiff is DiffPlan for plan on ifaces with the overrides ov (the ones
// the policy evaluates: local and fleet).
func (d *Daemon) planDiff(plan *config.Plan, ifaces []*reconciler, ov policy.Overrides, now time.Time) []check.PlanDiff {
	targets := policy.Evaluate(plan, ov, d.usage, now).Targets()
	out := make([]check.PlanDiff, 0, len(ifaces))
	for i, st := range ifaces {
		pd := check.PlanDiff{Interface: st.key, Device: st.device}
		desired, err := model.Build(targets[i], st.ids)
		if err != nil {
			pd.Err = err
			out = append(out, pd)
			continue
		}
		actual, err := d.k.Actual(desired)
		switch {
		case errors.Is(err, kernel.ErrNoDevice):
			pd.Missing = true
		case err != nil:
			pd.Err = err
		default:
			pd.Changes = model.Diff(actual, desired)
			pd.Users = check.UserDiffs(&actual, &desired)
		}
		out = append(out, pd)
	}
	return out
}
