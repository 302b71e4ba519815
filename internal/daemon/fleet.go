package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/fleet/fleetd"
	"github.com/shaperd/shaperd/internal/statefile"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
)

// FleetCacheFile is the last shared plan and fleet overrides applied, in
// state_dir, so that a restart without etcd shapes as before
// (fleet.CacheFile, holding a fleet.Cache).
const FleetCacheFile = fleet.CacheFile

// fleetState is the daemon's part of fleet mode ([fleet] set). Fields
// other than connected and the atomics are owned by the loop.
type fleetState struct {
	client *clientv3.Client
	agent  *fleetd.Agent
	// shared is the shared plan in force; nil: the local file's own
	// policy, tiers and users are (no plan was ever received).
	shared *fleet.Plan
	// overrides are the fleet overrides in force (checked against the
	// plan); problems are fleet overrides that cannot apply.
	overrides policy.Overrides
	all       []policy.Override
	problems  []string
	// refused is the newest revision refused, errs why; 0 when none.
	// refusedPlan is that plan, tried again at the next reload.
	refused     int64
	errs        []string
	refusedPlan *fleet.Plan
	// lastReport is the last registration handed to the agent.
	lastReport string
	// reported is each quota user's own usage last handed to the agent,
	// lastUsage when.
	reported  map[string]policy.RemoteUsage
	lastUsage time.Time

	connected atomic.Bool
	revision  atomic.Int64
	refusedA  atomic.Int64
}

// initialShared finds the shared plan to start with when the main file
// has [fleet]: the current one in etcd when etcd answers within
// fleet.dial_timeout, else the cached one, else none (the local file's
// plan). It returns the plan loaded with it.
func (d *Daemon) initialShared(path string) (*config.Plan, error) {
	stateDir, hasFleet := fleet.PeekLocal(path)
	if !hasFleet {
		return loadPlan(path, nil)
	}
	f, ferr := config.LoadFleet(path)
	if ferr != nil {
		return loadPlan(path, nil) // reports [fleet]'s errors with the rest
	}
	var cands []*fleet.Plan
	var cached fleet.Cache
	if b, err := readFileIfExists(filepath.Join(stateDir, FleetCacheFile)); err == nil && b != nil {
		if err := json.Unmarshal(b, &cached); err != nil {
			d.log.Warn("fleet: the cached shared plan is unreadable; ignoring it", "file", filepath.Join(stateDir, FleetCacheFile), "err", err)
			cached = fleet.Cache{}
		}
	}
	if f != nil {
		c, err := fleetd.Dial(f)
		if err != nil {
			d.log.Error("fleet: cannot set up the etcd client; shaping with the cached or local plan", "err", err)
		} else {
			d.fleet = &fleetState{client: c}
			ctx, cancel := context.WithTimeout(context.Background(), f.DialTimeout)
			p, err := fleet.Pull(ctx, fleetd.KV(c), f.Prefix)
			cancel()
			if err != nil {
				d.log.Warn("fleet: etcd unreachable at start; shaping with the cached plan", "err", err)
			} else if p != nil {
				cands = append(cands, p)
			}
		}
	}
	if cached.Plan != nil {
		cands = append(cands, cached.Plan)
	}
	for _, p := range cands {
		plan, err := loadPlan(path, p.SharedFor())
		if err == nil {
			if d.fleet == nil {
				d.fleet = &fleetState{}
			}
			d.fleet.shared = p
			d.fleet.revision.Store(p.Revision)
			for _, o := range cached.Overrides {
				if policy.CheckOverride(plan, o) == nil {
					_ = d.fleet.overrides.Set(o)
				}
			}
			d.fleet.all = cached.Overrides
			d.log.Info("fleet: starting with the shared plan", "revision", p.Revision)
			return plan, nil
		}
		d.log.Error("fleet: shared plan refused at start", "revision", p.Revision, "err", err)
		if d.fleet != nil {
			d.fleet.refused, d.fleet.errs, d.fleet.refusedPlan = p.Revision, problemsOf(err), p
		}
	}
	if d.fleet == nil {
		d.fleet = &fleetState{}
	}
	d.log.Warn("fleet: no shared plan yet; shaping with the local file's policy, tiers and users")
	return loadPlan(path, nil)
}

