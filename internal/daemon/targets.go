package daemon

import (
	"slices"

	"github.com/shaperd/shaperd/pkg/model"
)

// targetsEqual reports whether a and b would build the same tree with the
// same assignment, so the policy tick can skip model.Build (which
// allocates per user) when nothing changed. It compares every field;
// prefixes usually share the plan's backing arrays.
func targetsEqual(a, b *model.Targets) bool {
	if !specEqual(&a.Interface, &b.Interface) || !slices.Equal(a.Tiers, b.Tiers) || len(a.Users) != len(b.Users) {
		return false
	}
	for i := range a.Users {
		x, y := &a.Users[i], &b.Users[i]
		if x.Name != y.Name || x.Tier != y.Tier || x.Rate != y.Rate || x.Ceil != y.Ceil ||
			x.Burst != y.Burst || x.CBurst != y.CBurst || x.Prio != y.Prio || !slices.Equal(x.Prefixes, y.Prefixes) {
			return false
		}
	}
	return true
}

func specEqual(a, b *model.InterfaceSpec) bool {
	leafEqual := (a.Leaf == nil) == (b.Leaf == nil) && (a.Leaf == nil || *a.Leaf == *b.Leaf)
	x, y := *a, *b
	x.Leaf, y.Leaf = nil, nil
	return leafEqual && x == y
}
