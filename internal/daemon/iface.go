package daemon

import (
	"net/netip"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
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

	// actual is the last dump (with counters) at dumpAt; prevBytes holds
	// the class byte counters of the dump before, at prevAt.
	actual     model.Tree
	dumpAt     time.Time
	prevBytes  map[model.Handle]uint64
	prevAt     time.Time
	throughput map[model.Handle]tbf.Rate
	// classSnap is the metrics' copy of the classes; nil when stale.
	classSnap *[]classSample
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
		in := plan.Interfaces[i]
		st := &iface{cfg: in, key: ifaceKey(&in), device: in.Name}
		if in.Direction == config.Ingress {
			st.device, st.redirectFrom = in.IFB, in.Name
		}
		switch o, ok := byKey[st.key]; {
		case ok:
			st.ids = o.ids.Clone()
			st.actual, st.dumpAt, st.prevBytes, st.prevAt, st.throughput = o.actual, o.dumpAt, o.prevBytes, o.prevAt, o.throughput
			st.missing = o.missing
		case d.assignState[st.key] != nil:
			st.ids = d.assignState[st.key].Clone()
		default:
			st.ids = d.recoverAssignment(plan, st)
		}
		out = append(out, st)
	}
	return out
}

// recoverAssignment rebuilds an interface's class assignment from the
// kernel when the state file has none, so that a restart without state
// keeps every user's class (and its counters).
func (d *Daemon) recoverAssignment(plan *config.Plan, st *iface) *model.Assignment {
	if st.cfg.Shaper == config.ShaperTBF {
		return model.NewAssignment()
	}
	actual, err := d.k.Dump(st.device)
	if err != nil || actual.Root == nil {
		return model.NewAssignment()
	}
	users := make(map[string][]netip.Prefix, len(plan.Users))
	tiers := make(map[string]string, len(plan.Users))
	for _, u := range plan.Users {
		users[u.Name] = u.Prefixes
		tiers[u.Name] = u.Tier
	}
	ids := model.AssignmentFromTree(actual, users)
	ids.RecoverTiers(actual, tiers)
	d.log.Info("recovered class assignment from the kernel", "interface", st.key,
		"users", len(ids.Users()), "tiers", len(ids.Tiers()))
	return ids
}

// setTargets builds the desired tree of st from tg and reports whether it
// differs from the one before (for the kernel: labels and bursts that do
// not change buffers do not count).
func (d *Daemon) setTargets(st *iface, tg model.Targets) bool {
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
		st.classSnap = nil
	}
	return changed
}

// sample records a dump's counters: throughput per class from the byte
// counter's change since the previous dump, and quota usage per user.
func (d *Daemon) sample(st *iface, actual model.Tree, now time.Time) {
	if len(st.actual.Classes) > 0 && now.After(st.dumpAt) {
		prev := make(map[model.Handle]uint64, len(st.actual.Classes))
		for _, c := range st.actual.Classes {
			if c.Stats != nil {
				prev[c.Handle] = c.Stats.Bytes
			}
		}
		st.prevBytes, st.prevAt = prev, st.dumpAt
	}
	st.actual, st.dumpAt = actual, now
	st.classSnap = nil
	dt := now.Sub(st.prevAt)
	st.throughput = make(map[model.Handle]tbf.Rate, len(actual.Classes))
	for _, c := range actual.Classes {
		if c.Stats == nil {
			continue
		}
		if p, ok := st.prevBytes[c.Handle]; ok && dt > 0 && c.Stats.Bytes >= p {
			st.throughput[c.Handle] = bitsPerSecond(c.Stats.Bytes-p, dt)
		}
		if u, ok := st.ids.UserByMinor(c.Handle.Minor()); ok && c.Handle.Minor() >= model.FirstUserMinor {
			d.usage.Observe(u, counterKey(st, c.Handle), c.Stats.Bytes, now)
		}
	}
	d.publish()
}

// counterKey names class h of st for policy.Usage.
func counterKey(st *iface, h model.Handle) string {
	return policy.CounterKey(st.cfg.Name, st.cfg.Direction, h.String())
}