// problemsOf returns a load error's lines.
func problemsOf(err error) []string {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.Problems
	}
	return []string{err.Error()}
}

// sharedOf is the documents of p for LoadShared; nil for no plan.
func sharedOf(p *fleet.Plan) *config.Shared {
	if p == nil {
		return nil
	}
	return p.SharedFor()
}

// startFleet starts the fleet agent (with [fleet]); the channel closes
// when it has stopped after ctx ended.
func (d *Daemon) startFleet(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if d.fleet == nil || d.fleet.client == nil || d.plan.Fleet == nil {
		close(done)
		return done
	}
	f := d.plan.Fleet
	d.fleet.agent = fleetd.NewAgent(d.fleet.client, f.Prefix, f.Router, fleetHandler{d}, d.log.With("component", "fleet"))
	go func() {
		defer close(done)
		d.fleet.agent.Run(ctx)
	}()
	return done
}

// fleetHandler hands the agent's news to the loop.
type fleetHandler struct{ d *Daemon }

func (h fleetHandler) do(fn func()) {
	select {
	case h.d.reqs <- fn:
	case <-h.d.stopped:
	}
}

func (h fleetHandler) FleetPlan(p *fleet.Plan) { h.do(func() { h.d.applyShared(p) }) }
func (h fleetHandler) FleetOverrides(o []policy.Override, problems []string) {
	h.do(func() { h.d.applyFleetOverrides(o, problems) })
}
func (h fleetHandler) FleetUsage(remote map[string][]policy.RemoteUsage) {
	h.do(func() { h.d.applyFleetUsage(remote) })
}
func (h fleetHandler) FleetQuotaReset(resets map[string]fleet.QuotaReset) {
	h.do(func() { h.d.applyFleetQuotaReset(resets) })
}
func (h fleetHandler) FleetConnected(up bool) {
	h.d.fleet.connected.Store(up)
	h.do(func() { h.d.fleetReport() })
}

// applyShared brings shared plan revision p in force like a reload: it
// is validated and built first; a plan that fails stays out, the old one
// stays in force, and the refusal is logged and registered.
func (d *Daemon) applyShared(p *fleet.Plan) {
	fst := d.fleet
	if fst.shared != nil && fst.shared.Revision == p.Revision || fst.refused == p.Revision {
		return
	}
	start := d.clock.Now()
	// A shared plan is pushed on purpose (shaperctl fleet push): it may
	// remove users without a confirmation here.
	if err := d.reloadWith(p, true); err != nil {
		fst.refused, fst.errs, fst.refusedPlan = p.Revision, problemsOf(err), p
		fst.refusedA.Store(p.Revision)
		d.log.Error("fleet: shared plan refused; the old one stays in force", "revision", p.Revision, "err", err)
		d.fleetReport()
		return
	}
	fst.refused, fst.errs, fst.refusedPlan = 0, nil, nil
	fst.refusedA.Store(0)
	d.log.Info("fleet: shared plan applied", "revision", p.Revision, "took", d.clock.Now().Sub(start))
	// Fleet overrides of targets the new plan lacks drop out.
	d.applyFleetOverrides(fst.all, nil)
	d.saveFleetCache()
	d.fleetReport()
}

// applyFleetOverrides puts the fleet overrides o in force: those the plan
// cannot apply are left out and reported.
func (d *Daemon) applyFleetOverrides(o []policy.Override, problems []string) {
	fst := d.fleet
	var ov policy.Overrides
	now := d.clock.Now()
	for _, x := range o {
		// As a local set-rate is checked: the target exists here and
		// every tree still builds with it. Routers of one fleet have links
		// of different sizes: an interface override above this router's
		// bandwidth is capped to it by the policy (a local set-rate above
		// it is refused),
		// and a user's, tier's or node's ceil above it is capped by the
		// policy as a configured one is.
		err := policy.CheckOverrideBuild(d.plan, d.evalOverridesWith(ov), x, now)
		if err != nil {
			problems = append(problems, fmt.Sprintf("fleet override %s: %v", x.Key(), err))
			continue
		}
		if err := ov.Set(x); err != nil {
			problems = append(problems, fmt.Sprintf("fleet override %s: %v", x.Key(), err))
		}
	}
	same := slices.EqualFunc(ov.List(), fst.overrides.List(), func(a, b policy.Override) bool {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		return string(ja) == string(jb)
	})
	fst.all, fst.problems = o, problems
	if len(problems) > 0 {
		d.log.Warn("fleet: overrides that cannot apply here", "problems", strings.Join(problems, "; "))
	}
	if !same {
		fst.overrides = ov
		d.log.Info("fleet: overrides changed", "in_force", ov.Len())
		d.afterReconcile(d.policyStep(d.clock.Now()))
		d.saveFleetCache()
	}
	d.fleetReport()
}

