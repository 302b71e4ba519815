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
	var tierTargets, nodeTargets []model.TierTarget
	for _, tr := range tiers {
		if tr.node {
			nodeTargets = append(nodeTargets, tr.tier)
		} else {
			tierTargets = append(tierTargets, tr.tier)
		}
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
		prev := model.MQSplit{Queues: split, Tiers: map[string][]model.QueueTarget{}, Nodes: map[string][]model.QueueTarget{}}
		used := model.MQRates{Queues: sentBy(res, roots), Tiers: map[string][]tbf.Rate{}, Nodes: map[string][]tbf.Rate{}}
		for _, tr := range tiers {
			p, u := prev.Tiers, used.Tiers
			if tr.node {
				p, u = prev.Nodes, used.Nodes
			}
			p[tr.tier.Name] = tr.split
			u[tr.tier.Name] = sentBy(res, tr.class)
		}
		next := model.RebalanceMQ(bw, tierTargets, nodeTargets, prev, used, floors)
		moved := !slices.Equal(next.Queues, split)
		split = next.Queues
		for _, tr := range tiers {
			ns := next.Tiers[tr.tier.Name]
			if tr.node {
				ns = next.Nodes[tr.tier.Name]
			}
			moved = moved || !slices.Equal(ns, tr.split)
			tr.split = ns
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

// mqTier is one tier's aggregate classes in per-queue trees, or one split
// node's (node): their indexes in the tree's classes by queue, the tier's
// (node's) totals, and its current split.
type mqTier struct {
	tier  model.TierTarget
	node  bool
	class []int
	split []model.QueueTarget
}

// mqTiers finds every tier's class in each of the n queues' trees (Build
// gives a tier with an aggregate class one in every queue), and every
// split node's (a node with a class in more than one queue: Build gives
// it one in every queue, model.SplitNodes); the tier's (node's) rate and
// ceil are their sums.
func mqTiers(classes []model.Class, n int) ([]*mqTier, error) {
	type key struct {
		node bool
		name string
	}
	byName := map[key]*mqTier{}
	var out []*mqTier
	for i, c := range classes {
		q := model.QueueOf(c.Handle)
		if c.Labels.Kind != "tier" && c.Labels.Kind != "node" || q < 0 || q >= n {
			continue
		}
		k := key{c.Labels.Kind == "node", c.Labels.Tier}
		if k.node {
			k.name = c.Labels.Node
		}
		tr := byName[k]
		if tr == nil {
			tr = &mqTier{tier: model.TierTarget{Name: k.name}, node: k.node, class: slices.Repeat([]int{-1}, n), split: make([]model.QueueTarget, n)}
			byName[k] = tr
			out = append(out, tr)
		}
		tr.class[q] = i
		tr.split[q] = model.QueueTarget{Rate: c.Rate, Ceil: c.Ceil}
		tr.tier.Rate += c.Rate
		tr.tier.Ceil += c.Ceil
	}
	kept := out[:0]
	for _, tr := range out {
		missing := 0
		for _, i := range tr.class {
			if i < 0 {
				missing++
			}
		}
		switch {
		case tr.node && missing == n-1:
			// A whole node: one queue's class.
		case missing > 0 && tr.node:
			return nil, fmt.Errorf("node %s has classes in %d of %d queues' trees", tr.tier.Name, n-missing, n)
		case missing > 0:
			return nil, fmt.Errorf("tier %s has no class in queue %d's tree", tr.tier.Name, slices.Index(tr.class, -1))
		default:
			kept = append(kept, tr)
		}
	}
	return kept, nil
}

// sentBy is what the classes at idx (by queue) let through in res.
func sentBy(res *Result, idx []int) []tbf.Rate {
	out := make([]tbf.Rate, len(idx))
	for q, i := range idx {
		out[q] = tbf.Rate(res.Classes[i].Rate)
	}
	return out
}
