package model

import (
	"net/netip"
	"slices"
)

// AssignmentFromTree recovers user -> class minor from an actual (dumped)
// tree, so that a daemon restarted without its state file keeps every
// user's class, counters and token state. users maps each configured user
// to its prefixes.
//
// A user's class is the class most of its prefixes' filters point to (ties:
// the lowest minor), provided that class exists in actual and its minor lies
// in the user range. When two users claim the same class, the one with more
// matching prefixes wins (ties: the name that sorts first); the loser, and
// users without evidence, stay unassigned and get fresh minors from the next
// Assign. Damaged filters count as evidence too: they still name the class.
// The allocation cursor restarts after the highest user minor in actual, so
// new users do not take over the classes of removed users. Tier
// minors are recovered separately by RecoverTiers.
func AssignmentFromTree(actual Tree, users map[string][]netip.Prefix) *Assignment {
	a := NewAssignment()
	classes := classMap(actual.Classes)
	byPrefix := make(map[netip.Prefix]Handle, len(actual.Filters))
	for _, f := range actual.Filters {
		byPrefix[f.Prefix.Masked()] = f.ClassID
	}
	var cands []claim
	for _, name := range sortedKeys(users) {
		votes := map[uint16]int{}
		for _, p := range users[name] {
			id, ok := byPrefix[p.Masked()]
			if !ok || id.Major() != RootQdisc.Major() || id.Minor() < FirstUserMinor || id.Minor() > LastUserMinor {
				continue
			}
			if _, ok := classes[id]; !ok {
				continue
			}
			votes[id.Minor()]++
		}
		if c, ok := bestClaim(name, votes); ok {
			cands = append(cands, c)
		}
	}
	a.u().settle(cands)
	a.u().skipPast(actual.Classes)
	return a
}

// RecoverTiers recovers tier -> aggregate class minor from actual, given the
// users already in a (from AssignmentFromTree or a state file) and each
// user's tier (userTiers: user name -> tier name). A tier's class is the
// tier-range parent most of its users' classes hang under in actual; claims
// are settled as in AssignmentFromTree. Tiers already in a keep their minor.
func (a *Assignment) RecoverTiers(actual Tree, userTiers map[string]string) {
	classes := classMap(actual.Classes)
	votes := map[string]map[uint16]int{}
	for _, user := range sortedKeys(userTiers) {
		tier := userTiers[user]
		if _, ok := a.t().byName[tier]; ok || tier == "" {
			continue
		}
		m, ok := a.u().byName[user]
		if !ok {
			continue
		}
		c, ok := classes[MakeHandle(RootQdisc.Major(), m)]
		if !ok || c.Parent.Major() != RootQdisc.Major() {
			continue
		}
		pm := c.Parent.Minor()
		if pm < FirstTierMinor || pm > LastTierMinor {
			continue
		}
		if _, ok := classes[c.Parent]; !ok {
			continue
		}
		if votes[tier] == nil {
			votes[tier] = map[uint16]int{}
		}
		votes[tier][pm]++
	}
	var cands []claim
	for _, tier := range sortedKeys(votes) {
		if c, ok := bestClaim(tier, votes[tier]); ok {
			cands = append(cands, c)
		}
	}
	a.t().settle(cands)
	a.t().skipPast(actual.Classes)
}

// claim is a name's best-supported minor.
type claim struct {
	name  string
	minor uint16
	votes int
}

// bestClaim picks the minor with the most votes, ties to the lowest minor.
func bestClaim(name string, votes map[uint16]int) (claim, bool) {
	best := claim{name: name}
	for m, v := range votes {
		if v > best.votes || (v == best.votes && m < best.minor) {
			best.minor, best.votes = m, v
		}
	}
	return best, best.votes > 0
}

