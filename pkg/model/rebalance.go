package model

import (
	"cmp"
	"slices"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Rebalancing per-queue trees (InterfaceSpec.Queues > 1). Each queue's tree
// is a separate HTB qdisc: nothing in the kernel keeps their sum within the
// interface bandwidth, and a queue cannot borrow from another. The daemon's
// policy loop does it instead, every tick, from what each queue sent since
// the last tick (RebalanceQueues); the simulator (pkg/sim) iterates it.
const (
	// QueueSaturated is the fraction of its ceil above which a queue counts
	// as saturated: it wants as much as it can get.
	QueueSaturated = 0.9
	// QueueHeadroom is how much more than it used a queue that is not
	// saturated is given, so that it can grow into the next tick.
	QueueHeadroom = 1.25
	// QueueFloorShare is the least share of the bandwidth a queue keeps
	// (bandwidth / (QueueFloorShare * queues)) so an idle queue that turns
	// busy is seen as saturated at once and gets its share the next tick.
	QueueFloorShare = 50
	// QueueHysteresis: a new split that moves no queue's ceil by more than
	// bandwidth/QueueHysteresis keeps the previous one (no kernel writes).
	QueueHysteresis = 200
)

// RebalanceQueues returns the root class rate and ceil of every queue's tree
// for the next tick, from the previous split prev (nil or of another length:
// an even split) and what each queue sent since the previous tick (used,
// bit/s). The ceils add up to exactly bandwidth (never more), and each
// queue's rate equals its ceil:
//
//   - a saturated queue (used >= QueueSaturated of its ceil) wants the whole
//     bandwidth, any other wants used*QueueHeadroom, at least the floor
//     bandwidth/(QueueFloorShare*queues);
//   - the bandwidth is shared max-min fairly (water-filling): queues that
//     want less than an equal share get what they want, the rest share
//     what is left equally;
//   - what nobody wants is spread equally over all queues.
//
// So an idle queue lends nearly all of its share to busy ones, every busy
// queue gets an equal share, and an all-idle interface splits evenly. A
// result within bandwidth/QueueHysteresis of prev for every queue returns
// prev unchanged.
//
// floors (nil: none) are the least each queue gets, whatever it sent
// (QueueFloors: the largest guaranteed rate in its tree, so that a user who
// starts sending does not drive the queue's root class into an HTB debt).
// The floors are met first (scaled down when they add up to more than
// bandwidth) and only the rest is shared by demand as above.
func RebalanceQueues(bandwidth tbf.Rate, prev []QueueTarget, used, floors []tbf.Rate) []QueueTarget {
	// A queue's root is a tier whose rate is its ceil.
	return RebalanceTier(TierTarget{Rate: bandwidth, Ceil: bandwidth}, prev, used, floors)
}

// RebalanceTier returns the tier's aggregate class in every queue's tree for
// the next tick, as RebalanceQueues does for the queues' root classes: the
// tier's ceil is shared out over the queues by what the tier's class in
// each queue sent since the previous tick (used, bit/s), the ceils adding
// up to exactly tier.Ceil, and each queue's rate is tier.Rate in the same
// proportion (ceil_q * Rate / Ceil, at least 8 bit/s, at most ceil_q), so
// the rates add up to tier.Rate (give or take rounding). prev of another
// length is an even split (EvenTierTargets). So the tier's users together
// never get more than its ceil, however they are spread over queues, and
// its users on one queue get all of it while those elsewhere are idle.
// floors (nil: none) are the largest guaranteed rate of the tier's users in
// each queue (QueueFloors), met first as in RebalanceQueues; a queue's rate
// is at least its floor (within its ceil), so the rates may add up to a
// little more than tier.Rate.
func RebalanceTier(tier TierTarget, prev []QueueTarget, used, floors []tbf.Rate) []QueueTarget {
	ceil := max(tier.Ceil, tier.Rate)
	if len(prev) != len(used) {
		prev = EvenTierTargets(tier, len(used))
	}
	give, moved := shareOut(ceil, prev, used, floors)
	if give == nil || !moved && sumCeil(prev) <= ceil {
		return prev
	}
	out := make([]QueueTarget, len(give))
	for q, g := range give {
		r := tierRateShare(tier.Rate, ceil, g)
		if q < len(floors) {
			r = max(r, min(floors[q], g))
		}
		out[q] = QueueTarget{Rate: r, Ceil: g}
	}
	return out
}

// EvenTierTargets splits the tier's rate and ceil evenly over n queues
// (at least 8 bit/s each, rate at most ceil): its class in each queue's
// tree before the first rebalancing.
func EvenTierTargets(tier TierTarget, n int) []QueueTarget {
	ceil := max(tier.Ceil, tier.Rate)
	share := max(ceil/tbf.Rate(n), 8)
	out := make([]QueueTarget, n)
	for q := range out {
		out[q] = QueueTarget{Rate: tierRateShare(tier.Rate, ceil, share), Ceil: share}
	}
	return out
}

// FitQueues returns split with its ceils scaled to add up to exactly
// bandwidth (each queue keeps its proportion; rate = ceil), or split itself
// when they already do: the queues' split after the interface bandwidth
// changed, until the next rebalancing. Another length: an even split.
func FitQueues(bandwidth tbf.Rate, split []QueueTarget, n int) []QueueTarget {
	return FitTier(TierTarget{Rate: bandwidth, Ceil: bandwidth}, split, n)
}

// FitTier is FitQueues for a tier's classes: the ceils scaled to add up to
// the tier's ceil and the rates its rate in the same proportion
// (RebalanceTier), or split itself when its ceils add up to the tier's and
// each rate is at least its proportion (and at most its ceil).
func FitTier(tier TierTarget, split []QueueTarget, n int) []QueueTarget {
	if len(split) != n {
		return EvenTierTargets(tier, n)
	}
	ceil := max(tier.Ceil, tier.Rate)
	fits := sumCeil(split) == ceil
	for _, s := range split {
		// RebalanceTier may have raised a rate to its floor.
		fits = fits && s.Rate >= tierRateShare(tier.Rate, ceil, s.Ceil) && s.Rate <= s.Ceil
	}
	if fits {
		return split
	}
	out := make([]QueueTarget, n)
	for q, c := range scaleCeils(ceil, split) {
		out[q] = QueueTarget{Rate: tierRateShare(tier.Rate, ceil, c), Ceil: c}
	}
	return out
}

// scaleCeils scales split's ceils to add up to total (the rounding
// remainder to the first queues), at least 8 bit/s each.
func scaleCeils(total tbf.Rate, split []QueueTarget) []tbf.Rate {
	n := len(split)
	sum := float64(sumCeil(split))
	out := make([]tbf.Rate, n)
	var given tbf.Rate
	for q, s := range split {
		if sum > 0 {
			out[q] = tbf.Rate(float64(s.Ceil) / sum * float64(total))
		} else {
			out[q] = total / tbf.Rate(n)
		}
		given += out[q]
	}
	for q := 0; given < total; q = (q + 1) % n {
		out[q]++
		given++
	}
	for q := range out {
		out[q] = max(out[q], 8)
	}
	return out
}

// tierRateShare is the part of rate that goes with the part ceilShare of
// ceil: rate * ceilShare / ceil, at least 8 bit/s and at most ceilShare
// (exactly ceilShare when rate is ceil: a queue's root).
func tierRateShare(rate, ceil, ceilShare tbf.Rate) tbf.Rate {
	r := ceilShare
	if ceil > 0 && rate != ceil {
		r = tbf.Rate(float64(rate) * float64(ceilShare) / float64(ceil))
	}
	return max(min(r, ceilShare), 8)
}

// shareOut is the water-filling of RebalanceQueues: total shared out over
// len(used) queues, each first getting its floor (the larger of
// floors[q] and total/(QueueFloorShare*n); scaled down to fit total), the
// rest by what each used against its previous ceil (prev, of the same
// length). moved reports whether some queue's share moved by more than
// total/QueueHysteresis from its previous ceil, or its previous ceil was
// below its floor. No queues: nil.
func shareOut(total tbf.Rate, prev []QueueTarget, used, floors []tbf.Rate) (give []tbf.Rate, moved bool) {
	n := len(used)
	if n == 0 {
		return nil, false
	}
	floor := make([]tbf.Rate, n)
	least := max(total/tbf.Rate(QueueFloorShare*n), 8)
	var sum tbf.Rate
	for q := range floor {
		floor[q] = least
		if q < len(floors) {
			floor[q] = max(least, floors[q])
		}
		sum += floor[q]
	}
	if sum > total {
		for q := range floor {
			floor[q] = max(tbf.Rate(float64(floor[q])*float64(total)/float64(sum)), 8)
		}
	}
	// What each queue wants beyond its floor.
	extra := make([]tbf.Rate, n)
	left := total
	for q, u := range used {
		want := total
		if !saturated(u, prev[q].Ceil) {
			want = min(total, tbf.Rate(float64(u)*QueueHeadroom))
		}
		extra[q] = max(want, floor[q]) - floor[q]
		left -= min(left, floor[q])
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(extra[a], extra[b]) })
	give = slices.Clone(floor)
	for i, q := range order {
		share := left / tbf.Rate(n-i)
		g := min(extra[q], share)
		give[q] += g
		left -= g
	}
	// Spread what nobody wants; the remainder of the division goes to the
	// first queues so the sum is exactly total.
	each, rest := left/tbf.Rate(n), left%tbf.Rate(n)
	for q := range give {
		give[q] += each
		if tbf.Rate(q) < rest {
			give[q]++
		}
		give[q] = max(give[q], 8)
		if d := give[q] - prev[q].Ceil; d > total/QueueHysteresis || -d > total/QueueHysteresis || prev[q].Ceil < floor[q] {
			moved = true
		}
	}
	return give, moved
}

