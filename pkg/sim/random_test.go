package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// randomTree is an HTB tree of a root class, 0-3 aggregate classes and
// 1-12 leaves under the root or an aggregate, with random rates, ceilings
// (some oversubscribed), prios and quanta, and a random demand per leaf.
func randomTree(r *rand.Rand) (*model.Tree, map[model.Handle]Demand) {
	mb := func(lo, hi int) tbf.Rate { return tbf.Rate(lo+r.IntN(hi-lo+1)) * tbf.Mbit }
	t := &model.Tree{Device: "lan0", Root: &model.Qdisc{Kind: model.ShaperHTB, Handle: model.RootQdisc}}
	bw := mb(10, 200)
	t.Classes = append(t.Classes, model.Class{Handle: model.RootClass, Parent: model.RootQdisc, Rate: bw, Ceil: bw})
	parents := []model.Handle{model.RootClass}
	for i := range r.IntN(4) {
		rate := mb(1, 100)
		t.Classes = append(t.Classes, model.Class{Handle: model.MakeHandle(1, uint16(0x10+i)), Parent: model.RootClass,
			Rate: rate, Ceil: rate + mb(0, 100)})
		parents = append(parents, t.Classes[len(t.Classes)-1].Handle)
	}
	demand := map[model.Handle]Demand{}
	for i := range 1 + r.IntN(12) {
		rate := mb(1, 40)
		h := model.MakeHandle(1, uint16(0x100+i))
		t.Classes = append(t.Classes, model.Class{Handle: h, Parent: parents[r.IntN(len(parents))],
			Rate: rate, Ceil: rate + mb(0, 150), Prio: uint32(r.IntN(3) * 3), Quantum: uint32(1000 + r.IntN(200000))})
		switch r.IntN(4) {
		case 0:
			demand[h] = 0
		case 1:
			demand[h] = Demand(mb(0, 60))
		default:
			demand[h] = Max
		}
	}
	return t, demand
}

// On 2000 random trees: every leaf gets at least min(demand, rate) and at
// most min(demand, ceil); an inner class carries at most its ceil unless
// what its children send on their own rates exceeds it; and the solver is work
// conserving: when the root class has rate left, no backlogged leaf could
// take more (it is satisfied, at its ceil or behind an aggregate at its
// ceil).
func TestRandomTreesInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for it := range 2000 {
		tree, demand := randomTree(r)
		res, err := Solve(tree, func(c *model.Class) Demand { return demand[c.Handle] }, Options{})
		if err != nil {
			t.Fatal(err)
		}
		byHandle := map[model.Handle]*ClassResult{}
		guaranteed := map[model.Handle]float64{}
		for i := range res.Classes {
			byHandle[res.Classes[i].Handle] = &res.Classes[i]
		}
		const slack = 1.0 // bit/s
		for i, c := range res.Classes {
			k := &tree.Classes[i]
			if !c.Leaf {
				continue
			}
			d := float64(demand[c.Handle])
			lo, hi := min(d, float64(k.Rate)), min(d, float64(k.Ceil))
			if c.Rate < lo-slack || c.Rate > hi+slack {
				t.Fatalf("tree %d: leaf %s: %.0f outside [%.0f, %.0f]", it, c.Handle, c.Rate, lo, hi)
			}
			for p := k.Parent; p != model.RootQdisc; p = byHandle[p].Parent {
				guaranteed[p] += c.Guaranteed
			}
		}
		// What passes a class without asking it: its leaf children's
		// guarantees and what its inner children send on their own rates
		// (at most max(rate, guarantees below)).
		unasked := map[model.Handle]float64{}
		for i, c := range res.Classes {
			k := &tree.Classes[i]
			if k.Parent == model.RootQdisc {
				continue
			}
			if c.Leaf {
				unasked[k.Parent] += c.Guaranteed
			} else {
				unasked[k.Parent] += min(c.Rate, max(float64(k.Rate), guaranteed[c.Handle]))
			}
		}
		for i, c := range res.Classes {
			k := &tree.Classes[i]
			if !c.Leaf && c.Rate > max(float64(k.Ceil), unasked[c.Handle])+slack {
				t.Fatalf("tree %d: class %s carries %.0f, above its ceil %s and what passes it unasked %.0f", it, c.Handle, c.Rate, k.Ceil, unasked[c.Handle])
			}
		}
		root := byHandle[model.RootClass]
		if root.Rate >= float64(tree.Classes[0].Rate)-slack {
			continue
		}
		for i, c := range res.Classes {
			k := &tree.Classes[i]
			if !c.Leaf || c.Rate >= float64(demand[c.Handle])-slack || c.Rate >= float64(k.Ceil)-slack {
				continue
			}
			if p := byHandle[k.Parent]; p.Handle != model.RootClass && p.LimitedBy == ByCeil {
				continue
			}
			t.Fatalf("tree %d: root has %.0f left but leaf %s (%.0f of demand %v, ceil %s) is %s", it,
				float64(tree.Classes[0].Rate)-root.Rate, c.Handle, c.Rate, demand[c.Handle], k.Ceil, c.LimitedBy)
		}
	}
}
