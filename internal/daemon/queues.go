package daemon

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Per-queue trees (interface.queues > 1): resolving queues = "auto",
// checking the device, and rebalancing the queues' shares every policy
// tick (model.RebalanceQueues).

// queueKernel is what per-queue trees need of the kernel beyond Kernel;
// *kernel.Kernel has it.
type queueKernel interface {
	TxQueues(device string) (int, error)
	QueueCounters(device string) ([]model.Qdisc, error)
	ClassCounters(device string, handles []model.Handle) ([]model.Class, error)
}

// queueMeter is what the last policy tick saw of an interface's queues:
// each queue's bytes sent, and each tier's (with an aggregate class) and
// each split node's (model.SplitNodes) in each queue.
type queueMeter struct {
	at    time.Time
	bytes []uint64
	tiers map[string][]uint64
	nodes map[string][]uint64
}

// resolveQueues turns queues = "auto" in plan into the device's transmit
// queue count (for uploads the IFB's, or, when shaperd is to create the
// IFB, the interface's; 1 when the kernel cannot tell, e.g. the device is
// missing, logged) so the policy builds that many trees.
func (d *Daemon) resolveQueues(plan *config.Plan) {
	qk, ok := d.k.(queueKernel)
	for i := range plan.Interfaces {
		in := &plan.Interfaces[i]
		if in.Queues != config.QueuesAuto {
			continue
		}
		dev := in.Name
		if in.Direction == config.Ingress {
			dev = in.IFB
		}
		n, err := 0, errors.New("the kernel connection cannot count queues")
		if ok {
			n, err = qk.TxQueues(dev)
			if errors.Is(err, kernel.ErrNoDevice) && in.Direction == config.Ingress {
				// shaperd creates the IFB, with one queue per tree: as many
				// as the interface whose arrivals it shapes has.
				dev = in.Name
				n, err = qk.TxQueues(dev)
			}
		}
		if err != nil || n < 1 {
			d.log.Warn("queues = \"auto\": cannot count the device's transmit queues; using one tree", "interface", in.Name, "device", dev, "err", err)
			n = 1
		}
		in.Queues = min(n, model.MaxQueues)
		d.log.Info("queues = \"auto\"", "interface", in.Name, "device", dev, "queues", in.Queues)
	}
}

// rebalanceQueues gives every interface with per-queue trees its queues'
// shares and its tiers' shares in each queue for the next tick
// (model.RebalanceMQ), from what each queue and each tier's class in it
// sent since the last one, and brings a changed split to the kernel.
func (d *Daemon) rebalanceQueues(now time.Time) error {
	qk, ok := d.k.(queueKernel)
	if !ok {
		return nil
	}
	var errs []error
	for _, st := range d.ifaces {
		n := st.targets().Interface.Queues
		if n <= 1 || !st.built() || st.buildErr != nil {
			continue
		}
		m, err := readQueueMeter(qk, st, now)
		if err != nil {
			continue // the next reconcile repairs (or reports) the trees
		}
		prev := st.queues
		st.queues = m
		dt := now.Sub(prev.atOr(now)).Seconds()
		if prev == nil || len(prev.bytes) != n || dt <= 0 {
			continue
		}
		tg := st.targets()
		used := model.MQRates{Queues: usedSince(prev.bytes, m.bytes, dt),
			Tiers: usedEach(prev.tiers, m.tiers, n, dt), Nodes: usedEach(prev.nodes, m.nodes, n, dt)}
		next := model.RebalanceMQ(tg.Interface.Bandwidth, tg.Tiers, splitNodeTargets(*tg), model.MQSplit{Queues: tg.Queues, Tiers: tg.TierQueues, Nodes: tg.NodeQueues}, used, model.QueueFloors(st.tree()))
		if slices.Equal(next.Queues, tg.Queues) && maps.EqualFunc(next.Tiers, tg.TierQueues, slices.Equal) &&
			maps.EqualFunc(next.Nodes, tg.NodeQueues, slices.Equal) {
			continue
		}
		if err := d.patchSplit(st, next); err != nil {
			errs = append(errs, fmt.Errorf("interface %s: queues: %w", st.key, err))
		}
	}
	return errors.Join(errs...)
}

