package sim

import (
	"fmt"
	"slices"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// QueueResult is one queue's tree under mq in steady state, in bits/s.
type QueueResult struct {
	Queue int
	// Rate and Ceil are the queue root class's after rebalancing.
	Rate, Ceil float64
	// Sent is what the queue's tree lets through.
	Sent float64
}

// maxRebalanceRounds bounds solveMQ's iteration (it converges in a few).
const maxRebalanceRounds = 32

// solveMQ predicts per-queue trees under mq as the daemon's policy loop
// leaves them: it solves every queue's tree (each a separate HTB: its root
// class is a top-level class that lends only within its queue) with the
// split in t, gives what each queue and each tier's class in each queue
// sends to model.RebalanceMQ as one tick's measurement, and repeats with
// the new splits until they stop changing. The interface bandwidth is the sum of the queues' ceils in t
// (Build gives them an even split of it). Result.Queues has the final
// split; Result.Kind is mq.
func solveMQ(t *model.Tree, demand DemandFunc, pkt float64) (*Result, error) {
	n := len(t.Queues)
	if n == 0 {
		return nil, fmt.Errorf("simulate %s: mq root without queue trees", t.Device)
	}
	work := *t
	work.Classes = slices.Clone(t.Classes)
	roots := make([]int, n)
	for q := range roots {
		roots[q] = -1
	}
	var bw tbf.Rate
	for i, c := range work.Classes {
		if q := model.QueueOf(c.Handle); q >= 0 && q < n && c.Parent == model.QueueHandle(q) {
			roots[q] = i
			bw += c.Ceil
		}
	}
	split := make([]model.QueueTarget, n)
	for q, i := range roots {
		if i < 0 {
			return nil, fmt.Errorf("simulate %s: queue %d has no root class", t.Device, q)
		}
		split[q] = model.QueueTarget{Rate: work.Classes[i].Rate, Ceil: work.Classes[i].Ceil}
	}
	tiers, err := mqTiers(work.Classes, n)
	if err != nil {
		return nil, fmt.Errorf("simulate %s: %w", t.Device, err)
	}
	floors := model.QueueFloors(t)
	tierTargets := make([]model.TierTarget, len(tiers))
	for i, tr := range tiers {
		tierTargets[i] = tr.tier
	}
	var res *Result
	for round := 0; ; round++ {
		for q, i := range roots {
			work.Classes[i].Rate, work.Classes[i].Ceil = split[q].Rate, split[q].Ceil
		}
		for _, tr := range tiers {
			for q, i := range tr.class {
				work.Classes[i].Rate, work.Classes[i].Ceil = tr.split[q].Rate, tr.split[q].Ceil
			}
		}
		if res, err = solveHTB(&work, demand, pkt); err != nil {
			return nil, err
		}
		prev := model.MQSplit{Queues: split, Tiers: map[string][]model.QueueTarget{}}
		used := model.MQRates{Queues: sentBy(res, roots), Tiers: map[string][]tbf.Rate{}}
		for _, tr := range tiers {
			prev.Tiers[tr.tier.Name] = tr.split
			used.Tiers[tr.tier.Name] = sentBy(res, tr.class)
		}
		next := model.RebalanceMQ(bw, tierTargets, prev, used, floors)
		moved := !slices.Equal(next.Queues, split)
		split = next.Queues
		for _, tr := range tiers {
			moved = moved || !slices.Equal(next.Tiers[tr.tier.Name], tr.split)
			tr.split = next.Tiers[tr.tier.Name]
		}
		if !moved || round == maxRebalanceRounds {
			break
		}
	}
	res.Kind = model.ShaperMQ
	res.Queues = make([]QueueResult, n)
	for q, i := range roots {
		res.Queues[q] = QueueResult{Queue: q, Rate: float64(split[q].Rate), Ceil: float64(split[q].Ceil), Sent: res.Classes[i].Rate}
	}
	return res, nil
}

// mqTier is one tier's aggregate classes in per-queue trees: their indexes
// in the tree's classes by queue, the tier's totals, and its current split.
type mqTier struct {
	tier  model.TierTarget
	class []int
	split []model.QueueTarget
}

// mqTiers finds every tier's class in each of the n queues' trees (Build
// gives a tier with an aggregate class one in every queue); the tier's
// rate and ceil are their sums.
func mqTiers(classes []model.Class, n int) ([]*mqTier, error) {
	byName := map[string]*mqTier{}
	var out []*mqTier
	for i, c := range classes {
		q := model.QueueOf(c.Handle)
		if c.Labels.Kind != "tier" || q < 0 || q >= n {
			continue
		}
		tr := byName[c.Labels.Tier]
		if tr == nil {
			tr = &mqTier{tier: model.TierTarget{Name: c.Labels.Tier}, class: slices.Repeat([]int{-1}, n), split: make([]model.QueueTarget, n)}
			byName[c.Labels.Tier] = tr
			out = append(out, tr)
		}
		tr.class[q] = i
		tr.split[q] = model.QueueTarget{Rate: c.Rate, Ceil: c.Ceil}
		tr.tier.Rate += c.Rate
		tr.tier.Ceil += c.Ceil
	}
	for _, tr := range out {
		if q := slices.Index(tr.class, -1); q >= 0 {
			return nil, fmt.Errorf("tier %s has no class in queue %d's tree", tr.tier.Name, q)
		}
	}
	return out, nil
}

// sentBy is what the classes at idx (by queue) let through in res.
func sentBy(res *Result, idx []int) []tbf.Rate {
	out := make([]tbf.Rate, len(idx))
	for q, i := range idx {
		out[q] = tbf.Rate(res.Classes[i].Rate)
	}
	return out
}