// QueueFloors returns, by queue, the largest guaranteed rate of a leaf
// class (a user or the default class) or of a placed node (a top-level
// node, or one right under a split node) in each queue's tree of
// per-queue tree t; by tier name, the largest of each tier's users in each
// queue; and by split node name (SplitNodes), the largest of the users and
// nodes right under it in each queue: RebalanceQueues' and RebalanceTier's
// floors.
//
// Why the largest: HTB lets a class send at its own rate whatever its
// parents' ceils, charging them, and a parent driven below zero this way
// lends nothing until the debt (up to a minute) is paid back. A queue kept
// at the largest guaranteed rate in it never goes into debt when one of its
// users starts sending, in the tick before the policy loop sees the demand
// and moves the shares (a busy queue's share follows what it sends). The
// sum of the guaranteed rates would never go into debt at all, but would
// keep every idle user's guarantee away from the busy queues.
func QueueFloors(t *Tree) MQRates {
	n := len(t.Queues)
	if n == 0 {
		return MQRates{}
	}
	aggregate := map[string]bool{}
	nodeOf := map[Handle]string{}
	inQueues := map[string]int{}
	for _, c := range t.Classes {
		switch c.Labels.Kind {
		case "tier":
			aggregate[c.Labels.Tier] = true
		case "node":
			nodeOf[c.Handle] = c.Labels.Node
			inQueues[c.Labels.Node]++
		}
	}
	split := map[string]bool{}
	for name, k := range inQueues {
		if k > 1 {
			split[name] = true // a class in every queue (SplitNodes)
		}
	}
	parentOf := make(map[string]string, len(inQueues))
	for _, c := range t.Classes {
		if c.Labels.Kind == "node" {
			parentOf[c.Labels.Node] = nodeOf[c.Parent]
		}
	}
	return leafFloors(n, t.Classes, func(c *Class) int { return QueueOf(c.Handle) }, aggregate, split,
		func(node string) string { return parentOf[node] })
}

