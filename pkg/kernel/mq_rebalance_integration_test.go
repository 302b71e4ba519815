package kernel

import (
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// rebalancer runs the daemon's queue rebalancing (model.RebalanceQueues
// from QueueCounters) every tick until stopped.
type rebalancer struct {
	t    *testing.T
	k    *Kernel
	tg   model.Targets
	ids  *model.Assignment
	stop chan struct{}
	done sync.WaitGroup
	mu   sync.Mutex
	last []model.QueueTarget
}

func startRebalancer(t *testing.T, k *Kernel, tg model.Targets, ids *model.Assignment, tick time.Duration) *rebalancer {
	r := &rebalancer{t: t, k: k, tg: tg, ids: ids, stop: make(chan struct{})}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		var prevBytes []uint64
		prevAt := time.Now()
		for {
			select {
			case <-r.stop:
				return
			case <-time.After(tick):
			}
			qs, err := k.QueueCounters(tg.Interface.Name)
			if err != nil {
				t.Errorf("QueueCounters: %v", err)
				return
			}
			now := time.Now()
			bytes := make([]uint64, len(qs))
			for q, qd := range qs {
				bytes[q] = qd.Stats.Bytes
			}
			if prevBytes != nil {
				used := make([]tbf.Rate, len(qs))
				for q := range used {
					used[q] = tbf.Rate(float64(bytes[q]-prevBytes[q]) * 8 / now.Sub(prevAt).Seconds())
				}
				next := model.RebalanceQueues(tg.Interface.Bandwidth, r.tg.Queues, used)
				r.tg.Queues = next
				desired, err := model.Build(r.tg, ids)
				if err != nil {
					t.Errorf("Build: %v", err)
					return
				}
				actual, err := k.Actual(desired)
				if err != nil {
					t.Errorf("Actual: %v", err)
					return
				}
				if _, err := k.Apply(model.Diff(actual, desired)); err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				r.mu.Lock()
				r.last = next
				r.mu.Unlock()
			}
			prevBytes, prevAt = bytes, now
		}
	}()
	t.Cleanup(r.halt)
	return r
}

func (r *rebalancer) halt() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.done.Wait()
}

func (r *rebalancer) split() []model.QueueTarget {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Per-queue trees with the policy loop's rebalancing (every 250ms here): a
// user alone on its queue, the other queues idle, gets the whole interface
// (within 5%), and one user per queue all busy together stay within the
// interface bandwidth (within 3%).
func TestMQRebalanceHoldsInterfaceBandwidth(t *testing.T) {
	lab, k := mqLab(t, 4, 4)
	ids := model.NewAssignment()
	bw := 100 * tbf.Mbit
	tg := mqTargets(lab, 4, bw, tbf.Mbit)
	reconcile(t, k, tg, ids)
	r := startRebalancer(t, k, tg, ids, 250*time.Millisecond)

	want := goodput(bw, false)
	got := measure(t, lab, func(x []float64) bool { return within(x[0], want, 0.05) },
		netnslab.Flow{User: lab.Users4[0], Dir: netnslab.Download})
	t.Logf("one busy queue: %.2f Mbit/s (interface goodput %.2f), split %v", got[0]/1e6, want/1e6, r.split())
	if !within(got[0], want, 0.05) {
		t.Errorf("one user alone on its queue: %.2f Mbit/s, want the interface's %.2f +-5%%", got[0]/1e6, want/1e6)
	}

	flows := make([]netnslab.Flow, 4)
	for i := range flows {
		flows[i] = netnslab.Flow{User: lab.Users4[i], Dir: netnslab.Download}
	}
	total := func(x []float64) float64 {
		s := 0.0
		for _, v := range x {
			s += v
		}
		return s
	}
	all := measure(t, lab, func(x []float64) bool { return total(x) <= want*1.03 }, flows...)
	t.Logf("all queues busy: %v Mbit/s, total %.2f (interface goodput %.2f), split %v", mbit(all), total(all)/1e6, want/1e6, r.split())
	if total(all) > want*1.03 {
		t.Errorf("all queues busy: total %.2f Mbit/s, above the interface's %.2f +3%%", total(all)/1e6, want/1e6)
	}
	if total(all) < want*0.9 {
		t.Errorf("all queues busy: total %.2f Mbit/s, far below the interface's %.2f", total(all)/1e6, want/1e6)
	}
	r.halt()
	// Without rebalancing the static even split would cap one user at a
	// quarter: shown by the split itself.
	if s := r.split(); s == nil {
		t.Error("the rebalancer never produced a split")
	}
}
