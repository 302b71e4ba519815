package model_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/model/modeltest"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// randomTargets draws an interface setup from a small universe of tiers,
// users and prefixes, so that two draws overlap.
func randomTargets(rng *rand.Rand) model.Targets {
	spec := model.InterfaceSpec{Name: "lan0", Shaper: model.ShaperHTB, Bandwidth: tbf.Rate(1+rng.IntN(10)) * 100 * tbf.Mbit}
	switch rng.IntN(10) {
	case 0:
		spec.Shaper = model.ShaperTBF
	case 1, 2:
		spec.Direction, spec.IFB = model.Ingress, "ifb0"
	}
	switch rng.IntN(4) {
	case 0:
		spec.Leaf = &model.LeafQdisc{Kind: "fq_codel"}
	case 1:
		spec.Leaf = &model.LeafQdisc{Kind: "bfifo", Limit: uint32(50000 + rng.IntN(2)*50000)}
	}
	var tg model.Targets
	for i := 0; i < 5; i++ {
		if rng.IntN(2) == 0 {
			r := tbf.Rate(50+rng.IntN(3)*50) * tbf.Mbit
			tg.Tiers = append(tg.Tiers, model.TierTarget{Name: fmt.Sprintf("tier%d", i), Rate: r, Ceil: r * tbf.Rate(1+rng.IntN(2))})
		}
	}
	pool := rng.Perm(120)
	for i := 0; i < 40; i++ {
		if rng.IntN(3) == 0 {
			continue
		}
		u := model.UserTarget{Name: fmt.Sprintf("user%02d", i), Tier: fmt.Sprintf("tier%d", rng.IntN(6)),
			Rate: tbf.Rate(1+rng.IntN(4)) * tbf.Mbit, Prio: uint32(rng.IntN(2))}
		u.Ceil = u.Rate * tbf.Rate(1+rng.IntN(2))
		if rng.IntN(4) == 0 {
			u.Burst = tbf.Size(20000 + rng.IntN(2)*20000)
		}
		for n := 1 + rng.IntN(3); n > 0 && len(pool) > 0; n-- {
			j := pool[0]
			pool = pool[1:]
			var p netip.Prefix
			if j%2 == 0 {
				p = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 3, byte(j)}), 32)
			} else {
				p = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 3, 0, byte(j)}), 64)
			}
			u.Prefixes = append(u.Prefixes, p)
		}
		tg.Users = append(tg.Users, u)
	}
	tg.Interface = spec
	return tg
}

// mutate damages an actual tree the way a kernel that others touched
// might look, keeping it a state the kernel can hold.
func mutate(rng *rand.Rand, tree model.Tree) model.Tree {
	tree.Filters = append([]model.Filter(nil), tree.Filters...)
	tree.Classes = append([]model.Class(nil), tree.Classes...)
	var kept []model.Filter
	for _, f := range tree.Filters {
		switch rng.IntN(12) {
		case 0:
			continue // lost filter
		case 1:
			f.Damaged = true
		case 2:
			if len(tree.Classes) > 0 {
				f.ClassID = tree.Classes[rng.IntN(len(tree.Classes))].Handle // misrouted
			}
		}
		kept = append(kept, f)
	}
	tree.Filters = kept
	for i := range tree.Classes {
		switch rng.IntN(10) {
		case 0:
			tree.Classes[i].Rate += tbf.Mbit
		case 1:
			tree.Classes[i].Quantum++
		}
	}
	if rng.IntN(5) == 0 && len(tree.Classes) > 0 {
		h := tree.Classes[rng.IntN(len(tree.Classes))].Handle
		tree.Filters = append(tree.Filters, model.Filter{Prefix: netip.MustParsePrefix("198.19.0.0/24"), Match: model.MatchDst, ClassID: h})
	}
	tree.Sort()
	return tree
}

func TestDiffRandomTreesConverge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := 0; round < 400; round++ {
		ids := model.NewAssignment()
		atg := randomTargets(rng)
		actual, err := model.Build(atg, ids)
		if err != nil {
			t.Fatalf("round %d: build actual: %v", round, err)
		}
		switch rng.IntN(8) {
		case 0:
			actual = model.Tree{Device: actual.Device}
		case 1, 2, 3, 4:
			actual = mutate(rng, actual)
		}
		wids := ids.Clone()
		if rng.IntN(3) == 0 {
			wids = model.NewAssignment() // ids not recovered: users move between classes
		}
		desired, err := model.Build(randomTargets(rng), wids)
		if err != nil {
			t.Fatalf("round %d: build desired: %v", round, err)
		}
		if cs := model.Diff(desired, desired); len(cs) != 0 {
			t.Fatalf("round %d: Diff(desired, desired) = %v", round, opsOf(cs))
		}
		cs := model.Diff(actual, desired)
		k := modeltest.NewMemKernel()
		k.Load(actual)
		if err := k.Apply(cs); err != nil {
			t.Fatalf("round %d: %v\nchanges:\n%s", round, err, changesText(cs))
		}
		got := k.Tree(desired.Device)
		if m := model.Mismatches(got, desired); len(m) != 0 {
			t.Fatalf("round %d: result differs from desired: %q\nchanges:\n%s", round, m, changesText(cs))
		}
		if again := model.Diff(got, desired); len(again) != 0 {
			t.Fatalf("round %d: second diff not empty: %v", round, opsOf(again))
		}
		if actual.Device != desired.Device {
			if old := k.Tree(actual.Device); old.Root != nil || old.Redirect != nil {
				t.Fatalf("round %d: %s still shaped after moving to %s", round, actual.Device, desired.Device)
			}
		}
		checkMinimal(t, round, actual, desired, cs)
	}
}

// checkMinimal checks that Diff touches nothing it need not: a class is
// deleted only if desired lacks it or it (or an ancestor) is re-parented or
// the root is replaced, and a class change or filter re-add has a reason.
func checkMinimal(t *testing.T, round int, actual, desired model.Tree, cs []model.Change) {
	t.Helper()
	rootReplaced := false
	for _, c := range cs {
		if c.Qdisc != nil && c.Op == model.OpDelete {
			rootReplaced = true
		}
	}
	am, wm := model.ClassMap(actual.Classes), model.ClassMap(desired.Classes)
	moved := func(h model.Handle) bool {
		for i := 0; i < 10; i++ {
			a, w := am[h], wm[h]
			if a == nil {
				return false
			}
			if w != nil && a.Parent != w.Parent {
				return true
			}
			h = a.Parent
		}
		return false
	}
	for _, c := range cs {
		switch {
		case c.Class != nil && c.Op == model.OpDelete:
			if _, want := wm[c.Class.Handle]; want && !moved(c.Class.Handle) {
				t.Fatalf("round %d: %s deletes a desired class that did not move", round, c)
			}
		case c.Class != nil && c.Op == model.OpChange:
			if model.ClassParamsEqual(*c.FromClass, *c.Class) {
				t.Fatalf("round %d: %s changes nothing", round, c)
			}
		case c.Class != nil && c.Op == model.OpAdd && !rootReplaced:
			if a, ok := am[c.Class.Handle]; ok && actual.Root != nil && !moved(a.Handle) {
				t.Fatalf("round %d: %s re-adds an existing class that did not move", round, c)
			}
		}
	}
}