// evalOverrides is what the policy evaluates: the fleet overrides with
// the local ones on top (a local override wins over a fleet one of the
// same target and direction on this router).
func (d *Daemon) evalOverrides(local policy.Overrides) policy.Overrides {
	if d.fleet == nil || d.fleet.overrides.Len() == 0 {
		return local
	}
	ov := d.fleet.overrides.Clone()
	for _, o := range local.List() {
		_ = ov.Set(o)
	}
	return ov
}

// evalOverridesWith is evalOverrides with fleet overrides fleetOv instead
// of those in force.
func (d *Daemon) evalOverridesWith(fleetOv policy.Overrides) policy.Overrides {
	ov := fleetOv.Clone()
	for _, o := range d.overrides.List() {
		_ = ov.Set(o)
	}
	return ov
}

// saveFleetCache writes FleetCacheFile; a failure is logged (the plan is
// in force, only a restart without etcd would miss it).
func (d *Daemon) saveFleetCache() {
	fst := d.fleet
	if fst.shared == nil {
		return
	}
	b, err := json.Marshal(fleet.Cache{Plan: fst.shared, Overrides: fst.all})
	if err == nil {
		err = statefile.WriteAtomic(filepath.Join(d.plan.Daemon.StateDir, FleetCacheFile), b, 0o640)
	}
	if err != nil {
		d.stats.errors.WithLabelValues("state").Inc()
		d.log.Error("fleet: cannot cache the shared plan", "err", err)
	}
}

// fleetReport hands the router's registration to the agent when it
// changed.
func (d *Daemon) fleetReport() {
	fst := d.fleet
	if fst == nil || fst.agent == nil {
		return
	}
	r := fleet.Registration{Version: d.opts.Version, Refused: fst.refused, Health: "ok"}
	if fst.shared != nil {
		r.Revision = fst.shared.Revision
	}
	r.Errors = append(slices.Clone(fst.errs), fst.problems...)
	var bad []string
	for _, st := range d.ifaces {
		if state, _ := st.health(); state != control.StateOK && state != control.StatePending {
			bad = append(bad, st.key+" "+state)
		}
	}
	if len(bad) > 0 {
		r.Health = "not ok: " + strings.Join(bad, ", ")
	}
	b, _ := json.Marshal(r)
	if string(b) == fst.lastReport {
		return
	}
	fst.lastReport = string(b)
	fst.agent.Report(r)
}

// fleetStatus is the fleet part of status; nil without [fleet].
func (d *Daemon) fleetStatus() *control.FleetStatus {
	fst := d.fleet
	if fst == nil {
		return nil
	}
	s := &control.FleetStatus{Connected: fst.connected.Load(), Refused: fst.refused, Errors: append(slices.Clone(fst.errs), fst.problems...),
		Overrides: fst.overrides.Len()}
	if d.plan.Fleet != nil {
		s.Router, s.Prefix = d.plan.Fleet.Router, d.plan.Fleet.Prefix
	}
	if fst.shared != nil {
		s.Revision = fst.shared.Revision
		if !fst.shared.Meta.PushedAt.IsZero() {
			t := fst.shared.Meta.PushedAt
			s.PushedAt = &t
		}
	}
	return s
}

// fleetCollector is shaperd_fleet_connected and shaperd_fleet_revision
// (only with [fleet]).
type fleetCollector struct{ d *Daemon }

