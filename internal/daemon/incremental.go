package daemon

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// bringToKernel makes the kernel hold st.desired after it changed from
// old. When the kernel held old (wasSynced) the changes are
// model.Diff(old, desired), applied without a dump; otherwise, or when
// the kernel refuses them, it reconciles (dump, diff, apply, verify).
func (d *Daemon) bringToKernel(st *iface, old model.Tree, wasSynced bool, why string) error {
	if !wasSynced || st.missing || old.Root == nil || old.Device != st.desired.Device {
		return d.reconcile(st, why)
	}
	return d.applyChanges(st, model.Diff(old, st.desired), why)
}

// applyChanges applies changes that take the kernel from the tree it held
// (in sync) to st.desired, without a dump; a refusal falls back to a full
// reconcile. The periodic reconcile verifies.
func (d *Daemon) applyChanges(st *iface, changes []model.Change, why string) (err error) {
	if len(changes) == 0 {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = d.recovered(st, r)
			st.lastErr = err
		}
	}()
	start := d.clock.Now()
	res, err := d.k.Apply(changes)
	d.stats.writes.Add(float64(res.Writes))
	took := d.clock.Now().Sub(start)
	d.lastApply = took
	if err != nil {
		if len(res.Refused) == 0 {
			d.stats.errors.WithLabelValues("kernel").Inc()
		} // else the reconcile below counts and reports each refusal
		d.log.Warn("incremental apply refused; reconciling", "interface", st.key, "why", why,
			"writes", res.Writes, "err", err)
		st.inSync = false
		return d.reconcile(st, why)
	}
	now := d.clock.Now()
	for _, c := range changes {
		if c.Op == model.OpAdd && c.Class != nil && c.Class.Labels.Kind == "user" {
			d.usage.Observe(c.Class.Labels.User, counterKey(st, c.Class.Handle), 0, now)
		}
	}
	st.inSync = true
	level := d.log.Info
	if why == "ramp" {
		level = d.log.Debug
	}
	level("applied", "interface", st.key, "why", why, "changes", len(changes), "writes", res.Writes, "took", took)
	return nil
}

