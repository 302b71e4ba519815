package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// scanEngine is the reference HTB dequeue the incremental htbEngine must
// agree with packet for packet: at every dequeue it evaluates every
// backlogged leaf's mode and its ancestors' from the tokens (lender), with
// no cached state but the DRR pointers.
type scanEngine struct {
	*htbState
	busy []bool
	ptr  map[[2]int]int
	cand []int
}

func newScanEngine(t *model.Tree) (engine, error) {
	s, err := newHTBState(t)
	if err != nil {
		return nil, err
	}
	return &scanEngine{htbState: s, busy: make([]bool, len(s.leaves)), ptr: map[[2]int]int{}}, nil
}

func (e *scanEngine) backlogged(q int, on bool, _ int64) { e.busy[q] = on }

func (e *scanEngine) change(t *model.Tree, _ int64) error { return e.setAll(t) }

// lender is the level a backlogged leaf may send at and the class it sends
// on: the first class up from the leaf that can send on its rate, through
// classes that may borrow; -1 when a class over its ceil is in the way.
func (e *scanEngine) lender(leaf int, now int64) (level, by int) {
	for i := leaf; i >= 0; i = e.cls[i].parent {
		switch m, _ := e.mode(i, now); m {
		case psched.HTBCanSend:
			return e.cls[i].level, i
		case psched.HTBCantSend:
			return -1, -1
		}
	}
	return -1, -1
}

func (e *scanEngine) dequeue(now, pkt int64) (int, []int, int64) {
	bestLevel, bestPrio, bestBy := htbMaxDepth, htbMaxDepth, -1
	e.cand = e.cand[:0]
	for q, i := range e.leaves {
		if !e.busy[q] {
			continue
		}
		level, by := e.lender(i, now)
		if by < 0 {
			continue
		}
		prio := e.cls[i].prio
		switch {
		case level < bestLevel || level == bestLevel && prio < bestPrio ||
			level == bestLevel && prio == bestPrio && level > 0 && e.cls[by].c.Handle < e.cls[bestBy].c.Handle:
			bestLevel, bestPrio, bestBy = level, prio, by
			e.cand = append(e.cand[:0], q)
		case level == bestLevel && prio == bestPrio && (level == 0 || by == bestBy):
			e.cand = append(e.cand, q)
		}
	}
	if len(e.cand) == 0 {
		w := int64(math.MaxInt64)
		for q, leaf := range e.leaves {
			if !e.busy[q] {
				continue
			}
			for i := leaf; i >= 0; i = e.cls[i].parent {
				if _, d := e.mode(i, now); d > 0 {
					w = min(w, now+d)
				}
			}
		}
		return -1, nil, w
	}
	if bestLevel == 0 {
		bestBy = -1
	}
	key := [2]int{bestBy, bestPrio}
	at := e.ptr[key]
	pick := slices.Min(e.cand)
	for _, q := range e.cand { // queues are in handle order
		if q >= at {
			pick = q
			break
		}
	}
	leaf := e.leaves[pick]
	e.ptr[key] = pick
	if e.drr(leaf, bestLevel, pkt) {
		e.ptr[key] = pick + 1
	}
	e.charge(leaf, bestLevel, pkt, now)
	return pick, e.chain, 0
}

// randomRunTree is an HTB tree of up to 3 levels below a root class:
// random rates, ceilings, bursts, quanta and prios, some users under tier
// aggregates.
func randomRunTree(r *rand.Rand) *model.Tree {
	t := &model.Tree{Device: "lan0", Root: &model.Qdisc{Kind: model.ShaperHTB, Handle: model.RootQdisc}}
	mb := func(lo, hi int) tbf.Rate { return tbf.Rate(lo+r.IntN(hi-lo+1)) * tbf.Mbit }
	t.Classes = append(t.Classes, model.Class{Handle: h(1), Parent: model.RootQdisc, Rate: mb(20, 60), Ceil: mb(60, 80), Quantum: 200000})
	minor := uint16(2)
	var parents []model.Handle
	parents = append(parents, h(1))
	for range r.IntN(3) {
		t.Classes = append(t.Classes, model.Class{Handle: h(minor), Parent: h(1), Rate: mb(5, 20), Ceil: mb(20, 60),
			Quantum: uint32(2000 + r.IntN(20000)), Labels: model.Labels{Kind: "tier"}})
		parents = append(parents, h(minor))
		minor++
	}
	for u := range 2 + r.IntN(8) {
		rate := mb(1, 10)
		ceil := rate + mb(0, 40)
		t.Classes = append(t.Classes, model.Class{Handle: h(minor), Parent: parents[r.IntN(len(parents))],
			Rate: rate, Ceil: ceil, Burst: tbf.Size(2000 + r.IntN(60000)), CBurst: tbf.Size(2000 + r.IntN(60000)),
			Quantum: uint32(1000 + r.IntN(30000)), Prio: uint32(r.IntN(3)),
			Labels: model.Labels{Kind: "user", User: fmt.Sprintf("u%d", u)}})
		minor++
	}
	return t
}

// TestRunMatchesScan runs random trees with random demands (backlogged,
// paced, idle; changed half-way, plus a parameter change) through the
// incremental engine and the reference scan: every class's series must be
// identical.
func TestRunMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for k := range 60 {
		tree := randomRunTree(r)
		demand := func() map[model.Handle]Demand {
			d := map[model.Handle]Demand{}
			for _, c := range tree.Classes {
				if c.Labels.Kind != "user" {
					continue
				}
				switch r.IntN(3) {
				case 0:
					d[c.Handle] = Max
				case 1:
					d[c.Handle] = Demand(float64(1+r.IntN(20)) * mbit)
				default:
					d[c.Handle] = 0
				}
			}
			return d
		}
		changed := &model.Tree{Device: tree.Device, Root: tree.Root, Classes: slices.Clone(tree.Classes)}
		for i := range changed.Classes {
			if changed.Classes[i].Labels.Kind == "user" {
				changed.Classes[i].Ceil = changed.Classes[i].Rate + tbf.Rate(r.IntN(20))*tbf.Mbit
				changed.Classes[i].Prio = uint32(r.IntN(3))
			}
		}
		o := RunOptions{Demand: demand(), Duration: 1500 * time.Millisecond, Window: 10 * time.Millisecond,
			PacketSize: tbf.Size(500 + r.IntN(9000)),
			Events:     []Event{{At: 500 * time.Millisecond, Demand: demand()}, {At: time.Second, Tree: changed}}}
		fast, err := run(tree, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := run(tree, o, newScanEngine)
		if err != nil {
			t.Fatal(err)
		}
		if fast.Packets != ref.Packets {
			t.Errorf("tree %d: %d packets, reference %d", k, fast.Packets, ref.Packets)
		}
		for i := range ref.Classes {
			if !slices.Equal(fast.Classes[i].Bytes, ref.Classes[i].Bytes) {
				t.Errorf("tree %d class %s: series differ\nfast %v\nref  %v", k, ref.Classes[i].Handle,
					fast.Classes[i].Bytes, ref.Classes[i].Bytes)
				break
			}
		}
		if fast.Packets == 0 {
			t.Errorf("tree %d: nothing sent", k)
		}
	}
}
