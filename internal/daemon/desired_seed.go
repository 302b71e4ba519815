package daemon

import (
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
)

// seedRamper tells the Ramper what the kernel holds now (a restart adopts
// the shaping in place), so that the first policy step ramps from the
// kernel's rates to the plan's instead of jumping. Interfaces that are
// missing or not shaped by shaperd are skipped (their classes start at
// their targets).
func (d *Daemon) seedRamper() {
	var seeds []model.Targets
	for _, st := range d.ifaces {
		actual, err := d.safeDump(st)
		if err != nil || actual.Root == nil {
			continue
		}
		st.adoptedSplit = adoptedSplit(st, actual)
		if tg, ok := seedTargets(st, actual); ok {
			seeds = append(seeds, tg)
		}
	}
	if len(seeds) > 0 {
		d.ramper.Seed(seeds)
		d.log.Info("ramps start from the rates in the kernel", "interfaces", len(seeds))
	}
}

// seedTargets turns an adopted kernel tree of st into the Targets that
// would have built it: the link's, default class's, tiers' and users'
// rates (and user bursts) as the kernel has them, named by st.ids.
func seedTargets(st *reconciler, actual model.Tree) (model.Targets, bool) {
	spec := model.InterfaceSpec{Name: st.cfg.Name, Direction: model.Direction(st.cfg.Direction),
		Shaper: model.ShaperKind(st.cfg.Shaper)}
	tg := model.Targets{Interface: spec}
	if st.cfg.Shaper == config.ShaperTBF {
		if actual.Root.Kind != model.ShaperTBF || actual.Root.TBF == nil {
			return tg, false
		}
		tg.Interface.Bandwidth, tg.Interface.Burst = actual.Root.TBF.Rate, actual.Root.TBF.Burst
		return tg, true
	}
	// Per-queue trees: each class is named by its queue's ids, and the
	// interface's and default class's rates are the sums over the queues
	// (what Build split). Tiers are left out: their classes' shares are the
	// split's (adoptedSplit), and their rates, raised to floors, do not add
	// up to the tier's.
	idsOf := func(model.Handle) *model.Assignment { return st.ids }
	mq := false
	switch {
	case actual.Root.Kind == model.ShaperMQ && st.ids.QueueCount() == len(actual.Queues):
		idsOf = func(h model.Handle) *model.Assignment { return st.ids.QueueIDs(model.QueueOf(h)) }
		mq = true
	case actual.Root.Kind != model.ShaperHTB:
		return tg, false
	}
	haveRoot := false
	for _, c := range actual.Classes {
		ids := idsOf(c.Handle)
		if ids == nil {
			continue
		}
		switch m := c.Handle.Minor(); {
		case m == model.RootClass.Minor():
			tg.Interface.Bandwidth += c.Rate
			haveRoot = true
		case m == model.DefaultClass.Minor():
			tg.Interface.DefaultRate += c.Rate
			tg.Interface.DefaultCeil = max(tg.Interface.DefaultCeil, c.Ceil)
		case m >= model.FirstUserMinor:
			if u, ok := ids.UserByMinor(m); ok {
				tg.Users = append(tg.Users, model.UserTarget{Name: u, Rate: c.Rate, Ceil: c.Ceil, Burst: c.Burst, CBurst: c.CBurst})
			}
		case !mq:
			if t, ok := ids.TierByMinor(m); ok {
				tg.Tiers = append(tg.Tiers, model.TierTarget{Name: t, Rate: c.Rate, Ceil: c.Ceil})
			}
		}
	}
	return tg, haveRoot
}

// adoptedSplit returns the split of the per-queue trees in actual (each
// queue's root class and each tier's class in each queue, named by st.ids),
// or nil when actual is not st's per-queue trees.
func adoptedSplit(st *reconciler, actual model.Tree) *model.MQSplit {
	if actual.Root.Kind != model.ShaperMQ {
		return nil
	}
	split, ok := model.SplitOf(&actual, st.ids)
	if !ok {
		return nil
	}
	return &split
}
