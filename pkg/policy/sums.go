package policy

import "github.com/shaperd/shaperd/pkg/model"

// guaranteeSums caches, for one InterfaceResult, the sum of the
// guaranteed rates (Targets as they are, scaled or not) of each parent's
// children: the root's (the default class, the tier aggregates, the
// top-level nodes and the users of neither a node nor an aggregate), each
// node's and each tier aggregate's. A single user's change then checks its
// parent in O(nodes + tiers) instead of summing every user again. The
// changes that move one user's rate (UpdateUser, AddUser, RemoveUser)
// keep it up to date; anything else drops it (invalidateSums) and the
// next use sums again. owner is the InterfaceResult it was made for: a
// copy of the result (another address) does not use it.
type guaranteeSums struct {
	owner *InterfaceResult
	sums  map[parentKey]uint64
}

// sums returns ir's guarantee sums, summing them when there are none
// cached (or the cache belongs to another InterfaceResult).
func (ir *InterfaceResult) sums() map[parentKey]uint64 {
	if ir.gsums != nil && ir.gsums.owner == ir {
		return ir.gsums.sums
	}
	tg := &ir.Targets
	aggregate := map[string]int{}
	for i, t := range tg.Tiers {
		aggregate[t.Name] = i
	}
	sums := map[parentKey]uint64{{}: uint64(tg.Interface.DefaultRate)}
	for _, t := range tg.Tiers {
		sums[parentKey{}] += uint64(t.Rate)
	}
	for _, n := range tg.Nodes {
		k := parentKey{}
		if n.Parent != "" {
			k = parentKey{"node", n.Parent}
		}
		sums[k] += uint64(n.Rate)
	}
	for j := range tg.Users {
		kind, name := parentOf(&tg.Users[j], aggregate)
		sums[parentKey{kind, name}] += uint64(tg.Users[j].Rate)
	}
	ir.gsums = &guaranteeSums{owner: ir, sums: sums}
	return sums
}

// userParent is the parent key of u on ir (see parentOf).
func (ir *InterfaceResult) userParent(u *model.UserTarget) parentKey {
	if u.Node != "" {
		return parentKey{"node", u.Node}
	}
	for _, t := range ir.Targets.Tiers {
		if t.Name == u.Tier {
			return parentKey{"tier", u.Tier}
		}
	}
	return parentKey{}
}

// userRateChanged records in the cached sums (if any) that user j's
// target rate changed from old to its current one.
func (ir *InterfaceResult) userRateChanged(j int, old uint64) {
	if ir.gsums == nil || ir.gsums.owner != ir {
		return
	}
	u := &ir.Targets.Users[j]
	ir.gsums.sums[ir.userParent(u)] += uint64(u.Rate) - old // wraps back when lower
}

// invalidateSums drops ir's cached sums: the next use sums again.
func (ir *InterfaceResult) invalidateSums() { ir.gsums = nil }

// userIndex maps user names to their index in one InterfaceResult's
// Targets.Users, so that a single user's change finds its entry without
// scanning 100,000 of them. AddUser and RemoveUser keep it up to date;
// owner works as guaranteeSums' does, and an entry that does not name
// the user it points at (or a length that moved without them) makes it
// built again.
type userIndex struct {
	owner *InterfaceResult
	at    map[string]int
	n     int
}

// userAt returns the index of user in ir.Targets.Users, or -1.
func (ir *InterfaceResult) userAt(user string) int {
	us := ir.Targets.Users
	x := ir.uidx
	if x == nil || x.owner != ir || x.n != len(us) {
		x = &userIndex{owner: ir, at: make(map[string]int, len(us)), n: len(us)}
		for j := range us {
			x.at[us[j].Name] = j
		}
		ir.uidx = x
	}
	j, ok := x.at[user]
	if !ok {
		return -1
	}
	if j >= len(us) || us[j].Name != user {
		ir.uidx = nil // stale: build again
		return ir.userAt(user)
	}
	return j
}

// userAppended records in the index (if any) that the last of
// Targets.Users was just appended.
func (ir *InterfaceResult) userAppended() {
	if x := ir.uidx; x != nil && x.owner == ir && x.n == len(ir.Targets.Users)-1 {
		x.at[ir.Targets.Users[x.n].Name] = x.n
		x.n++
	}
}

// userSwapRemoved records in the index (if any) that user, at j, was
// removed by moving the last user into its place.
func (ir *InterfaceResult) userSwapRemoved(user string, j int) {
	x := ir.uidx
	if x == nil || x.owner != ir || x.n != len(ir.Targets.Users)+1 {
		ir.uidx = nil
		return
	}
	delete(x.at, user)
	x.n--
	if j < x.n {
		x.at[ir.Targets.Users[j].Name] = j
	}
}
