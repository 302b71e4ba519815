package model

import (
	"cmp"
	"slices"
)

// CompareClasses orders classes by Handle, the order of Tree.Classes.
func CompareClasses(a, b Class) int { return cmp.Compare(a.Handle, b.Handle) }

// CompareFilters orders filters by Prefix (IPv4 before IPv6, then address,
// then prefix length, as netip.Prefix.Compare does) and then Match, the
// order of Tree.Filters.
func CompareFilters(a, b Filter) int {
	if c := a.Prefix.Compare(b.Prefix); c != 0 {
		return c
	}
	return cmp.Compare(a.Match, b.Match)
}

// Sort puts t.Classes and t.Filters in their documented order. Build
// returns sorted trees; pkg/kernel calls Sort on dumped trees.
func (t *Tree) Sort() {
	slices.SortFunc(t.Classes, CompareClasses)
	slices.SortFunc(t.Filters, CompareFilters)
}
