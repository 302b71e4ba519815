package daemon

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// iface is the loop's state of one managed interface (one [[interface]]).
type iface struct {
	cfg config.Interface
	// key is "NAME/DIRECTION", the interface's key in state files.
	key string
	// device carries the shaper: the interface (egress) or its IFB.
	device string
	// redirectFrom is the interface whose arrivals are redirected to
	// device (ingress), else "".
	redirectFrom string

	ids     *model.Assignment
	targets model.Targets
	desired model.Tree
	// built is set once desired holds a tree built from targets.
	built bool
	// buildErr is the last model.Build failure (desired is then older).
	buildErr error
	// byHandle indexes desired.Classes.
	byHandle map[model.Handle]int

	// missing: the interface did not exist at the last look.
	missing bool
	// inSync: the kernel held desired at the last reconcile; a later diff
	// that is not empty is drift (unless desired changed meanwhile).
	inSync bool
	// lastErr is the last reconcile failure (nil after a success).
	lastErr error
	// refused are the kernel's refusals at the last apply, with the
	// changes skipped because of them; while there are any (and no
	// failure) the interface is degraded.
	refused []*kernel.Error
	// foreign describes other tools' objects found by the last dump.
	foreign []string

	// counters are the class counters of the last dump (at dumpAt),
	// sorted by handle, each with its throughput since the dump before;
	// rootStats are the root qdisc's (TBF). Only counters are kept of a
	// dump: with 10,000 users whole trees would cost megabytes.
	counters  []classCounters
	rootStats *model.Stats
	dumpAt    time.Time
	// tierSums are the tiers' counters summed from the user classes'
	// changes between dumps (see addTierCounts).
	tierSums map[string]*tierCounts
	// lastFull is when the interface was last reconciled (dumped, diffed,
	// repaired); see Daemon.tick.
	lastFull time.Time
}

// health is the interface's state for status: the last failure first,
// then whether it is missing or in sync.
func (st *iface) health() (state, msg string) {
	switch {
	case st.lastErr != nil:
		return control.StateFailed, st.lastErr.Error()
	case st.buildErr != nil:
		return control.StateFailed, st.buildErr.Error()
	case st.missing:
		return control.StateMissing, ""
	case len(st.refused) > 0:
		return control.StateDegraded, refusedSummary(st.refused)
	case st.inSync:
		return control.StateOK, ""
	}
	return control.StatePending, ""
}

// newIface is the state of interface in, without a tree or class ids yet:
// its key and device (the IFB for ingress, redirected from in.Name).
func newIface(in config.Interface) *iface {
	st := &iface{cfg: in, key: ifaceKey(&in), device: in.Name}
	if in.Direction == config.Ingress {
		st.device, st.redirectFrom = in.IFB, in.Name
	}
	return st
}

func ifaceKey(in *config.Interface) string { return in.Name + "/" + string(in.Direction) }

// makeIfaces makes the state of plan's interfaces, keeping the class
// assignments of old ones with the same key (reload) and otherwise taking
// them from the state file or recovering them from the kernel.
func (d *Daemon) makeIfaces(plan *config.Plan, old []*iface) []*iface {
	byKey := map[string]*iface{}
	for _, st := range old {
		byKey[st.key] = st
	}
	out := make([]*iface, 0, len(plan.Interfaces))
	for i := range plan.Interfaces {
		st := newIface(plan.Interfaces[i])
		switch o, ok := byKey[st.key]; {
		case ok:
			st.ids = o.ids.Clone()
			st.counters, st.rootStats, st.dumpAt = o.counters, o.rootStats, o.dumpAt
			st.tierSums = o.tierSums
			st.missing = o.missing
			st.refused, st.foreign = o.refused, o.foreign
		case d.loadedIDs[st.key] != nil:
			st.ids = d.loadedIDs[st.key]
			delete(d.loadedIDs, st.key)
		default:
			st.ids = d.recoverAssignment(plan, st)
		}
		out = append(out, st)
	}
	d.setTakeover(out)
	d.setClassifiers(out)
	return out
}

// setTakeover tells the kernel on which devices a foreign root qdisc may
// be replaced: interfaces with takeover = true, or all with --takeover.
func (d *Daemon) setTakeover(ifaces []*iface) {
	tk, ok := d.k.(interface {
		SetTakeover(device string, allow bool)
	})
	if !ok {
		return
	}
	for _, st := range ifaces {
		tk.SetTakeover(st.device, d.opts.Takeover || st.cfg.Takeover)
	}
}

