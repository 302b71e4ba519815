package config

import (
	"net/netip"
	"slices"
)

// addrEntry is one address of one user, for overlap detection.
type addrEntry struct {
	prefix netip.Prefix
	user   int    // index in the users file
	table  string // the user's key path ("user[3]"), for messages
	at     int    // the index in the user's addresses
}

// path returns the address's key path, for messages: formatted only when
// one needs it.
func (e addrEntry) path() string { return index(join(e.table, "addresses"), e.at) }

// overlaps returns every pair of indexes (i, j) into entries whose
// prefixes overlap (one contains the other, or they are equal). It sorts
// once and keeps a stack of the prefixes that contain the current one,
// which is at most 129 deep, so it takes O(n log n + pairs) time.
func overlaps(entries []addrEntry) [][2]int {
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		pa, pb := entries[a].prefix, entries[b].prefix
		if c := pa.Addr().Compare(pb.Addr()); c != 0 {
			return c
		}
		if c := pa.Bits() - pb.Bits(); c != 0 {
			return c
		}
		return a - b
	})
	var pairs [][2]int
	var stack []int
	for _, i := range order {
		p := entries[i].prefix
		for len(stack) > 0 {
			top := entries[stack[len(stack)-1]].prefix
			if top.Addr().Is4() == p.Addr().Is4() && top.Contains(p.Addr()) {
				break
			}
			stack = stack[:len(stack)-1]
		}
		for _, j := range stack {
			pairs = append(pairs, [2]int{j, i})
		}
		stack = append(stack, i)
	}
	return pairs
}
