package sim

import (
	"math"
	"slices"
)

// group is a class between the borrowing leaves and the lender: its ceil
// caps the sum of its leaves.
type group struct {
	node     int
	headroom float64
	members  []int // indexes into the fill's sorted cands
}

// fill shares budget among cands (one prio level of lender a) by
// progressive filling: every active leaf gets min(cap, w*λ) as λ grows,
// until the budget is used or a group between the leaves and a reaches its
// ceil (its leaves then stop there). It applies the allocations, records
// why leaves stopped and returns what was lent. higher says that a lent
// to a higher priority (a lower prio number) before.
func (s *htb) fill(a int, cands []cand, budget float64, higher bool) float64 {
	slices.SortFunc(cands, func(x, y cand) int {
		if x.t != y.t {
			if x.t < y.t {
				return -1
			}
			return 1
		}
		return x.leaf - y.leaf
	})
	var groups []group
	for ci := range cands {
		for x := s.nodes[cands[ci].leaf].parent; x != a && x >= 0; x = s.nodes[x].parent {
			g := s.nodes[x].group
			if g < 0 {
				g = len(groups)
				s.nodes[x].group = g
				groups = append(groups, group{node: x, headroom: s.nodes[x].ceil - s.nodes[x].total})
			}
			groups[g].members = append(groups[g].members, ci)
		}
	}
	defer func() {
		for _, g := range groups {
			s.nodes[g.node].group = -1
		}
	}()
	all := make([]int, len(cands))
	for i := range all {
		all[i] = i
	}
	left := budget
	for {
		lb := level(cands, all, left)
		best, bg := lb, -1
		for gi := range groups {
			if l := level(cands, groups[gi].members, groups[gi].headroom); l < best {
				best, bg = l, gi
			}
		}
		if bg < 0 {
			reason := ByParent
			if higher {
				reason = ByPrio
			}
			s.freeze(cands, all, lb, a, reason, true)
			break
		}
		left -= s.freezeGroup(cands, groups, bg, best)
	}
	lent := 0.0
	for _, c := range cands {
		if c.alloc > 0 {
			s.add(c.leaf, a, c.alloc)
			lent += c.alloc
		}
	}
	return lent
}

// level returns λ with sum over the active members of min(cap, w*λ) =
// target, or +Inf when all of them together stay below target. members are
// in ascending order of t (cap/w).
func level(cands []cand, members []int, target float64) float64 {
	w, capped := 0.0, 0.0
	for _, m := range members {
		if cands[m].active {
			w += cands[m].w
		}
	}
	if w == 0 {
		return math.Inf(1)
	}
	for _, m := range members {
		c := &cands[m]
		if !c.active {
			continue
		}
		if l := (target - capped) / w; l <= c.t {
			return max(l, 0)
		}
		capped += c.cap
		w -= c.w
		if w <= 0 {
			break
		}
	}
	return math.Inf(1)
}

// freeze gives every active member min(cap, w*λ) and deactivates it; the
// ones that stop below their cap record why (reason, or ByShare when shared
// is set and at least two of them stop together) and by.
func (s *htb) freeze(cands []cand, members []int, λ float64, by int, reason Reason, shared bool) {
	short := 0
	for _, m := range members {
		c := &cands[m]
		if c.active && c.w*λ < c.cap-s.eps {
			short++
		}
	}
	if shared && short >= 2 {
		reason = ByShare
	}
	for _, m := range members {
		c := &cands[m]
		if !c.active {
			continue
		}
		c.active = false
		c.alloc = min(c.cap, c.w*λ)
		if c.alloc < c.cap-s.eps {
			s.nodes[c.leaf].reason, s.nodes[c.leaf].by = reason, by
		}
	}
}

// freezeGroup stops group gi's active leaves at λ (the group reached its
// ceil), takes what they got from the headroom of every group they belong
// to and returns it.
func (s *htb) freezeGroup(cands []cand, groups []group, gi int, λ float64) float64 {
	g := &groups[gi]
	var active []int
	for _, m := range g.members {
		if cands[m].active {
			active = append(active, m)
		}
	}
	s.freeze(cands, active, λ, g.node, ByParent, false)
	used := 0.0
	for _, m := range active {
		used += cands[m].alloc
		for x := s.nodes[cands[m].leaf].parent; x >= 0; x = s.nodes[x].parent {
			if gx := s.nodes[x].group; gx >= 0 {
				groups[gx].headroom -= cands[m].alloc
			}
		}
	}
	return used
}
