package model

import (
	"fmt"
	"slices"

	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// buildMQ builds per-queue trees (spec.Queues > 1): an mq root and, per
// queue, an HTB qdisc with the single tree's layout. Users are placed on
// queues by ids.AssignQueues (stable, balanced by guaranteed rate) and
// get minors from their queue's own Assignment, so an interface holds up to
// Queues*MaxUsers users. The queues' root classes take t.Queues; the
// default class of each queue gets DefaultRate/Queues and DefaultCeil.
// Every tier with an aggregate class has one in every queue's tree (so a
// user's change never adds or removes one), with the queue's share of the
// tier's rate and ceil from t.TierQueues: the policy loop moves the shares
// to where the tier's users are busy (RebalanceTier), so the tier's
// aggregate holds across queues. Without t.Queues (of length Queues) or a
// tier's t.TierQueues, each queue gets its floor (QueueFloors) and an even
// share of the rest (RebalanceQueues and RebalanceTier of an idle
// interface).
//
// User and default classes get leaf qdiscs as in the single tree; the
// kernel picks their handles (a leaf's handle in the single tree is its
// class minor as major, which would collide between queue trees), from
// its range of automatic handles. That range runs out: with more than
// MaxMQUserLeaves users every class keeps the kernel's default pfifo leaf
// (the policy leaves the targets' leaves nil then, so that a Build of a
// few of the users agrees).
func buildMQ(tree *Tree, t Targets, ids *Assignment) error {
	spec := t.Interface
	n := spec.Queues
	if n > MaxQueues {
		return &FieldError{"queues", fmt.Errorf("%d queues: at most %d", n, MaxQueues)}
	}
	match, err := matchOf(spec)
	if err != nil {
		return err
	}
	leaf, err := normLeaf(spec.Leaf)
	if err != nil {
		return err
	}
	tooMany := len(t.Users) > MaxMQUserLeaves
	if tooMany {
		leaf = nil
	}
	tiers, tierNames, err := tierClasses(t.Tiers)
	if err != nil {
		return err
	}
	nodes, nodeKeys, err := nodeClasses(t.Nodes)
	if err != nil {
		return err
	}
	users, userNames, err := userClasses(t.Users, leaf, spec)
	if err != nil {
		return err
	}
	if tooMany {
		for i := range users {
			users[i].Leaf = nil
		}
	}
	filters, err := userFilters(t.Users, match)
	if err != nil {
		return err
	}
	if len(tierNames) > MaxTiers {
		return fmt.Errorf("%d tiers with an aggregate class: %w: at most %d", len(tierNames), ErrTooManyTiers, MaxTiers)
	}
	if len(userNames) > n*MaxUsers {
		return fmt.Errorf("%d users: %w: %d queues hold at most %d user classes", len(userNames), ErrTooManyUsers, n, n*MaxUsers)
	}
	if ids == nil {
		ids = NewAssignment()
	}
	// Whole subtrees go on one queue: each placement unit (a top-level
	// node, or a node right under a split one) is placed as a user is (by
	// its guaranteed rate), and the nodes and users under it follow it. A
	// split node has a class in every queue; its own users are placed one
	// by one.
	split := SplitNodes(spec, t.Nodes)
	unit := placementUnits(t.Nodes, split)
	parentOf := make(map[string]string, len(t.Nodes))
	rates := make(map[string]tbf.Rate, len(users))
	for _, c := range users {
		if c.Labels.Node == "" || split[c.Labels.Node] {
			rates[c.Labels.User] = c.Rate
		}
	}
	for i, nt := range t.Nodes {
		parentOf[nt.Name] = nt.Parent
		if unit[nt.Name] == nt.Name {
			rates[nodeKeys[i]] = nt.Rate
		}
	}
	work := ids.Clone() // ids stays unchanged on error
	work.AssignQueues(n, rates)
	for i, c := range users {
		if u := unit[c.Labels.Node]; u != "" {
			q, ok := work.Queue(nodeKey(u))
			if !ok {
				return fmt.Errorf("user %s: node %s has no target on this interface", c.Labels.User, c.Labels.Node)
			}
			_ = work.SetQueue(userNames[i], n, q) // q < n
		}
	}
	for i, nt := range t.Nodes {
		if u := unit[nt.Name]; u != "" && u != nt.Name {
			q, _ := work.Queue(nodeKey(u))
			_ = work.SetQueue(nodeKeys[i], n, q)
		}
	}
	perQueue := make([][]string, n)
	for _, u := range append(slices.Clone(userNames), nodeKeys...) {
		if isNodeKey(u) && split[u[len(nodeKeyPrefix):]] {
			for q := range perQueue {
				perQueue[q] = append(perQueue[q], u)
			}
			continue
		}
		q, _ := work.Queue(u)
		perQueue[q] = append(perQueue[q], u)
	}
	for q := 0; q < n; q++ {
		if len(perQueue[q]) > MaxUsers {
			return fmt.Errorf("queue %d: %d users: %w: a queue holds at most %d", q, len(perQueue[q]), ErrTooManyUsers, MaxUsers)
		}
		if err := work.QueueIDs(q).AssignTiers(tierNames); err != nil {
			return fmt.Errorf("queue %d: %w", q, err)
		}
		if err := work.QueueIDs(q).Assign(perQueue[q]); err != nil {
			return fmt.Errorf("queue %d: %w", q, err)
		}
	}

	defRate, defCeil := spec.DefaultRate, spec.DefaultCeil
	if defRate == 0 {
		defRate = DefaultClassRate(spec.Bandwidth)
	}
	if defCeil == 0 {
		defCeil = spec.Bandwidth
	}
	defShare := max(defRate/tbf.Rate(n), 8)
	// Without a split from the policy loop, each queue, each tier's and
	// each split node's class in it gets its floor (QueueFloors) and an
	// even share of the rest (RebalanceQueues and RebalanceTier with
	// nothing sent yet).
	idle := make([]tbf.Rate, n)
	aggregate := make(map[string]bool, len(tiers))
	for _, c := range tiers {
		aggregate[c.Labels.Tier] = true
	}
	placed := append(slices.Clone(users), nodes...)
	floors := leafFloors(n, placed, func(c *Class) int {
		k := c.Labels.User
		if c.Labels.Kind == "node" {
			k = nodeKey(c.Labels.Node)
		}
		if q, ok := work.Queue(k); ok {
			return q
		}
		return -1
	}, aggregate, split, func(node string) string { return parentOf[node] })
	qt := t.Queues
	if len(qt) != n {
		for q := range floors.Queues {
			floors.Queues[q] = max(floors.Queues[q], defShare)
		}
		qt = RebalanceQueues(spec.Bandwidth, nil, idle, floors.Queues)
	}
	tierSplit := make(map[string][]QueueTarget, len(tiers))
	for _, c := range tiers {
		name := c.Labels.Tier
		s := t.TierQueues[name]
		if len(s) != n {
			s = RebalanceTier(TierTarget{Name: name, Rate: c.Rate, Ceil: c.Ceil}, nil, idle, floors.Tiers[name])
		}
		tierSplit[name] = s
	}
	var bigNodes []Class
	nodeSplit := make(map[string][]QueueTarget, len(split))
	for i, c := range nodes {
		name := c.Labels.Node
		if !split[name] {
			continue
		}
		bigNodes = append(bigNodes, c)
		s := t.NodeQueues[name]
		if len(s) != n {
			s = RebalanceTier(TierTarget{Name: name, Rate: t.Nodes[i].Rate, Ceil: t.Nodes[i].Ceil}, nil, idle, floors.Nodes[name])
		}
		nodeSplit[name] = s
	}
	rs := spec.Framing.RateSpec()
	classes := make([]Class, 0, n*2+len(users)+len(tiers))
	queues := make([]Qdisc, n)
	tierHandle := make([]map[string]Handle, n)
	nodeHandle := make(map[string]Handle, len(nodes))
	bigHandle := make(map[string][]Handle, len(bigNodes))
	for q := 0; q < n; q++ {
		major := QueueHandle(q).Major()
		queues[q] = Qdisc{Kind: ShaperHTB, Handle: QueueHandle(q), Parent: QueueParent(q),
			DefaultMinor: DefaultClass.Minor(), SizeOverhead: spec.Framing.SizeTableOverhead()}
		sc, err := splitClasses(q, qt[q], tiers, tierSplit, bigNodes, nodeSplit, parentOf, work.QueueIDs(q), rs)
		if err != nil {
			return err
		}
		root := sc[0]
		def, err := makeClass(classSpec{rate: defShare, ceil: defCeil}, sizeLeaf(leaf, defCeil, spec), Labels{Kind: "default"})
		if err != nil {
			return fmt.Errorf("queue %d: default class: %w", q, err)
		}
		def.Handle, def.Parent, def.Framing = MakeHandle(major, DefaultClass.Minor()), root.Handle, rs
		classes = append(classes, def)
		classes = append(classes, sc...)
		tierHandle[q] = map[string]Handle{}
		for _, c := range sc[1:] {
			if c.Labels.Kind == "node" {
				bigHandle[c.Labels.Node] = append(bigHandle[c.Labels.Node], c.Handle)
			} else {
				tierHandle[q][c.Labels.Tier] = c.Handle
			}
		}
	}
	// parentIn is the class a node or user in queue q hangs from when its
	// node (or parent node) is node.
	parentIn := func(node string, q int) Handle {
		if split[node] {
			return bigHandle[node][q]
		}
		return nodeHandle[node]
	}
	for i, c := range nodes {
		if split[c.Labels.Node] {
			continue
		}
		q, _ := work.Queue(nodeKeys[i])
		m, _ := work.QueueIDs(q).Node(c.Labels.Node)
		major := QueueHandle(q).Major()
		c.Handle, c.Parent, c.Framing = MakeHandle(major, m), MakeHandle(major, RootClass.Minor()), rs
		if p := t.Nodes[i].Parent; p != "" {
			c.Parent = parentIn(p, q)
		}
		nodeHandle[c.Labels.Node] = c.Handle
		classes = append(classes, c)
	}
	userHandle := make([]Handle, len(users))
	for i, c := range users {
		q, _ := work.Queue(c.Labels.User)
		m, _ := work.QueueIDs(q).User(c.Labels.User)
		c.Handle, c.Parent, c.Framing = MakeHandle(QueueHandle(q).Major(), m), MakeHandle(QueueHandle(q).Major(), RootClass.Minor()), rs
		if c.Labels.Node != "" {
			c.Parent = parentIn(c.Labels.Node, q)
		} else if h, ok := tierHandle[q][c.Labels.Tier]; ok {
			c.Parent = h
		}
		userHandle[i] = c.Handle
		classes = append(classes, c)
	}
	for i := range filters {
		u := int(filters[i].ClassID) // the user's index, see userFilters
		filters[i].ClassID, filters[i].Labels = userHandle[u], users[u].Labels
	}
	*ids = *work
	tree.Root = &Qdisc{Kind: ShaperMQ, Handle: MQHandle}
	tree.Queues = queues
	slices.SortFunc(classes, CompareClasses)
	tree.Classes = classes
	tree.Filters = filters
	return nil
}

// splitClasses makes queue q's root class (from qt), its tier classes
// (tiers, from tierClasses, each with its share in split) and its split
// nodes' classes (big, from nodeClasses, parents first, each with its
// share in nodeSplit, under its parent's (parentOf) class in the queue or
// the root class), with the tier and node minors of ids (the queue's
// Assignment): the classes a queue's share of the split sets. The root
// class comes first.
func splitClasses(q int, qt QueueTarget, tiers []Class, split map[string][]QueueTarget, big []Class, nodeSplit map[string][]QueueTarget, parentOf map[string]string, ids *Assignment, rs psched.Framing) ([]Class, error) {
	major := QueueHandle(q).Major()
	root, err := makeClass(classSpec{rate: qt.Rate, ceil: qt.Ceil}, nil, Labels{Kind: "root"})
	if err != nil {
		return nil, fmt.Errorf("queue %d: root class: %w", q, err)
	}
	root.Handle, root.Parent, root.Framing = MakeHandle(major, RootClass.Minor()), QueueHandle(q), rs
	out := make([]Class, 0, 1+len(tiers)+len(big))
	out = append(out, root)
	for _, c := range tiers {
		name := c.Labels.Tier
		share := split[name][q]
		tc, err := makeClass(classSpec{rate: share.Rate, ceil: share.Ceil, burst: c.Burst, cburst: c.CBurst}, nil, c.Labels)
		if err != nil {
			return nil, fmt.Errorf("queue %d: tier %s: %w", q, name, err)
		}
		m, ok := ids.Tier(name)
		if !ok {
			return nil, fmt.Errorf("queue %d: tier %s has no class id", q, name)
		}
		tc.Handle, tc.Parent, tc.Framing = MakeHandle(major, m), root.Handle, rs
		out = append(out, tc)
	}
	for _, c := range big {
		name := c.Labels.Node
		share := nodeSplit[name][q]
		nc, err := makeClass(classSpec{rate: share.Rate, ceil: share.Ceil, burst: c.Burst, cburst: c.CBurst}, nil, c.Labels)
		if err != nil {
			return nil, fmt.Errorf("queue %d: node %s: %w", q, name, err)
		}
		m, ok := ids.Node(name)
		if !ok {
			return nil, fmt.Errorf("queue %d: node %s has no class id", q, name)
		}
		nc.Handle, nc.Parent, nc.Framing = MakeHandle(major, m), root.Handle, rs
		if p := parentOf[name]; p != "" {
			pm, ok := ids.Node(p)
			if !ok {
				return nil, fmt.Errorf("queue %d: node %s: parent %s has no class id", q, name, p)
			}
			nc.Parent = MakeHandle(major, pm)
		}
		out = append(out, nc)
	}
	return out, nil
}

// SplitClasses returns the classes of t's per-queue trees that its split
// sets (t.Queues, t.TierQueues and t.NodeQueues, all complete): each
// queue's root class and each tier's and each split node's class in it, as
// Build makes them, with the class ids of ids (a Build's). The policy loop
// changes just these when it moves the split, without building the whole
// tree.
func SplitClasses(t Targets, ids *Assignment) ([]Class, error) {
	n := t.Interface.Queues
	if n < 2 || len(t.Queues) != n || ids.QueueCount() != n {
		return nil, fmt.Errorf("interface %s: no split of %d queues", t.Interface.Name, n)
	}
	tiers, _, err := tierClasses(t.Tiers)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", t.Interface.Name, err)
	}
	for _, c := range tiers {
		if len(t.TierQueues[c.Labels.Tier]) != n {
			return nil, fmt.Errorf("interface %s: tier %s: no split of %d queues", t.Interface.Name, c.Labels.Tier, n)
		}
	}
	big, parentOf, err := splitNodeClasses(t)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", t.Interface.Name, err)
	}
	for _, c := range big {
		if len(t.NodeQueues[c.Labels.Node]) != n {
			return nil, fmt.Errorf("interface %s: node %s: no split of %d queues", t.Interface.Name, c.Labels.Node, n)
		}
	}
	rs := t.Interface.Framing.RateSpec()
	out := make([]Class, 0, n*(1+len(tiers)+len(big)))
	for q := 0; q < n; q++ {
		cs, err := splitClasses(q, t.Queues[q], tiers, t.TierQueues, big, t.NodeQueues, parentOf, ids.QueueIDs(q), rs)
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", t.Interface.Name, err)
		}
		out = append(out, cs...)
	}
	return out, nil
}

