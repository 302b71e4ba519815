package model

import (
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
func RebalanceQueues(bandwidth tbf.Rate, prev []QueueTarget, used []tbf.Rate) []QueueTarget {
	n := len(used)
	if n == 0 {
		return nil
	}
	if len(prev) != n {
		prev = EvenQueueTargets(bandwidth, n)
	}
	floor := max(bandwidth/tbf.Rate(QueueFloorShare*n), 8)
	want := make([]tbf.Rate, n)
	for q, u := range used {
		switch {
		case float64(u) >= QueueSaturated*float64(prev[q].Ceil):
			want[q] = bandwidth
		default:
			want[q] = min(bandwidth, max(floor, tbf.Rate(float64(u)*QueueHeadroom)))
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case want[a] < want[b]:
			return -1
		case want[a] > want[b]:
			return 1
		}
		return 0
	})
	give := make([]tbf.Rate, n)
	left := bandwidth
	for i, q := range order {
		share := left / tbf.Rate(n-i)
		give[q] = min(want[q], share)
		left -= give[q]
	}
	// Spread what nobody wants; the remainder of the division goes to the
	// first queues so the sum is exactly bandwidth.
	each, rest := left/tbf.Rate(n), left%tbf.Rate(n)
	for q := range give {
		give[q] += each
		if tbf.Rate(q) < rest {
			give[q]++
		}
		give[q] = max(give[q], 8)
	}
	out := make([]QueueTarget, n)
	moved := false
	for q := range out {
		out[q] = QueueTarget{Rate: give[q], Ceil: give[q]}
		if d := give[q] - prev[q].Ceil; d > bandwidth/QueueHysteresis || -d > bandwidth/QueueHysteresis {
			moved = true
		}
	}
	if !moved && sumCeil(prev) <= bandwidth {
		return prev
	}
	return out
}

// sumCeil adds the queues' ceils.
func sumCeil(qs []QueueTarget) tbf.Rate {
	var s tbf.Rate
	for _, q := range qs {
		s += q.Ceil
	}
	return s
}
