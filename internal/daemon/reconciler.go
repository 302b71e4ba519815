package daemon

import (
	"net/netip"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// state is a managed interface's state as status shows it
// (control.StateOK, ...). A reconciler holds exactly one.
type state string

const (
	// statePending: the kernel is not known to hold the desired tree yet
	// (a new interface, a desired tree that changed, a delta the kernel
	// refused, before the full pass that follows).
	statePending state = control.StatePending
	// stateOK: the kernel held the desired tree at the last apply.
	stateOK state = control.StateOK
	// stateDegraded: the kernel holds the desired tree but for the objects
	// it refused (reconciler.refused); every other user is shaped.
	stateDegraded state = control.StateDegraded
	// stateFailed: the last apply failed, or the desired tree cannot be
	// built (reconciler.err says why).
	stateFailed state = control.StateFailed
	// stateMissing: the interface did not exist at the last look.
	stateMissing state = control.StateMissing
)

// reconciler keeps one managed interface (one [[interface]]) in step with
// its desired tree. It is owned by the daemon's loop: the policy and
// control requests give it new targets (setTargets, or a patch of a few
// classes), and every change reaches the kernel through its one entry
// point, Daemon.apply (reconciler_apply.go), whose one post-apply hook
// (Daemon.afterApply) moves state.
type reconciler struct {
	cfg config.Interface
	// key is "NAME/DIRECTION", the interface's key in state files.
	key string
	// device carries the shaper: the interface (egress) or its IFB.
	device string
	// redirectFrom is the interface whose arrivals are redirected to
	// device (ingress), else "".
	redirectFrom string

	// The desired side: the class ids, and the targets and the tree built
	// from them (want, made on the first setTargets; its IDs are ids).
	ids  *model.Assignment
	want *model.Desired
	// buildErr is the last build failure (the desired tree is then
	// older, and the state failed).
	buildErr error
	// view is the copy of the desired classes the metrics read (see
	// ifaceSnapshot); viewStale: the classes changed other than by a
	// patch of view, so publish copies them again.
	view      classView
	viewStale bool

	// The kernel side: one state, with what it needs.
	state state
	// err is why the state is failed.
	err error
	// refused are the kernel's refusals at the last apply, with the
	// changes skipped because of them (state degraded).
	refused []*kernel.Error
	// foreign describes other tools' objects found by the last dump.
	foreign []string
	// lastFull is when the interface was last dumped, diffed and
	// repaired; see Daemon.tick.
	lastFull time.Time

	// The counters (reconciler_counters.go): the class counters of the
	// last dump (at dumpAt), sorted by handle, each with its throughput
	// since the dump before; rootStats are the root qdisc's (TBF). Only
	// counters are kept of a dump: with 10,000 users whole trees would
	// cost megabytes.
	counters  []classCounters
	rootStats *model.Stats
	dumpAt    time.Time
	// tierSums are the tiers' counters summed from the user classes'
	// changes between dumps (see addTierCounts).
	tierSums map[string]*tierCounts
	// nodeDrops are the drops of the classes behind each node, summed
	// from their changes between dumps (see addNodeDrops).
	nodeDrops map[string]uint64
	// queues is the last policy tick's view of per-queue trees (queues.go).
	queues *queueMeter
	// adoptedSplit is the split of per-queue trees found in the kernel at
	// start (seedRamper): the first targets take it, so that a restart
	// rewrites no queue's or tier's share (keepQueues).
	adoptedSplit *model.MQSplit
}

// built reports whether the desired tree is built from targets.
func (st *reconciler) built() bool { return st.want != nil && st.want.Built() }

// tree is the desired tree (read-only; empty before the first build).
func (st *reconciler) tree() *model.Tree {
	if st.want == nil {
		return &model.Tree{}
	}
	return st.want.Tree()
}

// targets are the targets the desired tree is built from (read-only).
func (st *reconciler) targets() *model.Targets {
	if st.want == nil {
		return &model.Targets{}
	}
	return st.want.Targets()
}

// desired returns st's incremental desired tree, made on first use with
// st's class ids; it watches the classes to keep the metrics' view.
func (st *reconciler) desired() *model.Desired {
	if st.want == nil || st.want.IDs() != st.ids {
		st.want = model.NewDesired(st.ids)
		st.want.Watch(st.classEdits)
	}
	return st.want
}

// classEdits patches the metrics' view of the classes with an
// operation's edits (a wholesale change marks it stale instead).
func (st *reconciler) classEdits(edits []model.ClassEdit) {
	classes := st.want.Tree().Classes
	var patched []int
	flush := func() {
		if len(patched) > 0 {
			st.view = st.view.patched(classes, patched)
			patched = patched[:0]
		}
	}
	for _, e := range edits {
		if e.Reset {
			st.viewStale = true
		}
		if st.viewStale {
			return
		}
		switch e.Op {
		case model.OpChange:
			patched = append(patched, e.Index)
		case model.OpAdd:
			flush()
			st.view = st.view.appended(classes[e.Index])
		case model.OpDelete:
			flush()
			st.view = st.view.removed(e.Index)
		}
	}
	flush()
}

// current reports whether desired is built from the latest targets (no
// build failure since).
func (st *reconciler) current() bool { return st.built() && st.buildErr == nil }

// setState moves st to s; err is the failure (s == stateFailed). A
// desired tree that cannot be built keeps the interface failed whatever
// the kernel holds, unless the interface is missing.
func (st *reconciler) setState(s state, err error) {
	if s == stateOK || s == stateFailed {
		st.refused = nil // kept while pending or missing: refusals are logged when they differ
	}
	if st.buildErr != nil && s != stateMissing && s != stateFailed {
		s, err = stateFailed, st.buildErr
	}
	st.state, st.err = s, err
}

// buildFailed records a failure to build st's desired tree: the
// interface is failed (unless missing) until a build works.
func (st *reconciler) buildFailed(err error) {
	st.buildErr = err
	if st.state != stateMissing {
		st.state, st.err = stateFailed, err
	}
}

// health is the interface's state and error for status.
func (st *reconciler) health() (state, msg string) {
	switch st.state {
	case stateFailed:
		return control.StateFailed, st.err.Error()
	case stateDegraded:
		return control.StateDegraded, refusedSummary(st.refused)
	}
	return string(st.state), ""
}

// newReconciler is the reconciler of interface in, without a tree or
// class ids yet: its key and device (the IFB for ingress, redirected from
// in.Name).
func newReconciler(in config.Interface) *reconciler {
	st := &reconciler{cfg: in, key: ifaceKey(&in), device: in.Name, state: statePending}
	if in.Direction == config.Ingress {
		st.device, st.redirectFrom = in.IFB, in.Name
	}
	return st
}

func ifaceKey(in *config.Interface) string { return in.Name + "/" + string(in.Direction) }

// makeReconcilers makes the state of plan's interfaces, keeping the class
// assignments of old ones with the same key (reload) and otherwise taking
// them from the state file or recovering them from the kernel.
func (d *Daemon) makeReconcilers(plan *config.Plan, old []*reconciler) []*reconciler {
	d.resolveQueues(plan)
	byKey := map[string]*reconciler{}
	for _, st := range old {
		byKey[st.key] = st
	}
	out := make([]*reconciler, 0, len(plan.Interfaces))
	for i := range plan.Interfaces {
		st := newReconciler(plan.Interfaces[i])
		d.setClassifier(st)
		switch o, ok := byKey[st.key]; {
		case ok:
			st.ids = o.ids.Clone()
			st.counters, st.rootStats, st.dumpAt = o.counters, o.rootStats, o.dumpAt
			st.tierSums, st.nodeDrops = o.tierSums, o.nodeDrops
			if o.state == stateMissing || o.state == stateDegraded {
				st.state, st.refused = o.state, o.refused
			}
			st.foreign = o.foreign
		case d.loadedIDs[st.key] != nil:
			st.ids = d.loadedIDs[st.key]
			delete(d.loadedIDs, st.key)
		default:
			st.ids = d.recoverAssignment(plan, st)
		}
		out = append(out, st)
	}
	d.setTakeover(out)
	return out
}

// setTakeover tells the kernel on which devices a foreign root qdisc may
// be replaced: interfaces with takeover = true, or all with --takeover.
func (d *Daemon) setTakeover(ifaces []*reconciler) {
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
func (d *Daemon) recoverAssignment(plan *config.Plan, st *reconciler) (ids *model.Assignment) {
	if st.cfg.Shaper == config.ShaperTBF {
		return model.NewAssignment()
	}

	actual, err := d.safeDump(st)
	if err != nil || actual.Root == nil {
		return model.NewAssignment()
	}
	users := make(map[string][]netip.Prefix, len(plan.Users))
	tiers := make(map[string]string, len(plan.Users))
	nodes := make(map[string]string, len(plan.Users))
	for _, u := range plan.Users {
		users[u.Name] = u.Prefixes
		tiers[u.Name] = u.Tier
		if u.Node != "" {
			nodes[u.Name] = u.Node
		}
	}
	parents := make(map[string]string, len(plan.Nodes))
	for _, n := range plan.Nodes {
		parents[n.Name] = n.Parent
	}
	ids = model.AssignmentFromTree(actual, users)
	ids.RecoverTiers(actual, tiers)
	ids.RecoverNodes(actual, nodes, parents)
	d.log.Info("recovered class assignment from the kernel", "interface", st.key,
		"users", len(ids.Users()), "tiers", len(ids.Tiers()), "nodes", len(ids.Nodes()))
	return ids
}

// setTargets builds the desired tree of st from tg and reports whether it
// differs from the one before (for the kernel: labels and bursts that do
// not change buffers do not count), with the changes from it.
func (d *Daemon) setTargets(st *reconciler, tg model.Targets) (bool, []model.Change) {
	keepQueues(st, &tg)
	failed := st.buildErr != nil
	wasBuilt := st.built()
	step, err := st.desired().Set(tg)
	if err != nil {
		if st.buildErr == nil || st.buildErr.Error() != err.Error() {
			d.log.Error("cannot build the interface's tree; keeping the previous one", "interface", st.key, "err", err)
			d.stats.errors.WithLabelValues("build").Inc()
		}
		st.buildFailed(err)
		return false, nil
	}
	// A tree built again after a failure goes to the kernel even when it
	// equals the old one: the kernel's state is not known then.
	changed := !wasBuilt || failed || len(step.Changes) > 0
	st.buildErr = nil
	if changed && st.state == stateOK {
		st.setState(statePending, nil)
	}
	return changed, step.Changes
}

// retarget builds st's desired tree from tg and, when it changed, brings
// it to the kernel: the diff of the old and new desired trees without a
// dump when the kernel held the old one, else a full pass.
func (d *Daemon) retarget(st *reconciler, tg model.Targets, why string) error {
	synced := st.state == stateOK && st.built()
	device := st.tree().Device
	changed, delta := d.setTargets(st, tg)
	if !changed {
		return nil
	}
	synced = synced && device == st.tree().Device
	if !synced {
		delta = nil
	}
	return d.apply(st, deltaPass(why, delta, synced))
}
