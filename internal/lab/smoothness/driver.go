package smoothness

import (
	"fmt"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// driver moves the kernel along the daemon's path: policy.Evaluate with the
// overrides, policy.Ramper.Step, model.Build, Actual (a Dump), model.Diff,
// kernel.Apply and kernel.Verify, as internal/daemon's policy tick does.
type driver struct {
	k      *kernel.Kernel
	clock  Clock
	plan   *config.Plan
	ov     policy.Overrides
	ramper *policy.Ramper
	ids    *model.Assignment
	// desired is the last tree built.
	desired model.Tree
	// mismatches are what Verify reported after writes, one line per
	// write: the daemon logs them and goes on, and so does the driver.
	mismatches []string
}

// newDriver returns a driver for plan on k.
func newDriver(k *kernel.Kernel, clock Clock, plan *config.Plan) *driver {
	return &driver{k: k, clock: clock, plan: plan, ramper: policy.NewRamper(plan.Policy), ids: model.NewAssignment()}
}

// override sets an operator override (as `shaperctl set-rate` does) at now.
func (d *driver) override(target policy.Target, rate tbf.Rate, now time.Time) error {
	o := policy.Override{Target: target, Rate: rate, Set: now}
	if err := policy.CheckOverride(d.plan, o); err != nil {
		return fmt.Errorf("override %s %s: %w", target, rate, err)
	}
	if err := d.ov.Set(o); err != nil {
		return fmt.Errorf("override %s %s: %w", target, rate, err)
	}
	return nil
}

// step runs one policy tick at now. It returns the targets handed out and,
// when the kernel was written, the write's midpoint and duration (ok).
func (d *driver) step(now time.Time) (tg model.Targets, at time.Time, took time.Duration, ok bool, err error) {
	res := policy.Evaluate(d.plan, d.ov, nil, now)
	ts := d.ramper.Step(res, now)
	if len(ts) != 1 {
		return tg, at, 0, false, fmt.Errorf("policy step: %d interfaces, want 1", len(ts))
	}
	tg = ts[0]
	desired, err := model.Build(tg, d.ids)
	if err != nil {
		return tg, at, 0, false, fmt.Errorf("build %s: %w", tg.Interface.Name, err)
	}
	d.desired = desired
	actual, err := d.k.Actual(desired)
	if err != nil {
		return tg, at, 0, false, fmt.Errorf("dump %s: %w", desired.Device, err)
	}
	changes := model.Diff(actual, desired)
	if len(changes) == 0 {
		return tg, at, 0, false, nil
	}
	t0 := d.clock.Now()
	if _, err := d.k.Apply(changes); err != nil {
		return tg, at, 0, false, fmt.Errorf("apply to %s: %w", desired.Device, err)
	}
	t1 := d.clock.Now()
	mism, err := d.k.Verify(desired)
	if err != nil {
		return tg, at, 0, false, fmt.Errorf("verify %s: %w", desired.Device, err)
	}
	if len(mism) > 0 {
		d.mismatches = append(d.mismatches, strings.Join(mism, "; "))
	}
	return tg, t0.Add(t1.Sub(t0) / 2), t1.Sub(t0), true, nil
}

// rampsLeft reports whether a ramp is still in progress.
func (d *driver) rampsLeft() bool { return len(d.ramper.Ramps()) > 0 }

// installed returns what tg installs on the measured object: the user's
// rate (HTB; burst 0) or the TBF rate and burst.
func installed(tg model.Targets) (tbf.Rate, tbf.Size) {
	if tg.Interface.Shaper == model.ShaperTBF {
		return tg.Interface.Bandwidth, tg.Interface.Burst
	}
	for _, u := range tg.Users {
		if u.Name == UserName {
			return u.Rate, 0
		}
	}
	return 0, 0
}

// userClass returns the handle and parent of UserName's class in t.
func userClass(t model.Tree) (model.Class, bool) {
	for _, c := range t.Classes {
		if c.Labels.User == UserName {
			return c, true
		}
	}
	return model.Class{}, false
}