// splitNodeClasses returns the classes (from nodeClasses, without handles)
// of t's split nodes (SplitNodes), parents first, and each one's parent
// ("" for a top-level node).
func splitNodeClasses(t Targets) ([]Class, map[string]string, error) {
	split := SplitNodes(t.Interface, t.Nodes)
	if len(split) == 0 {
		return nil, nil, nil
	}
	var big []NodeTarget
	parentOf := make(map[string]string, len(split))
	for _, nt := range t.Nodes {
		if split[nt.Name] {
			big = append(big, nt)
			parentOf[nt.Name] = nt.Parent
		}
	}
	cs, _, err := nodeClasses(big)
	return cs, parentOf, err
}

// SplitOf returns the split per-queue tree t holds, SplitClasses' inverse:
// each queue's root class and each tier's and each split node's class in
// each queue, tiers and nodes named by ids (a Build's). ok is false unless
// t has a root class in every queue; a tier or node without a class in
// every queue is left out.
func SplitOf(t *Tree, ids *Assignment) (split MQSplit, ok bool) {
	n := len(t.Queues)
	if n < 2 || ids.QueueCount() != n {
		return MQSplit{}, false
	}
	split = MQSplit{Queues: make([]QueueTarget, n), Tiers: map[string][]QueueTarget{}, Nodes: map[string][]QueueTarget{}}
	roots := 0
	seenTier, seenNode := map[string]int{}, map[string]int{}
	put := func(m map[string][]QueueTarget, seen map[string]int, name string, q int, share QueueTarget) {
		if m[name] == nil {
			m[name] = make([]QueueTarget, n)
		}
		m[name][q] = share
		seen[name]++
	}
	for _, c := range t.Classes {
		q := QueueOf(c.Handle)
		if q < 0 || q >= n {
			continue
		}
		share := QueueTarget{Rate: c.Rate, Ceil: c.Ceil}
		m := c.Handle.Minor()
		if m == RootClass.Minor() {
			split.Queues[q] = share
			roots++
		} else if tier, ok := ids.QueueIDs(q).TierByMinor(m); ok && m >= FirstTierMinor && m <= LastTierMinor {
			put(split.Tiers, seenTier, tier, q, share)
		} else if node, ok := ids.QueueIDs(q).NodeByMinor(m); ok && m >= FirstUserMinor && m <= LastUserMinor {
			put(split.Nodes, seenNode, node, q, share)
		}
	}
	for _, c := range []struct {
		m    map[string][]QueueTarget
		seen map[string]int
	}{{split.Tiers, seenTier}, {split.Nodes, seenNode}} {
		for name, k := range c.seen {
			if k != n {
				delete(c.m, name)
			}
		}
	}
	return split, roots == n
}
