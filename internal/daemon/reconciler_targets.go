package daemon

import (
	"maps"
	"slices"

	"github.com/shaperd/shaperd/pkg/model"
)

// targetsEqual reports whether a and b would build the same tree with the
// same assignment, so the policy tick can skip model.Build (which
// allocates per user) when nothing changed. It compares every field;
// prefixes usually share the plan's backing arrays.
func targetsEqual(a, b *model.Targets) bool {
	if !specEqual(&a.Interface, &b.Interface) || !slices.Equal(a.Tiers, b.Tiers) || len(a.Users) != len(b.Users) ||
		!slices.Equal(a.Queues, b.Queues) || !maps.EqualFunc(a.TierQueues, b.TierQueues, slices.Equal) {
		return false
	}
	for i := range a.Users {
		x, y := &a.Users[i], &b.Users[i]
		if x.Name != y.Name || x.Tier != y.Tier || x.Rate != y.Rate || x.Ceil != y.Ceil ||
			x.Burst != y.Burst || x.CBurst != y.CBurst || x.Prio != y.Prio || !slices.Equal(x.Prefixes, y.Prefixes) ||
			!leafPtrEqual(x.Leaf, y.Leaf) {
			return false
		}
	}
	return true
}

// leafPtrEqual compares two leaf settings by value (nil only equals nil).
func leafPtrEqual(a, b *model.LeafQdisc) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func specEqual(a, b *model.InterfaceSpec) bool {
	leafEqual := leafPtrEqual(a.Leaf, b.Leaf)
	x, y := *a, *b
	x.Leaf, y.Leaf = nil, nil
	return leafEqual && x == y
}