// leafFloors is QueueFloors over classes (users, default classes and
// nodes count), queue giving each one's queue (-1: none), aggregate the
// tiers with an aggregate class, split the split nodes and parentOf a
// node's parent node ("" for none).
func leafFloors(n int, classes []Class, queue func(*Class) int, aggregate, split map[string]bool, parentOf func(string) string) MQRates {
	f := MQRates{Queues: make([]tbf.Rate, n), Tiers: map[string][]tbf.Rate{}, Nodes: map[string][]tbf.Rate{}}
	under := func(m map[string][]tbf.Rate, name string, q int, r tbf.Rate) {
		if m[name] == nil {
			m[name] = make([]tbf.Rate, n)
		}
		m[name][q] = max(m[name][q], r)
	}
	// up floors split node p and every split node above it in queue q:
	// all of them carry what is under p.
	up := func(p string, q int, r tbf.Rate) {
		for ; p != "" && split[p]; p = parentOf(p) {
			under(f.Nodes, p, q, r)
		}
	}
	for i := range classes {
		c := &classes[i]
		q := queue(c)
		if q < 0 || q >= n {
			continue
		}
		switch c.Labels.Kind {
		case "node":
			if split[c.Labels.Node] {
				continue // its users and nodes count
			}
			if p := parentOf(c.Labels.Node); p == "" || split[p] {
				f.Queues[q] = max(f.Queues[q], c.Rate) // a placed node's guarantee
				up(p, q, c.Rate)
			}
		case "user", "default":
			f.Queues[q] = max(f.Queues[q], c.Rate)
			if c.Labels.Kind != "user" {
				continue
			}
			if split[c.Labels.Node] {
				up(c.Labels.Node, q, c.Rate)
			} else if c.Labels.Node == "" && aggregate[c.Labels.Tier] {
				under(f.Tiers, c.Labels.Tier, q, c.Rate)
			}
		}
	}
	return f
}