// settle grants claims, strongest first (ties: name order), to names not yet
// holding a minor, skipping minors already taken, then moves the cursor past
// the highest minor in use.
func (p *pool) settle(cands []claim) {
	slices.SortFunc(cands, func(x, y claim) int {
		if x.votes != y.votes {
			return y.votes - x.votes
		}
		if x.name < y.name {
			return -1
		}
		if x.name > y.name {
			return 1
		}
		return 0
	})
	for _, c := range cands {
		if _, has := p.byName[c.name]; has {
			continue
		}
		if _, taken := p.owner[c.minor]; taken {
			continue
		}
		p.byName[c.name] = c.minor
		p.owner[c.minor] = c.name
	}
	p.setCursor(0)
}

// skipPast moves the cursor past the highest minor of p's range among the
// classes of the root qdisc, if it is not beyond it already.
func (p *pool) skipPast(cs []Class) {
	hi := uint16(0)
	for _, c := range cs {
		if m := c.Handle.Minor(); c.Handle.Major() == RootQdisc.Major() && m >= p.lo && m <= p.hi {
			hi = max(hi, m)
		}
	}
	if hi != 0 && p.next <= hi {
		p.next = p.step(hi)
	}
}

func classMap(cs []Class) map[Handle]*Class {
	m := make(map[Handle]*Class, len(cs))
	for i := range cs {
		m[cs[i].Handle] = &cs[i]
	}
	return m
}

// RecoverNodes recovers node -> class minor from actual, given the users
// already in a and each user's node (userNodes: user name -> node name)
// and each node's parent (nodeParents: node -> parent node, "" for a
// top-level node). A node's class is the parent most of its users' classes
// (then most of its child nodes' classes) hang under in actual, a class of
// the users' range that is no user's; claims are settled as in
// AssignmentFromTree, bottom up, one level at a time. Nodes already in a
// keep their minor.
func (a *Assignment) RecoverNodes(actual Tree, userNodes, nodeParents map[string]string) {
	classes := classMap(actual.Classes)
	p := a.u()
	// parentVote adds a vote for node to the parent of the class with
	// minor m, when that parent is a free class of the users' range.
	parentVote := func(votes map[string]map[uint16]int, node string, m uint16) {
		c, ok := classes[MakeHandle(RootQdisc.Major(), m)]
		if !ok || c.Parent.Major() != RootQdisc.Major() {
			return
		}
		pm := c.Parent.Minor()
		if pm < FirstUserMinor || pm > LastUserMinor {
			return
		}
		if _, ok := classes[c.Parent]; !ok {
			return
		}
		if owner, taken := p.owner[pm]; taken && owner != nodeKey(node) {
			return
		}
		if votes[node] == nil {
			votes[node] = map[uint16]int{}
		}
		votes[node][pm]++
	}
	settle := func(votes map[string]map[uint16]int) int {
		var cands []claim
		for _, node := range sortedKeys(votes) {
			if c, ok := bestClaim(nodeKey(node), votes[node]); ok {
				cands = append(cands, c)
			}
		}
		before := len(p.byName)
		p.settle(cands)
		return len(p.byName) - before
	}
	votes := map[string]map[uint16]int{}
	for _, user := range sortedKeys(userNodes) {
		node := userNodes[user]
		if _, ok := p.byName[nodeKey(node)]; ok || node == "" {
			continue
		}
		if m, ok := p.byName[user]; ok {
			parentVote(votes, node, m)
		}
	}
	settle(votes)
	// Up the hierarchy: a node's recovered class votes for its parent.
	for range MaxNodeDepth {
		votes = map[string]map[uint16]int{}
		for _, node := range sortedKeys(nodeParents) {
			parent := nodeParents[node]
			if parent == "" {
				continue
			}
			if _, ok := p.byName[nodeKey(parent)]; ok {
				continue
			}
			if m, ok := p.byName[nodeKey(node)]; ok {
				parentVote(votes, parent, m)
			}
		}
		if settle(votes) == 0 {
			break
		}
	}
	p.skipPast(actual.Classes)
}