var (
	fleetConnectedDesc = prometheus.NewDesc("shaperd_fleet_connected", "1 while the link to the fleet's etcd is up, 0 while it is down (shaping goes on with the last plan).", nil, nil)
	fleetRevisionDesc  = prometheus.NewDesc("shaperd_fleet_revision", "The shared plan revision in force (0: the local file's plan).", nil, nil)
	fleetRefusedDesc   = prometheus.NewDesc("shaperd_fleet_refused_revision", "The newest shared plan revision refused as invalid (0: none).", nil, nil)
)

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- fleetConnectedDesc
	ch <- fleetRevisionDesc
	ch <- fleetRefusedDesc
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	fst := c.d.fleet
	if fst == nil {
		return
	}
	up := 0.0
	if fst.connected.Load() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(fleetConnectedDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(fleetRevisionDesc, prometheus.GaugeValue, float64(fst.revision.Load()))
	ch <- prometheus.MustNewConstMetric(fleetRefusedDesc, prometheus.GaugeValue, float64(fst.refusedA.Load()))
}

// closeFleet closes the etcd client.
func (d *Daemon) closeFleet() {
	if d.fleet != nil && d.fleet.client != nil {
		_ = d.fleet.client.Close()
		d.fleet.client = nil
	}
}

// readFileIfExists reads path; nil, nil when it does not exist.
func readFileIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// UsageReportEvery is how often a router reports its own quota usage to
// the fleet's ledger (only users whose count changed).
const UsageReportEvery = time.Second

// applyFleetUsage takes the other routers' usage of some users and, when
// some tier has a quota, evaluates the policy at once with the fleet-wide
// sums: a user whose total passed the quota on another router goes over
// quota here without waiting for the next policy tick.
func (d *Daemon) applyFleetUsage(remote map[string][]policy.RemoteUsage) {
	for user, rs := range remote {
		d.usage.SetRemote(user, rs)
	}
	if !d.quotas {
		return
	}
	d.policyDirty = true
	if d.ready {
		if err := d.policyTick(d.clock.Now()); err != nil {
			d.afterReconcile(err)
		}
	}
}

// applyFleetQuotaReset applies the fleet-wide quota resets (`shaperctl
// quota reset USER --fleet`) not applied yet: each user's count here
// becomes zero as a local reset makes it, a user over quota gets the plan
// back at once, and the usage is saved (so that a restart does not apply
// a reset twice) and reported to the fleet from zero.
func (d *Daemon) applyFleetQuotaReset(resets map[string]fleet.QuotaReset) {
	now := d.clock.Now()
	var applied bool
	for _, user := range slices.Sorted(maps.Keys(resets)) {
		r := resets[user]
		was, ok := d.usage.ResetFleet(user, r.At, now)
		if !ok {
			continue
		}
		applied = true
		d.log.Info("fleet quota reset", "user", user, "was_bytes", was, "reset_at", r.At, "by", r.By)
	}
	if !applied {
		return
	}
	d.policyDirty = true
	if d.ready {
		if err := d.policyTick(now); err != nil {
			d.afterReconcile(err)
		}
	}
	d.saveUsage(now)
	if d.fleet != nil {
		d.fleet.lastUsage = time.Time{} // report the new counts now
	}
}

// reportFleetUsage hands the agent this router's own usage of every user
// of a tier with a quota whose count changed, at most every
// UsageReportEvery.
func (d *Daemon) reportFleetUsage(now time.Time) {
	fst := d.fleet
	if fst == nil || fst.agent == nil || !d.quotas || !due(fst.lastUsage, now, UsageReportEvery) {
		return
	}
	fst.lastUsage = now
	if fst.reported == nil {
		fst.reported = map[string]policy.RemoteUsage{}
	}
	out := map[string]policy.RemoteUsage{}
	for _, u := range d.plan.Users {
		t, ok := d.plan.Tier(u.Tier)
		if !ok || t.Quota == 0 {
			continue
		}
		own, start, _ := d.usage.Own(u.Name, t.QuotaPeriod, now)
		r := policy.RemoteUsage{Start: start, Bytes: own}
		if last, ok := fst.reported[u.Name]; ok && last.Bytes == r.Bytes && last.Start.Equal(r.Start) {
			continue
		}
		fst.reported[u.Name] = r
		out[u.Name] = r
	}
	fst.agent.ReportUsage(out)
}
