package daemon

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/check"
	"github.com/shaperd/shaperd/internal/check/offline"
	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/simulate"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/sim"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// atCeiling is the share of its effective ceiling at which a user's
// measured rate counts as "would take more" (demand max) for a simulation
// on measured demand.
const atCeiling = 0.95

// Simulate implements control.Service: the simulator on the live plan,
// overrides (plus req.Set's what-ifs) and quota usage, with req.Demand or
// else each user's measured rate. It changes nothing.
func (d *Daemon) Simulate(ctx context.Context, req control.SimulateRequest) (*control.SimulateResponse, error) {
	var resp *control.SimulateResponse
	var err error
	if cerr := d.call(ctx, func() { resp, err = d.simulate(req) }); cerr != nil {
		return nil, cerr
	}
	return resp, err
}

func (d *Daemon) simulate(req control.SimulateRequest) (*control.SimulateResponse, error) {
	now := d.clock.Now()
	ov := d.overrides.Clone()
	for _, s := range req.Set {
		o, err := parseWhatIf(s, now)
		if err != nil {
			return nil, control.BadUsage("%v", err)
		}
		if err := policy.CheckOverride(d.plan, o); err != nil {
			return nil, &control.BadRequestError{Message: fmt.Sprintf("--set %s: %v", s, err)}
		}
		if err := ov.Set(o); err != nil {
			return nil, &control.BadRequestError{Message: fmt.Sprintf("--set %s: %v", s, err)}
		}
	}
	var spec *simulate.Spec
	if req.Demand != "" {
		var err error
		if spec, err = simulate.ParseSpec(req.Demand); err != nil {
			return nil, control.BadUsage("%v", err)
		}
	} else {
		spec = simulate.MeasuredSpec(d.measuredDemand())
	}
	rep, err := simulate.SimulateState(d.plan, ov, d.usage, spec, now, sim.Options{})
	if err != nil {
		return nil, &control.BadRequestError{Message: err.Error()}
	}
	var text, js bytes.Buffer
	if err := rep.WriteTable(&text); err != nil {
		return nil, err
	}
	if err := rep.WriteJSON(&js); err != nil {
		return nil, err
	}
	resp := &control.SimulateResponse{Text: text.String(), Report: bytes.TrimSpace(js.Bytes())}
	for _, u := range rep.Users {
		lim := u.LimitedBy
		if u.Detail != "" {
			lim += " (" + u.Detail + ")"
		}
		resp.Users = append(resp.Users, control.SimulatedUser{User: u.User, Interface: u.Interface,
			Direction: policy.DirectionOf(config.Direction(u.Direction)).String(), BitsPerSecond: u.Rate, LimitedBy: lim})
	}
	return resp, nil
}

// measuredDemand is each user's download and upload demand from the
// counters of the last reconcile: the measured rate, or max when the user
// is at atCeiling of its effective ceiling (it would take more).
func (d *Daemon) measuredDemand() map[simulate.MeasuredKey]sim.Demand {
	out := map[simulate.MeasuredKey]sim.Demand{}
	for _, us := range d.status().Users {
		dir := model.Egress
		if us.Direction == policy.DirUpload.String() {
			dir = model.Ingress
		}
		dem := sim.Demand(us.Throughput)
		if us.EffectiveCeil > 0 && float64(us.Throughput) >= atCeiling*float64(us.EffectiveCeil) {
			dem = sim.Max
		}
		out[simulate.MeasuredKey{User: us.Name, Interface: us.Interface, Direction: dir}] = dem
	}
	return out
}

// parseWhatIf parses a --set TARGET=RATE[:CEIL] into an override for both
// directions.
func parseWhatIf(s string, now time.Time) (policy.Override, error) {
	target, rates, ok := strings.Cut(s, "=")
	if !ok {
		return policy.Override{}, fmt.Errorf("--set %q: want TARGET=RATE[:CEIL]", s)
	}
	t, err := policy.ParseTarget(target)
	if err != nil {
		return policy.Override{}, fmt.Errorf("--set %q: %w", s, err)
	}
	rs, cs, _ := strings.Cut(rates, ":")
	rate, err := tbf.ParseRate(rs)
	if err != nil {
		return policy.Override{}, fmt.Errorf("--set %q: %w", s, err)
	}
	o := policy.Override{Target: t, Rate: rate, Set: now}
	if cs != "" {
		if o.Ceil, err = tbf.ParseRate(cs); err != nil {
			return policy.Override{}, fmt.Errorf("--set %q: %w", s, err)
		}
	}
	return o, o.Validate()
}

