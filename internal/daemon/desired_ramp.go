package daemon

import (
	"errors"
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
	nodes := map[*reconciler][]policy.Stepped{}
	var full []*reconciler
	for _, s := range stepped {
		st := d.ifaceOf(s.Key.Interface, s.Key.Direction)
		if st == nil {
			continue
		}
		if s.Key.Kind == policy.ClassNode && st.current() {
			nodes[st] = append(nodes[st], s)
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
	for st, ss := range nodes {
		if slices.Contains(full, st) {
			continue
		}
		if err := d.patchNodes(st, ss, "ramp"); err != nil {
			errs = append(errs, err)
		}
	}
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

// patchUsers gives the user classes of ss their new rates and bursts
// (model.Desired.SetUserRates: only those classes are rebuilt) and applies
// one OpChange per class that differs.
func (d *Daemon) patchUsers(st *reconciler, ss []policy.Stepped, why string) error {
	rs := make([]model.UserRates, len(ss))
	for i, s := range ss {
		rs[i] = model.UserRates{Name: s.Key.Name, Rate: s.Applied.Rate, Ceil: s.Applied.Ceil, Burst: s.Applied.Burst, CBurst: s.Applied.CBurst}
	}
	step, err := st.desired().SetUserRates(rs)
	return d.applyStep(st, why, step, err)
}

// patchNodes gives the node classes of ss their new rates
// (model.Desired.PutNode: only those classes are rebuilt) and applies the
// changes, one node after the other.
func (d *Daemon) patchNodes(st *reconciler, ss []policy.Stepped, why string) error {
	var errs []error
	for _, s := range ss {
		nt, ok := st.desired().Node(s.Key.Name)
		if !ok {
			continue
		}
		nt.Rate, nt.Ceil = s.Applied.Rate, s.Applied.Ceil
		step, err := st.desired().PutNode(nt)
		if err := d.applyStep(st, why, step, err); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// patchNodeSteps patches the node classes of stepped (node keys only)
// into their interfaces' desired trees and the kernel.
func (d *Daemon) patchNodeSteps(stepped []policy.Stepped, why string) error {
	byIface := map[*reconciler][]policy.Stepped{}
	for _, s := range stepped {
		if st := d.ifaceOf(s.Key.Interface, s.Key.Direction); st != nil && s.Key.Kind == policy.ClassNode {
			byIface[st] = append(byIface[st], s)
		}
	}
	var errs []error
	for _, st := range d.ifaces {
		if ss := byIface[st]; len(ss) > 0 {
			if err := d.patchNodes(st, ss, why); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