// saturated reports whether a class that sent used (bit/s) against ceil
// wants as much as it can get (QueueSaturated).
func saturated(used, ceil tbf.Rate) bool {
	return float64(used) >= QueueSaturated*float64(ceil)
}

// sumCeil adds the queues' ceils.
func sumCeil(qs []QueueTarget) tbf.Rate {
	var s tbf.Rate
	for _, q := range qs {
		s += q.Ceil
	}
	return s
}

// MQSplit is how per-queue trees share the interface bandwidth, each
// tier's aggregate and each split node: the queues' root classes and, by
// tier (node) name, the tier's (node's) class in each queue
// (Targets.Queues, Targets.TierQueues and Targets.NodeQueues).
type MQSplit struct {
	Queues []QueueTarget
	Tiers  map[string][]QueueTarget
	Nodes  map[string][]QueueTarget
}

// MQRates are rates of per-queue trees by queue: of the queues' roots and,
// by tier (split node) name, of each tier's (node's) class in each queue.
// RebalanceMQ takes what they sent in the last tick and their floors
// (QueueFloors) in this form.
type MQRates struct {
	Queues []tbf.Rate
	Tiers  map[string][]tbf.Rate
	Nodes  map[string][]tbf.Rate
}

// RebalanceMQ is one policy tick of per-queue trees: it rebalances each
// tier in tiers and each split node in nodes (RebalanceTier) and then the
// queues (RebalanceQueues) from what they sent (used, len(used.Queues)
// queues), coupling the two levels so that neither holds the other back:
//
//   - a tier's (node's) class that sent something in a queue whose root
//     was saturated keeps at least its share (what it sent says nothing of
//     what it wants: the root held it back);
//   - a queue counts as having sent, besides what it did, what its
//     saturated tier and node classes are given beyond what they sent, so
//     the queue's share grows with them in the same tick.
//
// Without the coupling each level would see the other as the limit and
// shares would grow by only QueueHeadroom per tick. A tier or node without
// usage (or of another queue count) keeps its split from prev.
func RebalanceMQ(bandwidth tbf.Rate, tiers, nodes []TierTarget, prev MQSplit, used, floors MQRates) MQSplit {
	n := len(used.Queues)
	prevQ := prev.Queues
	if len(prevQ) != n {
		prevQ = EvenQueueTargets(bandwidth, n)
	}
	rootSat := make([]bool, n)
	for q, u := range used.Queues {
		rootSat[q] = saturated(u, prevQ[q].Ceil)
	}
	next := MQSplit{Tiers: make(map[string][]QueueTarget, len(tiers))}
	if len(nodes) > 0 {
		next.Nodes = make(map[string][]QueueTarget, len(nodes))
	}
	sent := slices.Clone(used.Queues)
	rebalanceAggregates(tiers, prev.Tiers, used.Tiers, floors.Tiers, rootSat, sent, next.Tiers)
	rebalanceAggregates(nodes, prev.Nodes, used.Nodes, floors.Nodes, rootSat, sent, next.Nodes)
	next.Queues = RebalanceQueues(bandwidth, prev.Queues, sent, floors.Queues)
	return next
}

// rebalanceAggregates is RebalanceMQ's pass over aggregates (tiers or
// split nodes): each one's next split into next, and what its saturated
// classes are given beyond what they sent added to sent (by queue).
func rebalanceAggregates(aggs []TierTarget, prev map[string][]QueueTarget, used, floors map[string][]tbf.Rate, rootSat []bool, sent []tbf.Rate, next map[string][]QueueTarget) {
	n := len(rootSat)
	for _, agg := range aggs {
		p, u := prev[agg.Name], used[agg.Name]
		if len(u) != n {
			if p != nil {
				next[agg.Name] = p
			}
			continue
		}
		if len(p) != n {
			p = EvenTierTargets(agg, n)
		}
		eff := slices.Clone(u)
		for q := range eff {
			if rootSat[q] && u[q] > 0 {
				// Wants at least what it had: QueueHeadroom times this.
				eff[q] = max(eff[q], tbf.Rate(float64(p[q].Ceil)/QueueHeadroom))
			}
		}
		nt := RebalanceTier(agg, p, eff, floors[agg.Name])
		next[agg.Name] = nt
		for q := range nt {
			if saturated(u[q], p[q].Ceil) && nt[q].Ceil > u[q] {
				sent[q] += nt[q].Ceil - u[q]
			}
		}
	}
}