// patchSplit gives st's per-queue trees the split next: only the classes
// it sets (each queue's root class and each tier's class in it) change
// (model.Desired.SetSplit): no Build or Diff of the whole tree (at 100,000
// users ~170 ms), only the floors' pass over the classes
// (model.QueueFloors). A tree without those classes is built again.
func (d *Daemon) patchSplit(st *reconciler, next model.MQSplit) error {
	synced := st.state == stateOK
	step, err := st.desired().SetSplit(next)
	if err != nil {
		st.buildFailed(err)
		d.stats.errors.WithLabelValues("build").Inc()
		return err
	}
	if len(step.Changes) == 0 {
		return nil
	}
	if step.Rebuilt && st.state == stateOK {
		st.setState(statePending, nil)
	}
	return d.apply(st, deltaPass("queues", step.Changes, synced))
}

// readQueueMeter reads the byte counters of st's queues (their qdiscs) and
// of each tier's and each split node's class in each queue's tree. A tier
// or node whose class is missing in some queue is left out (it is not
// rebalanced this tick).
func readQueueMeter(qk queueKernel, st *reconciler, now time.Time) (*queueMeter, error) {
	n := st.targets().Interface.Queues
	qs, err := qk.QueueCounters(st.tree().Device)
	if err != nil || len(qs) != n {
		return nil, fmt.Errorf("queue counters: %d of %d queues: %w", len(qs), n, err)
	}
	m := &queueMeter{at: now, bytes: make([]uint64, n), tiers: map[string][]uint64{}, nodes: map[string][]uint64{}}
	for q, qd := range qs {
		if qd.Stats != nil {
			m.bytes[q] = qd.Stats.Bytes
		}
	}
	big := splitNodeTargets(*st.targets())
	if len(st.targets().Tiers) == 0 && len(big) == 0 {
		return m, nil
	}
	// Where each class counted goes: a tier's or a node's counters, and
	// its queue.
	type place struct {
		node bool
		name string
		q    int
	}
	handles := make([]model.Handle, 0, n*(len(st.targets().Tiers)+len(big)))
	where := map[model.Handle]place{}
	for q := 0; q < n; q++ {
		ids, major := st.ids.QueueIDs(q), model.QueueHandle(q).Major()
		for _, tier := range st.targets().Tiers {
			if minor, ok := ids.Tier(tier.Name); ok {
				h := model.MakeHandle(major, minor)
				handles = append(handles, h)
				where[h] = place{false, tier.Name, q}
			}
		}
		for _, node := range big {
			if minor, ok := ids.Node(node.Name); ok {
				h := model.MakeHandle(major, minor)
				handles = append(handles, h)
				where[h] = place{true, node.Name, q}
			}
		}
	}
	cs, err := qk.ClassCounters(st.tree().Device, handles)
	if err != nil {
		return nil, err
	}
	seen := map[place]int{}
	for _, c := range cs {
		w, ok := where[c.Handle]
		if !ok || c.Stats == nil {
			continue
		}
		to := m.tiers
		if w.node {
			to = m.nodes
		}
		if to[w.name] == nil {
			to[w.name] = make([]uint64, n)
		}
		to[w.name][w.q] = c.Stats.Bytes
		seen[place{w.node, w.name, 0}]++
	}
	for p, k := range seen {
		if k != n && p.node {
			delete(m.nodes, p.name)
		} else if k != n {
			delete(m.tiers, p.name)
		}
	}
	return m, nil
}

// usedEach is usedSince for each tier's (node's) counters in now that was
// has too, n queues each.
func usedEach(was, now map[string][]uint64, n int, dt float64) map[string][]tbf.Rate {
	used := make(map[string][]tbf.Rate, len(now))
	for name, b := range now {
		if w, ok := was[name]; ok && len(w) == n {
			used[name] = usedSince(w, b, dt)
		}
	}
	return used
}

