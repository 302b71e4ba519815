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
	return d.send(ctx, d.reqs, fn)
}

// callRead is call for a request that only reads the daemon's state
// (status, top): besides the loop, a long apply serves it between two
// runs of writes (applyProgress), so that status does not wait behind the
// rebuild of a whole tree. fn must not use the kernel while d.applying.
func (d *Daemon) callRead(ctx context.Context, fn func()) error {
	return d.send(ctx, d.reads, fn)
}

// send hands fn to the loop on ch and waits for it to have run.
func (d *Daemon) send(ctx context.Context, ch chan<- func(), fn func()) error {
	done := make(chan struct{})
	select {
	case ch <- func() { fn(); close(done) }:
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
// shaping and the counters, read first when they are reconcile_interval
// old. During a long apply it is answered between two runs of writes,
// with the counters last read.
func (d *Daemon) Status(ctx context.Context) (*control.Status, error) {
	var st *control.Status
	if err := d.callRead(ctx, func() {
		if !d.applying {
			d.refreshCounters(d.clock.Now(), d.plan.Daemon.ReconcileInterval)
		}
		st = d.status()
	}); err != nil {
		return nil, err
	}
	return st, nil
}

// SetRate implements control.Service: it validates the override against
// the plan, saves it in the state directory and applies it at once.
func (d *Daemon) SetRate(ctx context.Context, req control.SetRateRequest) (*control.SetRateResponse, error) {
	var resp *control.SetRateResponse
	var err error
	var by *uint32
	if p, ok := control.PeerFrom(ctx); ok {
		by = &p.UID
	}
	if cerr := d.call(ctx, func() { resp, err = d.setRate(req, by) }); cerr != nil {
		return nil, cerr
	}
	return resp, err
}

// Clear implements control.Service: the target returns to its plan (in
// req.Direction, or in both). Nothing set is not an error: the answer
// lists nothing cleared.
func (d *Daemon) Clear(ctx context.Context, req control.ClearRequest) (*control.ClearResponse, error) {
	var resp *control.ClearResponse
	var err error
	if cerr := d.call(ctx, func() { resp, err = d.clear(req) }); cerr != nil {
		return nil, cerr
	}
	return resp, err
}

// Reload implements control.Service (and SIGHUP): the configuration is
// reread, validated and built; an invalid one is a *control.ValidationError
// and changes nothing, a valid one is swapped in and applied, and the
// answer gives every interface's state after it. A reload that removes
// more users than daemon.max_reload_removals allows is refused unless
// req.AllowRemovals (SIGHUP cannot confirm: it passes the zero request).
func (d *Daemon) Reload(ctx context.Context, req control.ReloadRequest) (*control.ReloadStatus, error) {
	var err error
	var res *control.ReloadStatus
	if cerr := d.call(ctx, func() {
		err = d.reload(req.AllowRemovals)
		res = d.lastReload
	}); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Overrides implements control.Service: the overrides in force.
func (d *Daemon) Overrides(ctx context.Context) (*control.OverridesResponse, error) {
	var resp *control.OverridesResponse
	if err := d.call(ctx, func() {
		resp = &control.OverridesResponse{Overrides: d.overrideList(d.clock.Now())}
	}); err != nil {
		return nil, err
	}
	return resp, nil
}

// checkTarget turns a control target and direction into policy ones that
// plan has.
func (d *Daemon) checkTarget(s, direction string) (policy.Target, policy.Direction, error) {
	t, dir, err := control.ParseDirectedTarget(s, direction)
	if err != nil {
		return t, dir, err
	}
	probe := policy.Override{Target: t, Rate: config.MinRate}
	if err := policy.CheckOverride(d.plan, probe); errors.Is(err, policy.ErrUnknownTarget) {
		return t, dir, &control.NotFoundError{Target: s}
	}
	probe.Direction = dir
	if err := policy.CheckOverride(d.plan, probe); errors.Is(err, policy.ErrUnknownTarget) {
		return t, dir, control.BadRequest("%v", err) // an interface without that side
	}
	return t, dir, nil
}

func (d *Daemon) setRate(req control.SetRateRequest, by *uint32) (*control.SetRateResponse, error) {
	t, dir, err := d.checkTarget(req.Target, req.Direction)
	if err != nil {
		return nil, err
	}
	if err := d.checkBounds(req, t, dir); err != nil {
		return nil, err
	}
	now := d.clock.Now()
	ceil := req.Rate
	if req.Ceil != nil {
		ceil = *req.Ceil
	}
	o := policy.Override{Target: t, Direction: dir, Rate: req.Rate, Ceil: ceil, Set: now, SetBy: by}
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
	old := d.targetRates(d.lastRes, t)
	if err := d.overrideChanged(t, now); err != nil {
		d.log.Error("applying the override", "target", t.String(), "err", err)
	}
	reason := "set-rate"
	if by != nil {
		reason = fmt.Sprintf("set-rate by uid %d", *by)
	}
	d.event(EventOverrideSet, "target", t.String(), "direction", dir.String(), "old", old, "new", d.targetRates(d.lastRes, t),
		"reason", reason, "rate", o.Rate, "ceil", o.Ceil, "ramp", ramp, "until", o.Until)
	resp := &control.SetRateResponse{Target: req.Target, Users: d.usersOf(t), Rate: o.Rate, Ceil: ceil,
		Ramp: control.Duration(ramp), Direction: dir.String(), DefaultOf: d.defaultOf(t)}
	if tier := d.tierOf(t); dir == policy.DirBoth && tier != nil && d.hasIngress() {
		if r, c, scaled := policy.UploadScale(o.Rate, ceil, tier); scaled {
			resp.UploadRate, resp.UploadCeil = r, c
		}
	}
	if !o.Until.IsZero() {
		u := o.Until
		resp.Until = &u
	}
	return resp, nil
}

func (d *Daemon) clear(req control.ClearRequest) (*control.ClearResponse, error) {
	t, dir, err := d.checkTarget(req.Target, req.Direction)
	if err != nil {
		return nil, err
	}
	resp := &control.ClearResponse{Target: t.String(), Direction: dir.String(), Cleared: []control.OverrideStatus{}}
	ov := d.overrides.Clone()
	gone := ov.ClearDirection(t, dir)
	if len(gone) == 0 {
		if _, ok := d.overrides.Get(t, d.clock.Now()); ok && dir != policy.DirBoth {
			resp.Note = fmt.Sprintf("%s has an override for both directions, none for %s alone: clear it without --direction", t, dir)
		}
		d.log.Info("clear: nothing was set", "target", t.String(), "direction", dir.String())
		return resp, nil
	}
	if err := d.saveOverrides(ov); err != nil {
		return nil, fmt.Errorf("override not cleared: %w", err)
	}
	d.overrides = ov
	old := d.targetRates(d.lastRes, t)
	for _, o := range gone {
		resp.Cleared = append(resp.Cleared, overrideStatus(o))
	}
	if err := d.overrideChanged(t, d.clock.Now()); err != nil {
		d.log.Error("applying the cleared override", "target", t.String(), "err", err)
	}
	for _, o := range gone {
		d.event(EventOverrideCleared, "target", t.String(), "direction", o.Direction.String(), "old", old,
			"new", d.targetRates(d.lastRes, t), "reason", fmt.Sprintf("clear of the override %s/%s; back to the plan", o.Rate, max(o.Ceil, o.Rate)))
	}
	return resp, nil
}

// checkBounds refuses a set-rate whose rates exceed the bandwidth of an
// interface the override applies to. A user or tier override of both
// directions whose tier scales uploads (policy.UploadScale) is checked with
// the rates as written against the download interfaces and with the scaled
// rates against the upload ones; otherwise with the rates as written
// against every interface it applies to (see rateBound).
func (d *Daemon) checkBounds(req control.SetRateRequest, t policy.Target, dir policy.Direction) error {
	all := rateBound(d.plan, t, dir)
	tier := d.tierOf(t)
	if dir != policy.DirBoth || tier == nil {
		return req.CheckBound(all)
	}
	ceil := req.Rate
	if req.Ceil != nil {
		ceil = *req.Ceil
	}
	ur, uc, scaled := policy.UploadScale(req.Rate, ceil, tier)
	if !scaled {
		return req.CheckBound(all)
	}
	down := rateBound(d.plan, t, policy.DirDownload)
	down.Several = all.Several
	if err := req.CheckBound(down); err != nil {
		return err
	}
	up := rateBound(d.plan, t, policy.DirUpload)
	up.Several = all.Several
	scaledReq := req
	scaledReq.Rate, scaledReq.Ceil, scaledReq.RateText, scaledReq.CeilText = ur, &uc, "", ""
	if err := scaledReq.CheckBound(up); err != nil {
		return control.BadRequest("%v (the upload side of %s, scaled by tier %s's upload/download ratio; use --direction to set one side)", err, req.Target, tier.Name)
	}
	return nil
}

// tierOf is the tier whose upload/download ratio scales an override of t:
// the tier itself or the user's tier; nil for an interface.
func (d *Daemon) tierOf(t policy.Target) *config.Tier {
	name := t.Name
	switch t.Kind {
	case policy.TargetUser:
		i, ok := d.userIdx[t.Name]
		if !ok {
			return nil
		}
		name = d.plan.Users[i].Tier
	case policy.TargetTier:
	default:
		return nil
	}
	tier, _ := d.plan.Tier(name)
	return tier
}

// hasIngress reports whether some HTB interface shapes uploads.
func (d *Daemon) hasIngress() bool {
	for _, in := range d.plan.Interfaces {
		if in.Shaper == config.ShaperHTB && in.Direction == config.Ingress {
			return true
		}
	}
	return false
}

// defaultOf lists the interfaces (with direction) whose default class
// follows tier t, for a tier target.
func (d *Daemon) defaultOf(t policy.Target) []string {
	if t.Kind != policy.TargetTier {
		return nil
	}
	var out []string
	for _, in := range d.plan.Interfaces {
		if in.Shaper == config.ShaperHTB && in.DefaultTier == t.Name && in.DefaultRate == 0 {
			out = append(out, in.Name+" "+policy.DirectionOf(in.Direction).String())
		}
	}
	return out
}

// overrideStatus is the local override o as the control API shows it.
func overrideStatus(o policy.Override) control.OverrideStatus {
	r, c := o.Rates()
	s := control.OverrideStatus{Target: o.Target.String(), Direction: o.Direction.String(), Rate: r, Ceil: c,
		Set: o.Set, SetBy: o.SetBy, Source: control.SourceLocal}
	if o.Ramp != nil {
		s.Ramp = control.DurationPtr(*o.Ramp)
	}
	if !o.Until.IsZero() {
		u := o.Until
		s.Until = &u
	}
	return s
}

// overrideList is every override in force at now: the local ones, then
// the fleet's this router applies (Shadowed where a local override of the
// same target and direction wins).
func (d *Daemon) overrideList(now time.Time) []control.OverrideStatus {
	out := []control.OverrideStatus{}
	local := map[policy.Key]bool{}
	for _, o := range d.overrides.List() {
		if o.ActiveAt(now) {
			out = append(out, overrideStatus(o))
			local[o.Key()] = true
		}
	}
	if d.fleet == nil {
		return out
	}
	for _, o := range d.fleet.overrides.List() {
		if o.ActiveAt(now) {
			s := overrideStatus(o)
			s.Source, s.Shadowed = control.SourceFleet, local[o.Key()]
			out = append(out, s)
		}
	}
	return out
}

// rateBound is the most a set-rate may give t: the smallest configured
// bandwidth of the interfaces t is shaped on. Users and tiers are shaped on
// every HTB interface, with the same override in both directions, so their
// bound is the smallest HTB interface (e.g. the upload side); an iface:NAME
// target sets the bandwidth of every interface with that name (or IFB
// device), so its bound is the smallest of those. Configured bandwidths
// count, not an iface override in force: an override may lower an
// interface, never raise it above what the operator declared.
//
// dir limits the interfaces to one direction (DirBoth: all).
func rateBound(plan *config.Plan, t policy.Target, dir policy.Direction) control.RateBound {
	var b control.RateBound
	names := map[string]int{}
	for _, in := range plan.Interfaces {
		names[in.Name]++
	}
	n := 0
	for _, in := range plan.Interfaces {
		if !dir.Covers(in.Direction) {
			continue
		}
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
