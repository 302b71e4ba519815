package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// call runs fn on the loop goroutine and waits for it, or for ctx.
// Before Run's loop starts the call waits; after it stopped the call fails
// with control.ErrUnavailable.
func (d *Daemon) call(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	select {
	case d.reqs <- func() { fn(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-d.stopped:
		return fmt.Errorf("shaperd is stopping: %w", control.ErrUnavailable)
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Status implements control.Service: the plan, every user's effective
// shaping and the counters of the last dump.
func (d *Daemon) Status(ctx context.Context) (*control.Status, error) {
	var st *control.Status
	if err := d.call(ctx, func() { st = d.status() }); err != nil {
		return nil, err
	}
	return st, nil
}

// SetRate implements control.Service: it validates the override against
// the plan, saves it in the state directory and applies it at once.
func (d *Daemon) SetRate(ctx context.Context, req control.SetRateRequest) (*control.SetRateResponse, error) {
	var resp *control.SetRateResponse
	var err error
	if cerr := d.call(ctx, func() { resp, err = d.setRate(req) }); cerr != nil {
		return nil, cerr
	}
	return resp, err
}

// Clear implements control.Service: the target returns to its plan.
func (d *Daemon) Clear(ctx context.Context, target string) error {
	var err error
	if cerr := d.call(ctx, func() { err = d.clear(target) }); cerr != nil {
		return cerr
	}
	return err
}

// Reload implements control.Service (and SIGHUP): the configuration is
// reread, validated and built; an invalid one is a *control.ValidationError
// and changes nothing, a valid one is swapped in and applied.
func (d *Daemon) Reload(ctx context.Context) error {
	var err error
	if cerr := d.call(ctx, func() { err = d.reload() }); cerr != nil {
		return cerr
	}
	return err
}

// parseTarget turns a control target into a policy one that plan has.
func (d *Daemon) checkTarget(s string) (policy.Target, error) {
	t, err := policy.ParseTarget(s)
	if err != nil {
		return t, control.BadRequest("target %q: %v", s, err)
	}
	probe := policy.Override{Target: t, Rate: config.MinRate}
	if err := policy.CheckOverride(d.plan, probe); errors.Is(err, policy.ErrUnknownTarget) {
		return t, &control.NotFoundError{Target: s}
	}
	return t, nil
}

func (d *Daemon) setRate(req control.SetRateRequest) (*control.SetRateResponse, error) {
	t, err := d.checkTarget(req.Target)
	if err != nil {
		return nil, err
	}
	if err := req.CheckBound(rateBound(d.plan, t)); err != nil {
		return nil, err
	}
	now := d.clock.Now()
	ceil := req.Rate
	if req.Ceil != nil {
		ceil = *req.Ceil
	}
	o := policy.Override{Target: t, Rate: req.Rate, Ceil: ceil, Set: now}
	ramp := d.plan.Policy.Ramp
	if req.Ramp != nil {
		r := req.Ramp.Std()
		o.Ramp, ramp = &r, r
	}
	if req.For != nil {
		o.Until = now.Add(req.For.Std())
	}
	if err := o.Validate(); err != nil {
		return nil, control.BadRequest("%v", err)
	}
	if err := policy.CheckOverrideBuild(d.plan, d.overrides, o, now); err != nil {
		return nil, control.BadRequest("%v", err) // names the target, the interface and why
	}
	ov := d.overrides.Clone()
	if err := ov.Set(o); err != nil {
		return nil, control.BadRequest("%v", err)
	}
	if err := d.saveOverrides(ov); err != nil {
		return nil, fmt.Errorf("override not set: %w", err)
	}
	d.overrides = ov
	d.log.Info("override set", "target", t.String(), "rate", o.Rate, "ceil", o.Ceil, "ramp", ramp, "until", o.Until)
	if err := d.overrideChanged(t, now); err != nil {
		d.log.Error("applying the override", "target", t.String(), "err", err)
	}
	resp := &control.SetRateResponse{Target: req.Target, Users: d.usersOf(t), Rate: o.Rate, Ceil: ceil,
		Ramp: control.Duration(ramp)}
	if !o.Until.IsZero() {
		u := o.Until
		resp.Until = &u
	}
	return resp, nil
}

func (d *Daemon) clear(target string) error {
	t, err := d.checkTarget(target)
	if err != nil {
		return err
	}
	ov := d.overrides.Clone()
	if !ov.Clear(t) {
		return nil
	}
	if err := d.saveOverrides(ov); err != nil {
		return fmt.Errorf("override not cleared: %w", err)
	}
	d.overrides = ov
	d.log.Info("override cleared", "target", t.String())
	if err := d.overrideChanged(t, d.clock.Now()); err != nil {
		d.log.Error("applying the cleared override", "target", t.String(), "err", err)
	}
	return nil
}

// rateBound is the most a set-rate may give t: the smallest configured
// bandwidth of the interfaces t is shaped on. Users and tiers are shaped on
// every HTB interface, with the same override in both directions, so their
// bound is the smallest HTB interface (e.g. the upload side); an iface:NAME
// target sets the bandwidth of every interface with that name (or IFB
// device), so its bound is the smallest of those. Configured bandwidths
// count, not an iface override in force: an override may lower an
// interface, never raise it above what the operator declared.
func rateBound(plan *config.Plan, t policy.Target) control.RateBound {
	var b control.RateBound
	names := map[string]int{}
	for _, in := range plan.Interfaces {
		names[in.Name]++
	}
	n := 0
	for _, in := range plan.Interfaces {
		switch t.Kind {
		case policy.TargetIface:
			if in.Name != t.Name && (in.IFB == "" || in.IFB != t.Name) {
				continue
			}
		default:
			if in.Shaper != config.ShaperHTB {
				continue
			}
		}
		n++
		if b.Bandwidth == 0 || in.Bandwidth < b.Bandwidth {
			b.Bandwidth, b.Interface = in.Bandwidth, in.Name
			if names[in.Name] > 1 {
				b.Interface = in.Name + " " + string(in.Direction)
			}
		}
	}
	b.Several = n > 1
	return b
}

// usersOf lists the users a target affects, sorted.
func (d *Daemon) usersOf(t policy.Target) []string {
	var out []string
	for _, u := range d.plan.Users {
		switch t.Kind {
		case policy.TargetUser:
			if u.Name == t.Name {
				out = append(out, u.Name)
			}
		case policy.TargetTier:
			if u.Tier == t.Name {
				out = append(out, u.Name)
			}
		case policy.TargetIface:
			out = append(out, u.Name)
		}
	}
	slices.Sort(out)
	return out
}

// bitsPerSecond converts a byte count over d to a rate.
func bitsPerSecond(bytes uint64, d time.Duration) tbf.Rate {
	if d <= 0 {
		return 0
	}
	return tbf.Rate(float64(bytes) * 8 / d.Seconds())
}