// rampStep is a policy tick while ramps are in progress and nothing else
// changed: only the ramping classes move (policy.Ramper.StepActive), and
// only their classes are rebuilt and changed in the kernel.
func (d *Daemon) rampStep(now time.Time) error {
	d.work.rampSteps++
	stepped := d.ramper.StepActive(now)
	if len(stepped) == 0 {
		return nil
	}
	users := map[*iface][]policy.Stepped{}
	var full []*iface
	for _, s := range stepped {
		st := d.ifaceOf(s.Key.Interface, s.Key.Direction)
		if st == nil {
			continue
		}
		if s.Key.Kind != policy.ClassUser || !st.built || st.buildErr != nil {
			if !slices.Contains(full, st) {
				full = append(full, st)
			}
			continue
		}
		users[st] = append(users[st], s)
	}
	var errs []error
	for st, ss := range users {
		if slices.Contains(full, st) {
			continue
		}
		if err := d.patchUsers(st, ss, "ramp"); err != nil {
			errs = append(errs, err)
		}
	}
	if len(full) > 0 && d.lastRes != nil {
		targets := d.ramper.Step(d.lastRes, now)
		for i, st := range d.ifaces {
			if i >= len(targets) || !slices.Contains(full, st) {
				continue
			}
			old, wasSynced := st.desired, st.inSync && st.built
			if d.setTargets(st, targets[i]) {
				if err := d.bringToKernel(st, old, wasSynced, "ramp"); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	d.publish()
	return errors.Join(errs...)
}

// patchStepped patches the user classes of stepped (user keys only) into
// their interfaces' desired trees and the kernel.
func (d *Daemon) patchStepped(stepped []policy.Stepped, why string) error {
	byIface := map[*iface][]policy.Stepped{}
	for _, s := range stepped {
		if st := d.ifaceOf(s.Key.Interface, s.Key.Direction); st != nil && s.Key.Kind == policy.ClassUser {
			byIface[st] = append(byIface[st], s)
		}
	}
	var errs []error
	for _, st := range d.ifaces {
		if ss := byIface[st]; len(ss) > 0 {
			if err := d.patchUsers(st, ss, why); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ifaceOf returns the managed interface with configured name and direction.
func (d *Daemon) ifaceOf(name string, dir model.Direction) *iface {
	for _, st := range d.ifaces {
		if st.cfg.Name == name && string(st.cfg.Direction) == string(dir) {
			return st
		}
	}
	return nil
}

// patchUsers gives the user classes of ss their new rates and bursts in
// st.targets and st.desired, rebuilding only those classes (model.Build
// of a tree with just these users, under their own minors), and applies
// one OpChange per class that differs. When the kernel is not known to
// hold st.desired it reconciles instead.
func (d *Daemon) patchUsers(st *iface, ss []policy.Stepped, why string) error {
	if st.targets.Interface.Queues > 1 {
		tg := withUser(st.targets, nil, nil)
		for _, s := range ss {
			for j := range tg.Users {
				if u := &tg.Users[j]; u.Name == s.Key.Name {
					u.Rate, u.Ceil, u.Burst, u.CBurst = s.Applied.Rate, s.Applied.Ceil, s.Applied.Burst, s.Applied.CBurst
				}
			}
		}
		return d.patchQueued(st, tg, why)
	}
	mini := model.Targets{Interface: st.targets.Interface, Tiers: st.targets.Tiers}
	ids := model.NewAssignment()
	for _, t := range st.targets.Tiers {
		if m, ok := st.ids.Tier(t.Name); ok {
			if err := ids.SetTier(t.Name, m); err != nil {
				return fmt.Errorf("interface %s: tier %s: %w", st.key, t.Name, err)
			}
		}
	}
	for _, s := range ss {
		j := d.userIndex(st, s.Key.Name)
		if j < 0 {
			continue
		}
		u := &st.targets.Users[j]
		u.Rate, u.Ceil, u.Burst, u.CBurst = s.Applied.Rate, s.Applied.Ceil, s.Applied.Burst, s.Applied.CBurst
		m, ok := st.ids.User(u.Name)
		if !ok {
			continue
		}
		if err := ids.SetUser(u.Name, m); err != nil {
			return fmt.Errorf("interface %s: user %s: %w", st.key, u.Name, err)
		}
		mini.Users = append(mini.Users, *u)
	}
	if len(mini.Users) == 0 {
		return nil
	}
	tree, err := model.Build(mini, ids)
	if err != nil {
		st.buildErr = err
		d.stats.errors.WithLabelValues("build").Inc()
		return fmt.Errorf("interface %s: %w", st.key, err)
	}
	var changes []model.Change
	for _, c := range tree.Classes {
		if c.Labels.Kind != "user" {
			continue
		}
		i, ok := st.byHandle[c.Handle]
		if !ok {
			continue
		}
		old := st.desired.Classes[i]
		if model.ClassParamsEqual(old, c) && old.Parent == c.Parent {
			continue
		}
		// In place: published snapshots share the slice (see ifaceSnapshot).
		d.classMu.Lock()
		st.desired.Classes[i] = c
		d.classMu.Unlock()
		changes = append(changes, model.Change{Op: model.OpChange, Device: st.desired.Device, Class: &c, FromClass: &old})
	}
	if len(changes) == 0 {
		return nil
	}
	wasSynced := st.inSync && !st.missing
	if !wasSynced {
		st.inSync = false
		return d.reconcile(st, why)
	}
	return d.applyChanges(st, changes, why)
}

// userIndex returns the index of user in st.targets.Users, or -1. Users
// are in plan order, so the plan's index is tried first.
func (d *Daemon) userIndex(st *iface, user string) int {
	if j, ok := d.userIdx[user]; ok && j < len(st.targets.Users) && st.targets.Users[j].Name == user {
		return j
	}
	return slices.IndexFunc(st.targets.Users, func(u model.UserTarget) bool { return u.Name == user })
}