// PlanDiff implements control.Service: what reloading the configuration
// file would change in the kernel, with the overrides and usage in force,
// changing nothing (shaperctl reload --dry-run). Users the reload would
// remove are counted first, with whether the reload needs
// --allow-removals.
func (d *Daemon) PlanDiff(ctx context.Context) (*control.PlanDiffResponse, error) {
	var diffs []check.PlanDiff
	var note string
	var err error
	if cerr := d.call(ctx, func() { diffs, note, err = d.reloadDiffs() }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if note != "" {
		fmt.Fprintln(&b, note)
	}
	check.WritePlanDiff(&b, diffs, true)
	resp := &control.PlanDiffResponse{Text: b.String(), Note: note, Interfaces: planDiffInterfaces(diffs)}
	for _, pd := range diffs {
		resp.Changes += len(pd.Changes)
	}
	return resp, nil
}

// sharedPlan is the fleet's shared part in force (nil without a fleet),
// for loading the configuration file as a reload would.
func (d *Daemon) sharedPlan() *config.Shared {
	if d.fleet == nil {
		return nil
	}
	return sharedOf(d.fleet.shared)
}

// dryReconcilers is makeReconcilers without its effects: class ids are copies of the
// ones in force for the same interface, else recovered from the kernel
// (read only); nothing is consumed or handed to the kernel.
func (d *Daemon) dryReconcilers(plan *config.Plan) []*reconciler {
	byKey := map[string]*reconciler{}
	for _, st := range d.ifaces {
		byKey[st.key] = st
	}
	out := make([]*reconciler, 0, len(plan.Interfaces))
	for i := range plan.Interfaces {
		st := newReconciler(plan.Interfaces[i])
		if o, ok := byKey[st.key]; ok {
			st.ids = o.ids.Clone()
		} else {
			st.ids = d.recoverAssignment(plan, st)
		}
		out = append(out, st)
	}
	return out
}

// reloadDiffs is what reloading the files would change, prepared the way
// reload prepares it (reloadWith): the fleet's shared plan a reload would
// take (the refused one when it loads now), the kernel's link sizes and
// leaf kinds, the classifier check, the run-time users a reload keeps and
// the overrides it evaluates (local and fleet, pruned to the new plan),
// against what the kernel holds, and a note on the users it would remove
// ("" when none). A plan the reload would refuse is an error.
func (d *Daemon) reloadDiffs() ([]check.PlanDiff, string, error) {
	shared := d.sharedPlan()
	if d.fleet != nil && d.fleet.refusedPlan != nil {
		if _, err := loadPlan(d.opts.ConfigPath, sharedOf(d.fleet.refusedPlan)); err == nil {
			shared = sharedOf(d.fleet.refusedPlan)
		}
	}
	plan, err := loadPlan(d.opts.ConfigPath, shared)
	if err != nil {
		return nil, "", err
	}
	_, _ = d.probeLeaves(plan) // a failed probe falls back as reload's does
	if err := d.checkClassifiers(plan); err != nil {
		return nil, "", err
	}
	if len(d.runtime) > 0 {
		plan, _, _ = withRuntime(plan, d.runtime, d.clock.Now())
		if errs := offline.Plan(plan); len(errs) > 0 {
			return nil, "", &ConfigError{Problems: append([]string{"with the run-time users (shaperctl user list):"}, errorMessages(errs)...)}
		}
	}
	ifaces := d.dryReconcilers(plan)
	ov := d.overrides.Clone()
	ov.Prune(plan)
	var note string
	if gone := d.removedUsers(plan); len(gone) > 0 {
		note = fmt.Sprintf("removes %d of the %d users in force: %s", len(gone), len(d.plan.Users), describe(gone, 10))
		if ce := d.checkRemovals(plan, gone); ce != nil {
			note += fmt.Sprintf(" (more than daemon.max_reload_removals = \"%d%%\" allows: a reload needs --allow-removals)",
				d.plan.Daemon.MaxReloadRemovals)
		}
	}
	return d.planDiff(plan, ifaces, d.evalOverrides(ov), d.clock.Now()), note, nil
}
