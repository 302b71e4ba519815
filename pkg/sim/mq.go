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
// split in t, gives what each queue sends to model.RebalanceQueues as one
// tick's measurement, and repeats with the new split until it stops
// changing. The interface bandwidth is the sum of the queues' ceils in t
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
	var res *Result
	for round := 0; ; round++ {
		for q, i := range roots {
			work.Classes[i].Rate, work.Classes[i].Ceil = split[q].Rate, split[q].Ceil
		}
		var err error
		if res, err = solveHTB(&work, demand, pkt); err != nil {
			return nil, err
		}
		used := make([]tbf.Rate, n)
		for q, i := range roots {
			used[q] = tbf.Rate(res.Classes[i].Rate)
		}
		next := model.RebalanceQueues(bw, split, used)
		if slices.Equal(next, split) || round == maxRebalanceRounds {
			break
		}
		split = next
	}
	res.Kind = model.ShaperMQ
	res.Queues = make([]QueueResult, n)
	for q, i := range roots {
		res.Queues[q] = QueueResult{Queue: q, Rate: float64(split[q].Rate), Ceil: float64(split[q].Ceil), Sent: res.Classes[i].Rate}
	}
	return res, nil
}