// recoverAssignment rebuilds an interface's class assignment from the
// kernel when the state file has none, so that a restart without state
// keeps every user's class (and its counters).
func (d *Daemon) recoverAssignment(plan *config.Plan, st *iface) (ids *model.Assignment) {
	if st.cfg.Shaper == config.ShaperTBF {
		return model.NewAssignment()
	}

	actual, err := d.safeDump(st)
	if err != nil || actual.Root == nil {
		return model.NewAssignment()
	}
	users := make(map[string][]netip.Prefix, len(plan.Users))
	tiers := make(map[string]string, len(plan.Users))
	for _, u := range plan.Users {
		users[u.Name] = u.Prefixes
		tiers[u.Name] = u.Tier
	}
	ids = model.AssignmentFromTree(actual, users)
	ids.RecoverTiers(actual, tiers)
	d.log.Info("recovered class assignment from the kernel", "interface", st.key,
		"users", len(ids.Users()), "tiers", len(ids.Tiers()))
	return ids
}

// setTargets builds the desired tree of st from tg and reports whether it
// differs from the one before (for the kernel: labels and bursts that do
// not change buffers do not count).
func (d *Daemon) setTargets(st *iface, tg model.Targets) bool {
	if st.built && st.buildErr == nil && targetsEqual(&st.targets, &tg) {
		return false
	}
	tree, err := model.Build(tg, st.ids)
	if err != nil {
		if st.buildErr == nil || st.buildErr.Error() != err.Error() {
			d.log.Error("cannot build the interface's tree; keeping the previous one", "interface", st.key, "err", err)
			d.stats.errors.WithLabelValues("build").Inc()
		}
		st.buildErr = err
		return false
	}
	st.buildErr = nil
	st.targets = tg
	changed := !st.built || !model.Equal(st.desired, tree)
	st.desired, st.built = tree, true
	st.byHandle = make(map[model.Handle]int, len(tree.Classes))
	for i, c := range tree.Classes {
		st.byHandle[c.Handle] = i
	}
	if changed {
		st.inSync = false
	}
	return changed
}

// classCounters are one class's counters in a dump and its throughput
// (bits/s) since the dump before.
type classCounters struct {
	handle     model.Handle
	stats      model.Stats
	throughput tbf.Rate
}

// sample records a dump's counters: throughput per class from the byte
// counter's change since the previous dump, and quota usage per user.
func (d *Daemon) sample(st *iface, actual model.Tree, now time.Time) {
	dt := now.Sub(st.dumpAt)
	prev := st.counters
	next := make([]classCounters, 0, len(actual.Classes))
	j := 0
	for _, c := range actual.Classes {
		if c.Stats == nil {
			continue
		}
		cc := classCounters{handle: c.Handle, stats: *c.Stats}
		for j < len(prev) && prev[j].handle < c.Handle {
			j++
		}
		if j < len(prev) && prev[j].handle == c.Handle && dt > 0 && c.Stats.Bytes >= prev[j].stats.Bytes {
			cc.throughput = bitsPerSecond(c.Stats.Bytes-prev[j].stats.Bytes, dt)
		}
		if j < len(prev) && prev[j].handle == c.Handle {
			st.addTierCounts(c.Handle, *c.Stats, &prev[j].stats)
		}
		if d.quotas && c.Handle.Minor() >= model.FirstUserMinor &&
			(j >= len(prev) || prev[j].handle != c.Handle || prev[j].stats.Bytes != c.Stats.Bytes) {
			d.policyDirty = true // quota usage may have moved across a limit
		}
		next = append(next, cc)
		if m := c.Handle.Minor(); m >= model.FirstUserMinor {
			if u, ok := st.ids.UserByMinor(m); ok {
				d.usage.Observe(u, counterKey(st, c.Handle), c.Stats.Bytes, now)
			}
		}
	}
	st.counters, st.dumpAt, st.rootStats = next, now, nil
	if actual.Root != nil && actual.Root.Stats != nil {
		s := *actual.Root.Stats
		st.rootStats = &s
	}
	d.publish()
}

// counter returns the counters of class h in the last dump.
func (st *iface) counter(h model.Handle) (classCounters, bool) {
	i, ok := slices.BinarySearchFunc(st.counters, h, func(c classCounters, h model.Handle) int { return cmp.Compare(c.handle, h) })
	if !ok {
		return classCounters{}, false
	}
	return st.counters[i], true
}

// counterKey names class h of st for policy.Usage.
func counterKey(st *iface, h model.Handle) string {
	return policy.CounterKey(st.cfg.Name, st.cfg.Direction, h.String())
}
