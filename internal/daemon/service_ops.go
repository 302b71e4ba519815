package daemon

import (
	"context"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
)

// addOverrideStatus adds to is the overrides in force on its interface: the
// iface override (bandwidth in force and plan) and each tier's override for
// this direction with the rates it gives here; ir is the interface's
// evaluation at now.
func (d *Daemon) addOverrideStatus(is *control.InterfaceStatus, in *config.Interface, ir *policy.InterfaceResult, now time.Time) {
	is.DefaultTier = in.DefaultTier
	if in.DefaultRate != 0 {
		is.DefaultTier = ""
	}
	if o, ok := d.overrides.For(policy.Target{Kind: policy.TargetIface, Name: in.Name}, in.Direction, now); ok {
		s := overrideStatus(o)
		is.Override = &s
	} else if o, ok := d.overrides.For(policy.Target{Kind: policy.TargetIface, Name: in.IFB}, in.Direction, now); ok && in.IFB != "" {
		s := overrideStatus(o)
		is.Override = &s
	}
	if ir != nil && ir.Targets.Interface.Bandwidth != in.Bandwidth {
		is.EffectiveBandwidth = ir.Targets.Interface.Bandwidth
	}
	if in.Shaper != config.ShaperHTB {
		return
	}
	seen := map[string]bool{}
	for _, t := range is.Tiers {
		seen[t.Name] = true
	}
	// The default tier is listed even when no user has it: a tier override
	// changes the default class.
	if t, ok := d.plan.Tier(is.DefaultTier); ok && !seen[t.Name] {
		r, c := t.Rates(in.Direction)
		is.Tiers = append(is.Tiers, control.TierStatus{Name: t.Name, Rate: r, Ceil: c})
	}
	for k := range is.Tiers {
		ts := &is.Tiers[k]
		o, ok := d.overrides.For(policy.Target{Kind: policy.TargetTier, Name: ts.Name}, in.Direction, now)
		if !ok {
			continue
		}
		s := overrideStatus(o)
		ts.Override = &s
		ts.EffectiveRate, ts.EffectiveCeil = o.Rates()
		if t, ok := d.plan.Tier(ts.Name); ok && o.Direction == policy.DirBoth && in.Direction == config.Ingress {
			ts.EffectiveRate, ts.EffectiveCeil, _ = policy.UploadScale(ts.EffectiveRate, ts.EffectiveCeil, t)
		}
	}
}

// ResetQuota implements control.Service: the user's quota usage of the
// current period becomes zero; a user over quota gets the plan back at the
// next policy step (at once).
func (d *Daemon) ResetQuota(ctx context.Context, req control.QuotaResetRequest) (*control.QuotaResetResponse, error) {
	var resp *control.QuotaResetResponse
	var err error
	if cerr := d.call(ctx, func() { resp, err = d.resetQuota(req.User) }); cerr != nil {
		return nil, cerr
	}
	return resp, err
}

func (d *Daemon) resetQuota(user string) (*control.QuotaResetResponse, error) {
	if _, ok := d.userIdx[user]; !ok {
		return nil, &control.NotFoundError{Target: user}
	}
	now := d.clock.Now()
	was := d.usage.Reset(user, now)
	d.log.Info("quota reset", "user", user, "was_bytes", was)
	resp := &control.QuotaResetResponse{User: user, Was: was}
	before := d.quotaExceeded(user)
	d.policyDirty = true
	if err := d.policyStep(now); err != nil {
		d.log.Error("applying the quota reset", "user", user, "err", err)
	}
	resp.Restored = before && !d.quotaExceeded(user)
	d.saveUsage(now)
	return resp, nil
}

// quotaExceeded reports whether the last evaluation has user over quota.
func (d *Daemon) quotaExceeded(user string) bool {
	if d.lastRes == nil {
		return false
	}
	for _, x := range d.lastRes.User(user) {
		if x.Quota != nil && x.Quota.Exceeded {
			return true
		}
	}
	return false
}

// reloadResult records the result of a reload at now: refused with
// problems, or applied with every interface's state (degraded when one is
// neither ok nor missing nor pending).
func (d *Daemon) reloadResult(now time.Time, problems []string) {
	r := &control.ReloadStatus{At: now, Result: control.ReloadOK}
	if problems != nil {
		r.Result, r.Problems = control.ReloadRefused, problems
		d.lastReload = r
		return
	}
	for _, st := range d.ifaces {
		state, msg := st.health()
		r.Interfaces = append(r.Interfaces, control.InterfaceResult{Name: st.cfg.Name,
			Direction: string(st.cfg.Direction), State: state, Error: msg})
		if state != control.StateOK && state != control.StateMissing && state != control.StatePending {
			r.Result = control.ReloadDegraded
		}
	}
	d.lastReload = r
}

// MinCounterAge is the least time between two counter reads for top: more
// frequent requests (several tops at once) get the counters of the last read.
// Status and /metrics read them when they are reconcile_interval old.
const MinCounterAge = 200 * time.Millisecond

// Top implements control.Service: the status with counters read now. Each
// shaped interface is dumped (its classes with their counters; pkg/kernel
// has no request for class counters alone), unless it was read less than
// MinCounterAge ago; throughput is over the time since the previous read.
// During a long apply it is answered between two runs of writes, with the
// counters last read (as Status).
func (d *Daemon) Top(ctx context.Context) (*control.Status, error) {
	var st *control.Status
	if err := d.callRead(ctx, func() {
		if !d.applying {
			d.refreshCounters(d.clock.Now(), MinCounterAge)
		}
		st = d.status()
	}); err != nil {
		return nil, err
	}
	return st, nil
}

// refreshCounters reads the counters of every built, present interface
// whose last read is maxAge old or older. A failed dump is logged at debug
// level and leaves the last counters (the reconcile reports the
// interface's faults).
func (d *Daemon) refreshCounters(now time.Time, maxAge time.Duration) {
	for _, st := range d.ifaces {
		if !st.current() || st.state == stateMissing || now.Sub(st.dumpAt) < maxAge {
			continue
		}
		if !d.readCounters(st, now) {
			d.log.Debug("counters unreadable", "interface", st.key)
		}
	}
}

// scrapeWait bounds how long a /metrics scrape waits for the loop to read
// the counters (it may be applying); then the scrape shows the last ones.
const scrapeWait = 2 * time.Second

// refreshForScrape has the loop read the counters for a /metrics scrape
// when they are reconcile_interval old (refreshCounters). It does nothing
// while the loop does not run.
func (d *Daemon) refreshForScrape() {
	if !d.looping.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeWait)
	defer cancel()
	_ = d.call(ctx, func() { d.refreshCounters(d.clock.Now(), d.plan.Daemon.ReconcileInterval) })
}