// splitNodeTargets are tg's nodes that its per-queue trees split over
// every queue (model.SplitNodes), as RebalanceMQ takes them.
func splitNodeTargets(tg model.Targets) []model.TierTarget {
	split := model.SplitNodes(tg.Interface, tg.Nodes)
	if len(split) == 0 {
		return nil
	}
	out := make([]model.TierTarget, 0, len(split))
	for _, nt := range tg.Nodes {
		if split[nt.Name] {
			out = append(out, model.TierTarget{Name: nt.Name, Rate: nt.Rate, Ceil: nt.Ceil, Burst: nt.Burst})
		}
	}
	return out
}

// usedSince is what each queue sent between two byte counter readings dt
// seconds apart, in bit/s (0 where a counter went backwards: a class or
// qdisc made again).
func usedSince(was, now []uint64, dt float64) []tbf.Rate {
	used := make([]tbf.Rate, len(now))
	for q := range used {
		if q < len(was) && now[q] >= was[q] {
			used[q] = tbf.Rate(float64(now[q]-was[q]) * 8 / dt)
		}
	}
	return used
}

// atOr is the meter's time, or t for none.
func (m *queueMeter) atOr(t time.Time) time.Time {
	if m == nil {
		return t
	}
	return m.at
}

// keepQueues carries the queue and tier splits of st's current targets (or,
// before the first, of the kernel's trees at start: st.adoptedSplit) into
// tg, whose policy evaluation does not know them, fitted to tg's bandwidth
// and tier rates (model.FitQueues, model.FitTier) when those changed.
func keepQueues(st *reconciler, tg *model.Targets) {
	n := tg.Interface.Queues
	if n <= 1 {
		return
	}
	from := model.MQSplit{Queues: st.targets().Queues, Tiers: st.targets().TierQueues, Nodes: st.targets().NodeQueues}
	if st.targets().Interface.Queues != n {
		if st.adoptedSplit == nil || len(st.adoptedSplit.Queues) != n {
			return
		}
		from = *st.adoptedSplit
		st.adoptedSplit = nil // once: a later change of queues starts afresh
	}
	if len(tg.Queues) == 0 && len(from.Queues) == n {
		tg.Queues = model.FitQueues(tg.Interface.Bandwidth, from.Queues, n)
	}
	if tg.TierQueues == nil && len(from.Tiers) > 0 {
		tg.TierQueues = fitEach(tg.Tiers, from.Tiers, n)
	}
	if tg.NodeQueues == nil && len(from.Nodes) > 0 {
		tg.NodeQueues = fitEach(splitNodeTargets(*tg), from.Nodes, n)
	}
}

// fitEach fits each aggregate's split in from (if it has one) to its
// rates (model.FitTier).
func fitEach(aggs []model.TierTarget, from map[string][]model.QueueTarget, n int) map[string][]model.QueueTarget {
	out := make(map[string][]model.QueueTarget, len(aggs))
	for _, agg := range aggs {
		if split, ok := from[agg.Name]; ok {
			out[agg.Name] = model.FitTier(agg, split, n)
		}
	}
	return out
}

// userHandle returns the handle of user's class on st: under the single
// tree's root, or in the user's queue's tree.
func userHandle(st *reconciler, user string) (model.Handle, bool) {
	if st.ids.QueueCount() > 1 {
		q, ok := st.ids.Queue(user)
		if !ok {
			return 0, false
		}
		m, ok := st.ids.QueueIDs(q).User(user)
		return model.MakeHandle(model.QueueHandle(q).Major(), m), ok
	}
	m, ok := st.ids.User(user)
	return model.MakeHandle(model.RootQdisc.Major(), m), ok
}

// userOfHandle returns the user whose class is h on st, if any.
func userOfHandle(st *reconciler, h model.Handle) (string, bool) {
	if h.Minor() < model.FirstUserMinor {
		return "", false
	}
	if st.ids.QueueCount() > 1 {
		ids := st.ids.QueueIDs(model.QueueOf(h))
		if ids == nil {
			return "", false
		}
		return ids.UserByMinor(h.Minor())
	}
	return st.ids.UserByMinor(h.Minor())
}
