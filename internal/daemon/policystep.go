package daemon

import (
	"errors"
	"time"

	"github.com/shaperd/shaperd/pkg/policy"
)

// policyStep is the policy tick: expire overrides, evaluate the policy at
// now, build every interface's desired tree and reconcile those that
// changed. It returns the reconcile errors joined.
func (d *Daemon) policyStep(now time.Time) error {
	if expired := d.overrides.Expire(now); len(expired) > 0 {
		for _, o := range expired {
			d.log.Info("override expired", "target", o.Target.String(), "rate", o.Rate, "ceil", o.Ceil)
		}
		d.saveOverrides(d.overrides)
	}
	res := policy.Evaluate(d.plan, d.overrides, d.usage, now)
	targets := d.ramper.Step(res, now)
	var errs []error
	for i, st := range d.ifaces {
		if i >= len(targets) || !d.setTargets(st, targets[i]) {
			continue
		}
		if err := d.reconcile(st, "policy"); err != nil {
			errs = append(errs, err)
		}
	}
	d.publish()
	return errors.Join(errs...)
}
