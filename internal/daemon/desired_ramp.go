package daemon

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// rampStep is a policy tick while ramps are in progress and nothing else
// changed: only the ramping classes move (policy.Ramper.StepActive), and
// only their classes are rebuilt and changed in the kernel.
func (d *Daemon) rampStep(now time.Time) error {
	d.work.rampSteps++
	stepped := d.ramper.StepActive(now)
	if len(stepped) == 0 {
		return nil
	}
	users := map[*reconciler][]policy.Stepped{}
	var full []*reconciler
	for _, s := range stepped {
		st := d.ifaceOf(s.Key.Interface, s.Key.Direction)
		if st == nil {
			continue
		}
		if s.Key.Kind != policy.ClassUser || !st.current() {
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
			if err := d.retarget(st, targets[i], "ramp"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	d.publish()
	return errors.Join(errs...)
}

// patchStepped patches the user classes of stepped (user keys only) into
// their interfaces' desired trees and the kernel.
func (d *Daemon) patchStepped(stepped []policy.Stepped, why string) error {
	byIface := map[*reconciler][]policy.Stepped{}
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
func (d *Daemon) ifaceOf(name string, dir model.Direction) *reconciler {
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
func (d *Daemon) patchUsers(st *reconciler, ss []policy.Stepped, why string) error {
	if st.targets.Interface.Queues > 1 && !splitComplete(st) {
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
	mini := miniTargets(st)
	names := make([]string, 0, len(ss))
	for _, s := range ss {
		j := d.userIndex(st, s.Key.Name)
		if j < 0 {
			continue
		}
		u := &st.targets.Users[j]
		u.Rate, u.Ceil, u.Burst, u.CBurst = s.Applied.Rate, s.Applied.Ceil, s.Applied.Burst, s.Applied.CBurst
		names = append(names, u.Name)
		mini.Users = append(mini.Users, *u)
	}
	if len(mini.Users) == 0 {
		return nil
	}
	ids, err := miniIDs(st, names...)
	if err != nil {
		return fmt.Errorf("interface %s: %w", st.key, err)
	}
	tree, err := model.Build(mini, ids)
	if err != nil {
		st.buildFailed(err)
		d.stats.errors.WithLabelValues("build").Inc()
		return fmt.Errorf("interface %s: %w", st.key, err)
	}
	var changes []model.Change
	var patched []int
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
		st.desired.Classes[i] = c
		patched = append(patched, i)
		changes = append(changes, model.Change{Op: model.OpChange, Device: st.desired.Device, Class: &c, FromClass: &old})
	}
	st.view = st.view.patched(st.desired.Classes, patched)
	if len(changes) == 0 {
		return nil
	}
	return d.apply(st, deltaPass(why, changes, st.state == stateOK))
}

// userIndex returns the index of user in st.targets.Users, or -1. Users
// are in plan order, so the plan's index is tried first.
func (d *Daemon) userIndex(st *reconciler, user string) int {
	if j, ok := d.userIdx[user]; ok && j < len(st.targets.Users) && st.targets.Users[j].Name == user {
		return j
	}
	return slices.IndexFunc(st.targets.Users, func(u model.UserTarget) bool { return u.Name == user })
}
