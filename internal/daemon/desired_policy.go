package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
)

// RampStep is the longest interval between two steps of a ramp in
// progress: while any class ramps, the policy ticker runs every
// min(policy.interval, RampStep) (250 ms steps meet the smoothness
// targets; see internal/lab/smoothness), and falls back to policy.interval
// when no ramp is active.
const RampStep = 250 * time.Millisecond

// rampEvery is the tick while ramps are in progress for policy p.
func rampEvery(p config.Policy) time.Duration { return min(p.Interval, RampStep) }

// rampPolicy is p as the Ramper sees it: its steps come every rampEvery.
func rampPolicy(p config.Policy) config.Policy {
	p.Interval = rampEvery(p)
	return p
}

// workCounters count what the policy ticks did, for tests and logs.
type workCounters struct {
	// evaluations counts policy.Evaluate runs (full policy steps).
	evaluations int
	// rampSteps counts incremental ramp steps (StepActive).
	rampSteps int
	// idleTicks counts policy ticks that found nothing to do.
	idleTicks int
	// userSteps counts single-user changes (set-rate/clear of a user)
	// done without a full evaluation.
	userSteps int
}

// overrideChanged brings an override change of t to the kernel at now. A
// user's override re-evaluates just that user (policy.Result.UpdateUser,
// Ramper.StepUser) and changes just their classes; other targets (tiers,
// interfaces) take a full policy step.
func (d *Daemon) overrideChanged(t policy.Target, now time.Time) error {
	for _, st := range d.ifaces {
		if !st.current() {
			return d.policyStep(now)
		}
	}
	if t.Kind == policy.TargetNode && d.lastRes != nil && d.lastRes.UpdateNode(d.plan, d.evalOverrides(d.overrides), now, t.Name) {
		// The node's class alone (policy.Result.UpdateNode): no full
		// evaluation, the same as for one user.
		d.work.userSteps++
		ev := d.evalOverrides(d.overrides)
		d.foresee(policy.NextChange(d.plan, &ev, now))
		err := d.patchNodeSteps(d.ramper.StepNode(d.lastRes, t.Name, now), "set-rate")
		d.publish()
		return err
	}
	if t.Kind != policy.TargetUser || d.lastRes == nil || !d.lastRes.UpdateUser(d.plan, d.evalOverrides(d.overrides), d.usage, now, t.Name) {
		return d.policyStep(now)
	}
	d.work.userSteps++
	ev := d.evalOverrides(d.overrides)
	d.foresee(policy.NextChange(d.plan, &ev, now))
	err := d.patchStepped(d.ramper.StepUser(d.lastRes, t.Name, now), "set-rate")
	d.publish()
	return err
}

// foresee moves the next full evaluation to next when that is earlier. A
// targeted change (one user's or one node's) evaluates its target alone,
// so what the last full evaluation foresaw must still come at its time:
// an override that ended just before the change, and is still waiting for
// that evaluation to end it, is one that policy.NextChange (which looks
// after now) no longer sees.
func (d *Daemon) foresee(next time.Time) {
	if next.Before(d.nextPolicy) {
		d.nextPolicy = next
	}
}

// policyTick is one tick of the policy ticker. It evaluates the policy
// only when something can have changed since the last evaluation: the
// plan, the overrides or quota usage (policyDirty), or now reached the
// next schedule/period minute or override expiry (policy.NextChange), or
// the clock stepped back behind the last evaluation (else a step back would
// freeze schedules for as long as the step). Otherwise, while ramps are in progress it steps just the ramping
// classes; else it does nothing.
func (d *Daemon) policyTick(now time.Time) error {
	if err := d.rebalanceQueues(now); err != nil {
		d.log.Warn("rebalancing queues", "err", err)
	}
	if !d.rtExpiry.IsZero() && !now.Before(d.rtExpiry) {
		return d.expireAddresses(now)
	}
	if d.policyDirty || !now.Before(d.nextPolicy) || now.Before(d.lastEval) {
		return d.policyStep(now)
	}
	if d.ramper.Active() {
		return d.rampStep(now)
	}
	d.work.idleTicks++
	return nil
}

// policyStep is a full policy evaluation: expire overrides, evaluate the
// policy at now, step the ramps, build every interface's desired tree and
// bring those that changed to the kernel. It returns the errors joined.
func (d *Daemon) policyStep(now time.Time) error {
	expired := d.overrides.Expire(now)
	if len(expired) > 0 {
		d.saveOverrides(d.overrides)
	}
	d.work.evaluations++
	d.policyDirty, d.lastEval = false, now
	ev := d.evalOverrides(d.overrides)
	d.nextPolicy = policy.NextChange(d.plan, &ev, now)
	res := policy.Evaluate(d.plan, ev, d.usage, now)
	prev := d.lastRes
	for _, o := range expired {
		d.event(EventOverrideExpired, "target", o.Target.String(), "direction", o.Direction.String(),
			"old", d.targetRates(prev, o.Target), "new", d.targetRates(res, o.Target),
			"reason", fmt.Sprintf("override %s/%s expired at %s", o.Rate, max(o.Ceil, o.Rate), o.Until.Format(time.RFC3339)))
	}
	d.policyEvents(prev, res)
	d.lastRes = res
	d.publishQuota(res)
	targets := d.ramper.Step(res, now)
	var errs []error
	for i, st := range d.ifaces {
		if i >= len(targets) {
			continue
		}
		if err := d.retarget(st, targets[i], "policy"); err != nil {
			errs = append(errs, err)
		}
	}
	d.quota.observe(d.plan, res)
	d.publish()
	return errors.Join(errs...)
}

// policyTickEvery is the policy ticker's interval now: rampEvery while a
// ramp is in progress, else policy.interval.
func (d *Daemon) policyTickEvery() time.Duration {
	if d.ramper.Active() {
		return rampEvery(d.plan.Policy)
	}
	return d.plan.Policy.Interval
}
