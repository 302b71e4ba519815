package daemon

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// patchRuntime brings a change of run-time users from old to d.plan to the
// kernel without evaluating every user: each changed user is added
// (policy.Result.AddUser), removed (RemoveUser) or given new addresses, and
// only that user's class and filters are built (a tree of just that user
// under its own minor) and changed. It returns false, having changed
// nothing, when some change cannot be done alone (a tier's first or last
// user, oversubscribed guarantees, an interface not built); the caller
// then takes a full policy step, which also repairs a change it stopped
// in the middle of.
func (d *Daemon) patchRuntime(old *config.Plan, now time.Time) (bool, error) {
	if d.lastRes == nil {
		return false, nil
	}
	for _, st := range d.ifaces {
		if !st.current() {
			return false, nil
		}
	}
	was := make(map[string]*config.User, len(old.Users)-len(d.filePlan.Users))
	for i := len(d.filePlan.Users); i < len(old.Users); i++ {
		was[old.Users[i].Name] = &old.Users[i]
	}
	type change struct {
		name     string
		old, new *config.User
	}
	var changes []change
	for i := len(d.filePlan.Users); i < len(d.plan.Users); i++ {
		u := &d.plan.Users[i]
		o := was[u.Name]
		delete(was, u.Name)
		if o == nil || o.Tier != u.Tier || o.Rate != u.Rate || o.Ceil != u.Ceil || !slices.Equal(o.Prefixes, u.Prefixes) {
			changes = append(changes, change{u.Name, o, u})
		}
	}
	for name, o := range was {
		changes = append(changes, change{name, o, nil})
	}
	ev := d.evalOverrides(d.overrides)
	var errs []error
	for _, c := range changes {
		ok, err := d.patchOne(c.name, c.old, c.new, ev, now)
		if !ok {
			return false, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	d.foresee(policy.NextChange(d.plan, &ev, now))
	d.work.userSteps++
	return true, errors.Join(errs...)
}

// patchRuntimeUser is patchRuntime for one known change: the run-time
// user name went from old to new (nil: absent), nothing else changed.
func (d *Daemon) patchRuntimeUser(name string, old, new *config.User, now time.Time) (bool, error) {
	if d.lastRes == nil {
		return false, nil
	}
	for _, st := range d.ifaces {
		if !st.current() {
			return false, nil
		}
	}
	ev := d.evalOverrides(d.overrides)
	ok, err := d.patchOne(name, old, new, ev, now)
	if !ok {
		return false, nil
	}
	d.foresee(policy.NextChange(d.plan, &ev, now))
	d.work.userSteps++
	return true, err
}

// patchOne patches one user's change into d.lastRes, the interfaces'
// trees and the kernel; false: it needs a full evaluation instead.
func (d *Daemon) patchOne(name string, old, new *config.User, ev policy.Overrides, now time.Time) (bool, error) {
	switch {
	case old == nil:
		return d.patchAdded(name, ev, now)
	case new == nil:
		return d.patchRemoved(name)
	case old.Tier == new.Tier && old.Rate == new.Rate && old.Ceil == new.Ceil && old.Node != new.Node &&
		slices.Equal(old.Prefixes, new.Prefixes):
		return d.patchMoved(new, ev, now)
	case old.Tier == new.Tier && old.Rate == new.Rate && old.Ceil == new.Ceil && old.Node == new.Node:
		if slices.Equal(old.Prefixes, new.Prefixes) {
			return true, nil
		}
		return d.patchAddresses(new)
	}
	return false, nil
}

// patchAdded adds user's classes and filters on every HTB interface.
func (d *Daemon) patchAdded(user string, ev policy.Overrides, now time.Time) (bool, error) {
	if !d.lastRes.AddUser(d.plan, ev, d.usage, now, user) {
		return false, nil
	}
	applied := map[*reconciler]policy.Applied{}
	for _, s := range d.ramper.StepUser(d.lastRes, user, now) {
		if st := d.ifaceOf(s.Key.Interface, s.Key.Direction); st != nil {
			applied[st] = s.Applied
		}
	}
	var errs []error
	for i, st := range d.ifaces {
		if st.cfg.Shaper == config.ShaperTBF || i >= len(d.lastRes.Interfaces) {
			continue
		}
		ir := &d.lastRes.Interfaces[i]
		j := lastIndexOf(ir.Targets.Users, user) // AddUser appends
		if j < 0 {
			continue
		}
		ut := ir.Targets.Users[j]
		if a, ok := applied[st]; ok {
			ut.Rate, ut.Ceil, ut.Burst, ut.CBurst = a.Rate, a.Ceil, a.Burst, a.CBurst
		}
		step, err := st.desired().PutUser(ut)
		if err := d.applyStep(st, "user", step, err); err != nil {
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}

// patchRemoved removes user's classes and filters on every HTB interface.
func (d *Daemon) patchRemoved(user string) (bool, error) {
	if !d.lastRes.RemoveUser(user) {
		return false, nil
	}
	var errs []error
	for _, st := range d.ifaces {
		if _, ok := st.desired().User(user); !ok {
			continue
		}
		d.ramper.Forget(policy.RampKey{Interface: st.cfg.Name, Direction: model.Direction(st.cfg.Direction), Kind: policy.ClassUser, Name: user})
		step, err := st.desired().RemoveUser(user)
		if err := d.applyStep(st, "user", step, err); err != nil {
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}

// patchMoved puts user u behind its new node (u.Node) on every HTB
// interface (policy.Result.MoveUser): the user's class is made again under
// the node's, its filters follow.
func (d *Daemon) patchMoved(u *config.User, ev policy.Overrides, now time.Time) (bool, error) {
	if !d.lastRes.MoveUser(d.plan, ev, d.usage, now, u.Name) {
		return false, nil
	}
	applied := map[*reconciler]policy.Applied{}
	for _, s := range d.ramper.StepUser(d.lastRes, u.Name, now) {
		if st := d.ifaceOf(s.Key.Interface, s.Key.Direction); st != nil {
			applied[st] = s.Applied
		}
	}
	var errs []error
	for i, st := range d.ifaces {
		if st.cfg.Shaper == config.ShaperTBF || i >= len(d.lastRes.Interfaces) {
			continue
		}
		ir := &d.lastRes.Interfaces[i]
		j := slices.IndexFunc(ir.Targets.Users, func(x model.UserTarget) bool { return x.Name == u.Name })
		if j < 0 {
			continue
		}
		ut := ir.Targets.Users[j]
		if a, ok := applied[st]; ok {
			ut.Rate, ut.Ceil, ut.Burst, ut.CBurst = a.Rate, a.Ceil, a.Burst, a.CBurst
		}
		step, err := st.desired().PutUser(ut)
		if err := d.applyStep(st, "user", step, err); err != nil {
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}

// patchAddresses gives u's filters its new addresses on every HTB
// interface; its rates are as they were.
func (d *Daemon) patchAddresses(u *config.User) (bool, error) {
	for i := range d.lastRes.Interfaces {
		ir := &d.lastRes.Interfaces[i]
		for j := range ir.Targets.Users {
			if ir.Targets.Users[j].Name == u.Name {
				ir.Targets.Users[j].Prefixes = u.Prefixes
			}
		}
	}
	var errs []error
	for _, st := range d.ifaces {
		ut, ok := st.desired().User(u.Name)
		if !ok {
			continue
		}
		ut.Prefixes = u.Prefixes
		step, err := st.desired().PutUser(ut)
		if err := d.applyStep(st, "user", step, err); err != nil {
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}

// applyStep brings one operation of st's desired tree (model.Desired) to
// the kernel: its changes as a delta pass; a tree the operation had to
// build again (per-queue trees before their split is known) as a full
// pass, as after new targets. An error is a build failure: the interface
// fails until a build works.
func (d *Daemon) applyStep(st *reconciler, why string, step model.Step, err error) error {
	if err != nil {
		st.buildFailed(err)
		d.stats.errors.WithLabelValues("build").Inc()
		return fmt.Errorf("interface %s: %w", st.key, err)
	}
	if step.Rebuilt {
		st.buildErr = nil
		if len(step.Changes) > 0 && st.state == stateOK {
			st.setState(statePending, nil)
		}
		return d.reconcile(st, why)
	}
	if len(step.Changes) == 0 {
		return nil
	}
	return d.apply(st, deltaPass(why, step.Changes, st.state == stateOK))
}

// lastIndexOf is the index of user in us, looking from the end (where
// run-time users are added), or -1.
func lastIndexOf(us []model.UserTarget, user string) int {
	for j := len(us) - 1; j >= 0; j-- {
		if us[j].Name == user {
			return j
		}
	}
	return -1
}
