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
// each queue's bytes sent, and each tier's (with an aggregate class) in
// each queue.
type queueMeter struct {
	at    time.Time
	bytes []uint64
	tiers map[string][]uint64
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
		used := model.MQRates{Queues: usedSince(prev.bytes, m.bytes, dt), Tiers: map[string][]tbf.Rate{}}
		for name, b := range m.tiers {
			if was, ok := prev.tiers[name]; ok && len(was) == n {
				used.Tiers[name] = usedSince(was, b, dt)
			}
		}
		next := model.RebalanceMQ(tg.Interface.Bandwidth, tg.Tiers, model.MQSplit{Queues: tg.Queues, Tiers: tg.TierQueues}, used, model.QueueFloors(st.tree()))
		if slices.Equal(next.Queues, tg.Queues) && maps.EqualFunc(next.Tiers, tg.TierQueues, slices.Equal) {
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
// of each tier's class in each queue's tree. A tier whose class is missing
// in some queue is left out (it is not rebalanced this tick).
func readQueueMeter(qk queueKernel, st *reconciler, now time.Time) (*queueMeter, error) {
	n := st.targets().Interface.Queues
	qs, err := qk.QueueCounters(st.tree().Device)
	if err != nil || len(qs) != n {
		return nil, fmt.Errorf("queue counters: %d of %d queues: %w", len(qs), n, err)
	}
	m := &queueMeter{at: now, bytes: make([]uint64, n), tiers: map[string][]uint64{}}
	for q, qd := range qs {
		if qd.Stats != nil {
			m.bytes[q] = qd.Stats.Bytes
		}
	}
	if len(st.targets().Tiers) == 0 {
		return m, nil
	}
	handles := make([]model.Handle, 0, n*len(st.targets().Tiers))
	where := map[model.Handle]struct {
		tier string
		q    int
	}{}
	for _, tier := range st.targets().Tiers {
		for q := 0; q < n; q++ {
			minor, ok := st.ids.QueueIDs(q).Tier(tier.Name)
			if !ok {
				continue
			}
			h := model.MakeHandle(model.QueueHandle(q).Major(), minor)
			handles = append(handles, h)
			where[h] = struct {
				tier string
				q    int
			}{tier.Name, q}
		}
	}
	cs, err := qk.ClassCounters(st.tree().Device, handles)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for _, c := range cs {
		w, ok := where[c.Handle]
		if !ok || c.Stats == nil {
			continue
		}
		b := m.tiers[w.tier]
		if b == nil {
			b = make([]uint64, n)
			m.tiers[w.tier] = b
		}
		b[w.q] = c.Stats.Bytes
		seen[w.tier]++
	}
	for tier, k := range seen {
		if k != n {
			delete(m.tiers, tier)
		}
	}
	return m, nil
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
	from := model.MQSplit{Queues: st.targets().Queues, Tiers: st.targets().TierQueues}
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
	if tg.TierQueues != nil || len(from.Tiers) == 0 {
		return
	}
	tiers := make(map[string][]model.QueueTarget, len(tg.Tiers))
	for _, tier := range tg.Tiers {
		if split, ok := from.Tiers[tier.Name]; ok {
			tiers[tier.Name] = model.FitTier(tier, split, n)
		}
	}
	tg.TierQueues = tiers
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
