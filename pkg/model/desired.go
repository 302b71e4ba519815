package model

import (
	"fmt"
	"maps"
	"slices"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Desired is one interface's desired tree, kept in step with its targets
// one operation at a time: the targets, the class ids (Assignment) and the
// Tree built from them, with an index of the classes by handle. Each
// operation changes all of them together and returns the kernel changes
// that take the tree before it to the tree after it, so that a change of a
// few users costs what those users cost, not what the interface holds
// (100,000 users build and diff in about 170 ms; one user's class in
// microseconds).
//
// The invariant, property-tested: after any sequence of operations the
// tree equals Build of the targets with the same Assignment, and applying
// every operation's changes in order to the first tree gives that tree too.
//
// A Desired is not safe for concurrent use; Tree and Targets return views
// of its own state that the next operation changes.
type Desired struct {
	ids     *Assignment
	targets Targets
	tree    Tree
	built   bool
	// byHandle indexes tree.Classes; userAt indexes targets.Users by
	// name (nil: not built yet, see userIndex).
	byHandle map[Handle]int
	userAt   map[string]int
	// nodeAt indexes targets.Nodes by name (nil: not built yet).
	nodeAt map[string]int
	// filterAt indexes tree.Filters by prefix and match (nil: not built
	// yet, see filterIndex); a key of several filters is not indexed.
	filterAt map[filterKey]int
	watch    func([]ClassEdit)
}

// ClassEdit says how one operation moved the classes of a Desired's tree,
// for a caller that keeps its own copy of them (e.g. for metrics): OpAdd
// appended a class at Index, OpDelete removed the class at Index by moving
// the last one into its place, OpChange replaced the class at Index. Reset
// means the classes were replaced wholesale (Set): copy them again.
type ClassEdit struct {
	Op    Op
	Index int
	Reset bool
}

// Step is what one operation did to the kernel's view: the changes that
// take the tree before it to the tree after it, in the order Diff gives.
// Rebuilt is true when the operation could not be done in place and the
// whole tree was built again (per-queue trees before their split is
// known); Changes is then the Diff of the two whole trees.
type Step struct {
	Changes []Change
	Rebuilt bool
}

// UserRates are a user's new rates and bucket sizes (SetUserRates).
type UserRates struct {
	Name          string
	Rate, Ceil    tbf.Rate
	Burst, CBurst tbf.Size
}

// NewDesired returns a Desired without a tree, naming classes with ids
// (nil: a fresh Assignment). The Desired owns ids from now on: every
// operation may assign and release minors in it.
func NewDesired(ids *Assignment) *Desired {
	if ids == nil {
		ids = NewAssignment()
	}
	return &Desired{ids: ids}
}

// IDs returns the Assignment the tree's classes are named by.
func (d *Desired) IDs() *Assignment { return d.ids }

// Targets returns the targets the tree was built from (read-only).
func (d *Desired) Targets() *Targets { return &d.targets }

// Tree returns the desired tree (read-only); its Root is nil before the
// first Set.
func (d *Desired) Tree() *Tree { return &d.tree }

// User returns the target of the user name, if the tree has the user.
func (d *Desired) User(name string) (UserTarget, bool) {
	if j := d.userIndex(name); j >= 0 {
		return d.targets.Users[j], true
	}
	return UserTarget{}, false
}

// Node returns the target of node name, if the tree has the node.
func (d *Desired) Node(name string) (NodeTarget, bool) {
	if j := d.nodeIndex(name); j >= 0 {
		return d.targets.Nodes[j], true
	}
	return NodeTarget{}, false
}

// Built reports whether a Set has built a tree.
func (d *Desired) Built() bool { return d.built }

// Index returns the index of the class with handle h in Tree().Classes.
// The classes are sorted by handle after Set; the operations since then
// append and swap-remove, so do not sort Tree().Classes in place.
func (d *Desired) Index(h Handle) (int, bool) {
	i, ok := d.byHandle[h]
	return i, ok
}

// Watch calls f after each operation with how it moved the classes (nil:
// stop). f must not call back into d.
func (d *Desired) Watch(f func([]ClassEdit)) { d.watch = f }

// Set builds the tree from tg and returns the changes from the tree before
// (none before the first Set: the caller compares with the kernel). When
// tg builds the same tree as the targets in force nothing is built. On a
// Build error nothing changes. For per-queue trees, the split Build chose
// for queues and tiers tg leaves unsplit is written back into Targets, so
// that SetSplit and the caller start from what the kernel gets.
func (d *Desired) Set(tg Targets) (Step, error) {
	if d.built && targetsEqual(&d.targets, &tg) {
		return Step{}, nil
	}
	tree, err := Build(tg, d.ids)
	if err != nil {
		return Step{}, err
	}
	var step Step
	if d.built {
		step = Step{Changes: Diff(d.tree, tree), Rebuilt: true}
	}
	d.setTree(tg, tree)
	return step, nil
}

// setTree takes tree, built from tg, as the desired tree.
func (d *Desired) setTree(tg Targets, tree Tree) {
	d.targets, d.tree, d.built = tg, tree, true
	d.byHandle = make(map[Handle]int, len(tree.Classes))
	for i, c := range tree.Classes {
		d.byHandle[c.Handle] = i
	}
	d.userAt, d.nodeAt, d.filterAt = nil, nil, nil
	d.completeSplit()
	d.notify([]ClassEdit{{Reset: true}})
}

// notify hands edits to the watcher.
func (d *Desired) notify(edits []ClassEdit) {
	if d.watch != nil && len(edits) > 0 {
		d.watch(edits)
	}
}

// SetUserRates gives the users in rs their new rates and bucket sizes,
// rebuilding only their classes; users without a class are skipped. It
// returns one OpChange per class whose kernel parameters differ.
func (d *Desired) SetUserRates(rs []UserRates) (Step, error) {
	if !d.built {
		return Step{}, errNotBuilt
	}
	if d.targets.Interface.Queues > 1 && !d.splitComplete() {
		tg := d.withUser(nil, nil)
		for _, r := range rs {
			for j := range tg.Users {
				if u := &tg.Users[j]; u.Name == r.Name {
					u.Rate, u.Ceil, u.Burst, u.CBurst = r.Rate, r.Ceil, r.Burst, r.CBurst
				}
			}
		}
		return d.rebuild(tg)
	}
	var mini Targets
	names := make([]string, 0, len(rs))
	at := make([]int, 0, len(rs))
	var nodes []string
	for _, r := range rs {
		j := d.userIndex(r.Name)
		if j < 0 {
			continue
		}
		u := d.targets.Users[j]
		u.Rate, u.Ceil, u.Burst, u.CBurst = r.Rate, r.Ceil, r.Burst, r.CBurst
		names = append(names, u.Name)
		at = append(at, j)
		mini.Users = append(mini.Users, u)
		if u.Node != "" {
			nodes = append(nodes, u.Node)
		}
	}
	if len(mini.Users) == 0 {
		return Step{}, nil
	}
	users := mini.Users
	mini = d.miniTargets(d.chains(nodes...))
	mini.Users = users
	ids, err := d.miniIDs(mini.Nodes, names...)
	if err != nil {
		return Step{}, err
	}
	tree, err := Build(mini, ids)
	if err != nil {
		return Step{}, err
	}
	for k, j := range at {
		d.targets.Users[j] = mini.Users[k]
	}
	var step Step
	var edits []ClassEdit
	for _, c := range tree.Classes {
		if c.Labels.Kind != "user" {
			continue
		}
		i, ok := d.byHandle[c.Handle]
		if !ok {
			continue
		}
		old := d.tree.Classes[i]
		if ClassParamsEqual(old, c) && old.Parent == c.Parent {
			continue
		}
		d.tree.Classes[i] = c
		edits = append(edits, ClassEdit{Op: OpChange, Index: i})
		step.Changes = append(step.Changes, Change{Op: OpChange, Device: d.tree.Device, Class: &c, FromClass: &old})
	}
	d.notify(edits)
	return step, nil
}

// PutUser adds user u, or replaces the user of that name (its rates, tier,
// prefixes, leaf), building only that user's class and filters; a new user
// gets a free class minor (and under per-queue trees a queue,
// Assignment.PlaceUser).
func (d *Desired) PutUser(u UserTarget) (Step, error) {
	var old *UserTarget
	if j := d.userIndex(u.Name); j >= 0 {
		o := d.targets.Users[j]
		old = &o
	}
	return d.patchUser(u.Name, old, &u)
}

// RemoveUser removes the user name's class and filters; a user without
// one changes nothing. The user's class minor (and queue) stay assigned
// until the next Set releases them, so that a user removed and added again
// meanwhile gets its class (and counters' history) back.
func (d *Desired) RemoveUser(name string) (Step, error) {
	j := d.userIndex(name)
	if j < 0 {
		return Step{}, nil
	}
	old := d.targets.Users[j]
	return d.patchUser(name, &old, nil)
}

// SetSplit gives per-queue trees the split s: only the classes it sets
// (each queue's root class and each tier's and split node's class in it,
// SplitClasses) change, in place. When the tree lacks one of those classes
// it is built again (Step.Rebuilt).
func (d *Desired) SetSplit(s MQSplit) (Step, error) {
	if !d.built {
		return Step{}, errNotBuilt
	}
	tg := d.targets
	tg.Queues, tg.TierQueues, tg.NodeQueues = s.Queues, s.Tiers, s.Nodes
	return d.patchSplit(tg)
}

// patchSplit takes the targets tg, which differ from the ones in force in
// their split or in a split node's rates only, changing just the classes
// SplitClasses makes (or building again when the tree lacks one).
func (d *Desired) patchSplit(tg Targets) (Step, error) {
	cs, err := SplitClasses(tg, d.ids)
	if err != nil {
		return d.rebuild(tg)
	}
	var changes []Change
	for i := range cs {
		j, ok := d.byHandle[cs[i].Handle]
		if !ok || j >= len(d.tree.Classes) || d.tree.Classes[j].Handle != cs[i].Handle {
			return d.rebuild(tg)
		}
		if was := d.tree.Classes[j]; !ClassParamsEqual(was, cs[i]) {
			changes = append(changes, Change{Op: OpChange, Device: d.tree.Device, Class: &cs[i], FromClass: &was})
		}
	}
	d.targets = tg
	d.patchTree(changes)
	return Step{Changes: changes}, nil
}

// errNotBuilt is the error of an incremental operation before Set.
var errNotBuilt = fmt.Errorf("no desired tree yet: set the targets first")

// rebuild is Set of tg, reported as a rebuild (also when nothing changed).
func (d *Desired) rebuild(tg Targets) (Step, error) {
	step, err := d.Set(tg)
	step.Rebuilt = true
	return step, err
}

// patchUser changes one user's objects from old to new (nil: the user is
// not there): both are built as trees of just that user (with the
// interface's tiers, and under per-queue trees the queues' split, under
// the user's own minor and queue); their Diff is the kernel's change, and
// the targets and tree take the same change.
func (d *Desired) patchUser(name string, old, new *UserTarget) (Step, error) {
	if !d.built {
		return Step{}, errNotBuilt
	}
	if d.targets.Interface.Queues > 1 && (!d.splitComplete() || old != nil && new != nil && d.unitOf(old.Node) != d.unitOf(new.Node)) {
		// (A user moved to a node placed elsewhere moves to its queue: a
		// class cannot move between queues' trees.)
		return d.rebuild(d.withUser(old, new))
	}
	if err := d.placeUser(name, new); err != nil {
		return Step{}, err
	}
	var nodes []string
	for _, u := range []*UserTarget{old, new} {
		if u != nil && u.Node != "" {
			nodes = append(nodes, u.Node)
		}
	}
	chains := d.chains(nodes...)
	build := func(u *UserTarget) (Tree, error) {
		ids, err := d.miniIDs(chains, name)
		if err != nil {
			return Tree{}, err
		}
		mini := d.miniTargets(chains)
		if u != nil {
			mini.Users = []UserTarget{*u}
		}
		return Build(mini, ids)
	}
	before, err := build(old)
	if err != nil {
		return Step{}, fmt.Errorf("user %s: %w", name, err)
	}
	after, err := build(new)
	if err != nil {
		return Step{}, fmt.Errorf("user %s: %w", name, err)
	}
	changes := Diff(before, after)
	d.putTarget(name, new)
	d.patchTree(changes)
	return Step{Changes: changes}, nil
}

// putTarget sets user's target to new (nil: removes it, the last user
// taking its place).
func (d *Desired) putTarget(user string, new *UserTarget) {
	j := d.userIndex(user)
	us := d.targets.Users
	switch {
	case new == nil && j >= 0:
		last := len(us) - 1
		if j < last {
			us[j] = us[last]
			if d.userAt != nil {
				d.userAt[us[j].Name] = j
			}
		}
		us[last] = UserTarget{}
		d.targets.Users = us[:last]
		if d.userAt != nil {
			delete(d.userAt, user)
		}
	case new != nil && j >= 0:
		us[j] = *new
	case new != nil:
		d.targets.Users = append(us, *new)
		if d.userAt != nil {
			d.userAt[user] = len(d.targets.Users) - 1
		}
	}
}

// userIndex returns the index of user in targets.Users, or -1.
func (d *Desired) userIndex(user string) int {
	if d.userAt == nil {
		d.userAt = make(map[string]int, len(d.targets.Users))
		for j, u := range d.targets.Users {
			d.userAt[u.Name] = j
		}
	}
	if j, ok := d.userAt[user]; ok {
		return j
	}
	return -1
}

// patchTree applies changes (of one user's class and filters, or of a
// queue split) to the tree in place: an add appends, a delete moves the
// last class (filter) into the gap, so that only that one's index changes.
// The targets have taken the change already.
func (d *Desired) patchTree(changes []Change) {
	var edits []ClassEdit
	classes, filters := d.tree.Classes, d.tree.Filters
	for _, c := range changes {
		switch {
		case c.Class != nil && c.Op == OpAdd:
			classes = append(classes, *c.Class)
			d.byHandle[c.Class.Handle] = len(classes) - 1
			edits = append(edits, ClassEdit{Op: OpAdd, Index: len(classes) - 1})
		case c.Class != nil && c.Op == OpDelete:
			h := c.Class.Handle
			i, ok := d.byHandle[h]
			if !ok || i >= len(classes) || classes[i].Handle != h {
				if i = slices.IndexFunc(classes, func(x Class) bool { return x.Handle == h }); i < 0 {
					continue
				}
			}
			last := len(classes) - 1
			classes[i] = classes[last]
			classes[last] = Class{}
			classes = classes[:last]
			delete(d.byHandle, h)
			if i < last {
				d.byHandle[classes[i].Handle] = i
			}
			edits = append(edits, ClassEdit{Op: OpDelete, Index: i})
		case c.Class != nil && c.Op == OpChange:
			if i, ok := d.byHandle[c.Class.Handle]; ok {
				classes[i] = *c.Class
				edits = append(edits, ClassEdit{Op: OpChange, Index: i})
			}
		case c.Filter != nil && c.Op == OpAdd:
			filters = append(filters, *c.Filter)
			at := d.filterIndex(filters[:len(filters)-1])
			k := keyOf(*c.Filter)
			if _, dup := at[k]; dup {
				d.filterAt = nil // several filters of one key: look them up by scanning
			} else {
				at[k] = len(filters) - 1
			}
		case c.Filter != nil && c.Op == OpDelete:
			filters = d.deleteFilter(filters, keyOf(*c.Filter))
		}
	}
	d.tree.Classes, d.tree.Filters = classes, filters
	d.notify(edits)
}

// filterIndex returns filterAt, building it from filters when there is
// none.
func (d *Desired) filterIndex(filters []Filter) map[filterKey]int {
	if d.filterAt != nil {
		return d.filterAt
	}
	at := make(map[filterKey]int, len(filters))
	for i, f := range filters {
		at[keyOf(f)] = i
	}
	if len(at) != len(filters) {
		return at // not kept: deleteFilter scans
	}
	d.filterAt = at
	return at
}

// deleteFilter removes the filters of key k from filters, the last one
// taking each one's place, and returns the shorter slice.
func (d *Desired) deleteFilter(filters []Filter, k filterKey) []Filter {
	at := d.filterIndex(filters)
	if d.filterAt == nil {
		// Several filters share a key: every one of them goes.
		for i := 0; i < len(filters); {
			if filters[i].Prefix == k.prefix && filters[i].Match == k.match {
				last := len(filters) - 1
				filters[i] = filters[last]
				filters = filters[:last]
				continue
			}
			i++
		}
		return filters
	}
	i, ok := at[k]
	if !ok {
		return filters
	}
	last := len(filters) - 1
	filters[i] = filters[last]
	filters[last] = Filter{}
	filters = filters[:last]
	delete(at, k)
	if i < last {
		at[keyOf(filters[i])] = i
	}
	return filters
}

// placeUser gives user, when it has no class yet, a free minor and under
// per-queue trees a queue (new is its target: its rate places it).
func (d *Desired) placeUser(user string, new *UserTarget) error {
	ids, have := d.ids, len(d.targets.Users)
	if n := d.targets.Interface.Queues; n > 1 {
		var rate tbf.Rate
		if new != nil {
			rate = new.Rate
		}
		q, ok := 0, false
		if unit := d.unitOf(nodeOf(new)); unit != "" {
			// A node's users are on its placement unit's queue.
			if q, ok = d.ids.Queue(nodeKey(unit)); ok {
				_ = d.ids.SetQueue(user, n, q) // q < n
			}
		} else {
			q, ok = d.ids.PlaceUser(user, rate)
		}
		if !ok {
			return fmt.Errorf("user %s: no queue placement", user)
		}
		ids, have = d.ids.QueueIDs(q), have/n
	} else {
		have += len(d.targets.Nodes) // node classes share the users' minors
	}
	if _, ok := ids.User(user); ok {
		return nil
	}
	m, ok := freeMinor(ids, have)
	if !ok {
		return fmt.Errorf("user %s: %w", user, ErrTooManyUsers)
	}
	return ids.SetUser(user, m)
}

// freeMinor returns a user class minor no user holds in ids, looking from
// after the first n (users are handed minors from the start of the range).
func freeMinor(ids *Assignment, n int) (uint16, bool) {
	span := int(LastUserMinor) - int(FirstUserMinor) + 1
	for k := 0; k < span; k++ {
		m := uint16(int(FirstUserMinor) + (n+k)%span)
		if _, held := ids.u().nameOf(m); !held {
			return m, true
		}
	}
	return 0, false
}

// miniIDs returns a fresh Assignment with the tier minors (in every
// queue's tree under per-queue trees) and the users' minors (and queues):
// what a Build of just these users needs to name their classes as the
// tree does. Each build gets its own: Build releases the minors of users
// it is not given. Users without a class are left out.
func (d *Desired) miniIDs(nodes []NodeTarget, users ...string) (*Assignment, error) {
	ids := NewAssignment()
	n := d.targets.Interface.Queues
	if n < 2 {
		for _, nt := range nodes {
			if m, ok := d.ids.Node(nt.Name); ok {
				if err := ids.SetNode(nt.Name, m); err != nil {
					return nil, err
				}
			}
		}
		for _, t := range d.targets.Tiers {
			if m, ok := d.ids.Tier(t.Name); ok {
				if err := ids.SetTier(t.Name, m); err != nil {
					return nil, fmt.Errorf("tier %s: %w", t.Name, err)
				}
			}
		}
		for _, u := range users {
			if m, ok := d.ids.User(u); ok {
				if err := ids.SetUser(u, m); err != nil {
					return nil, err
				}
			}
		}
		return ids, nil
	}
	for _, u := range users {
		q, ok := d.ids.Queue(u)
		if !ok {
			continue
		}
		m, ok := d.ids.QueueIDs(q).User(u)
		if !ok {
			continue
		}
		if err := ids.SetQueue(u, n, q); err != nil {
			return nil, err
		}
		if err := ids.QueueIDs(q).SetUser(u, m); err != nil {
			return nil, err
		}
	}
	split := SplitNodes(d.targets.Interface, nodes)
	for _, nt := range nodes {
		k := nodeKey(nt.Name)
		if split[nt.Name] {
			// In every queue's tree.
			for q := 0; q < n; q++ {
				if m, ok := d.ids.QueueIDs(q).Node(nt.Name); ok {
					ids.UseQueues(n)
					if err := ids.QueueIDs(q).SetNode(nt.Name, m); err != nil {
						return nil, err
					}
				}
			}
			continue
		}
		q, ok := d.ids.Queue(k)
		if !ok {
			continue
		}
		m, ok := d.ids.QueueIDs(q).Node(nt.Name)
		if !ok {
			continue
		}
		if err := ids.SetQueue(k, n, q); err != nil {
			return nil, err
		}
		if err := ids.QueueIDs(q).SetNode(nt.Name, m); err != nil {
			return nil, err
		}
	}
	ids.UseQueues(n) // the tiers need the queues even without a user placed
	for q := 0; q < n; q++ {
		for _, t := range d.targets.Tiers {
			if m, ok := d.ids.QueueIDs(q).Tier(t.Name); ok {
				if err := ids.QueueIDs(q).SetTier(t.Name, m); err != nil {
					return nil, fmt.Errorf("queue %d: tier %s: %w", q, t.Name, err)
				}
			}
		}
	}
	return ids, nil
}

// miniTargets is the targets without users and with just nodes: the
// interface, tiers and queue split a Build of a few users shares with the
// tree.
func (d *Desired) miniTargets(nodes []NodeTarget) Targets {
	t := &d.targets
	return Targets{Interface: t.Interface, Tiers: t.Tiers, Nodes: nodes, Queues: t.Queues, TierQueues: t.TierQueues, NodeQueues: t.NodeQueues}
}

// nodeIndex returns the index of node in targets.Nodes, or -1.
func (d *Desired) nodeIndex(node string) int {
	if d.nodeAt == nil {
		d.nodeAt = make(map[string]int, len(d.targets.Nodes))
		for j, n := range d.targets.Nodes {
			d.nodeAt[n.Name] = j
		}
	}
	if j, ok := d.nodeAt[node]; ok {
		return j
	}
	return -1
}

// chains returns the targets of nodes and of all their ancestors, each
// once, parents first: what a Build of a few users (or nodes) needs of the
// hierarchy. Unknown names are left out (Build then says so).
func (d *Desired) chains(nodes ...string) []NodeTarget {
	var out []NodeTarget
	seen := map[string]bool{}
	for _, n := range nodes {
		var chain []NodeTarget
		for name := n; name != "" && !seen[name]; {
			j := d.nodeIndex(name)
			if j < 0 {
				break
			}
			seen[name] = true
			chain = append(chain, d.targets.Nodes[j])
			name = d.targets.Nodes[j].Parent
		}
		slices.Reverse(chain)
		out = append(out, chain...)
	}
	return out
}

// unitOf is the node that node is placed on a queue with
// (placementUnits): "" for none, a split node, or a single tree.
func (d *Desired) unitOf(node string) string {
	if node == "" || d.targets.Interface.Queues < 2 {
		return ""
	}
	// The first node down the chain that is not split (all above it
	// are).
	for _, nt := range d.chains(node) {
		if !tooBig(d.targets.Interface, nt) {
			return nt.Name
		}
	}
	return ""
}

// isSplit reports whether node is split over every queue (SplitNodes).
func (d *Desired) isSplit(node string) bool {
	return splitChain(d.targets.Interface, d.chains(node))
}

// splitsAsNew reports whether node n, put under its parent, is split.
func (d *Desired) splitsAsNew(n NodeTarget) bool {
	return tooBig(d.targets.Interface, n) && (n.Parent == "" || d.isSplit(n.Parent))
}

// nodeOf is u's node ("" for none or nil).
func nodeOf(u *UserTarget) string {
	if u == nil {
		return ""
	}
	return u.Node
}

// PutNode adds node n (its parent must be there), or gives the node of
// that name n's rates, building only its class (and its ancestors', which
// stay as they are). A node whose parent changes is built again with the
// whole tree (Step.Rebuilt): HTB cannot move a class.
func (d *Desired) PutNode(n NodeTarget) (Step, error) {
	if !d.built {
		return Step{}, errNotBuilt
	}
	j := d.nodeIndex(n.Name)
	if j >= 0 && d.targets.Nodes[j].Parent != n.Parent {
		tg := d.targets
		tg.Nodes = slices.Clone(tg.Nodes)
		tg.Nodes[j] = n
		return d.rebuild(tg)
	}
	if n.Parent != "" && d.nodeIndex(n.Parent) < 0 {
		return Step{}, fmt.Errorf("node %s: unknown parent node %s", n.Name, n.Parent)
	}
	if nq := d.targets.Interface.Queues; nq > 1 {
		was := j >= 0 && d.isSplit(n.Name)
		now := d.splitsAsNew(n)
		switch {
		case was && now && d.splitComplete():
			// Its class in every queue, each with its share of the new
			// rates in the proportions it has now.
			tg := d.targets
			tg.Nodes = slices.Clone(tg.Nodes)
			tg.Nodes[j] = n
			tg.NodeQueues = maps.Clone(tg.NodeQueues)
			tg.NodeQueues[n.Name] = FitTier(TierTarget{Name: n.Name, Rate: n.Rate, Ceil: n.Ceil}, tg.NodeQueues[n.Name], nq)
			return d.patchSplit(tg)
		case was || now && j >= 0:
			// Split or joined: every class under it moves.
			tg := d.targets
			tg.Nodes = slices.Clone(tg.Nodes)
			tg.Nodes[j] = n
			if was {
				tg.NodeQueues = maps.Clone(tg.NodeQueues)
				delete(tg.NodeQueues, n.Name)
			}
			return d.rebuild(tg)
		case now:
			// A new split node without users has the idle split, as
			// Build gives it.
			nodeQueues := maps.Clone(d.targets.NodeQueues)
			if nodeQueues == nil {
				nodeQueues = map[string][]QueueTarget{}
			}
			nodeQueues[n.Name] = RebalanceTier(TierTarget{Name: n.Name, Rate: n.Rate, Ceil: n.Ceil}, nil, make([]tbf.Rate, nq), nil)
			d.targets.NodeQueues = nodeQueues
		}
	}
	chain := d.chains(n.Parent)
	before := slices.Clone(chain)
	if j >= 0 {
		before = append(before, d.targets.Nodes[j])
	} else if err := d.placeNode(n); err != nil {
		return Step{}, err
	}
	after := append(slices.Clone(chain), n)
	changes, err := d.nodeDiff(before, after)
	if err != nil {
		return Step{}, fmt.Errorf("node %s: %w", n.Name, err)
	}
	if j >= 0 {
		d.targets.Nodes[j] = n
	} else {
		d.targets.Nodes = append(d.targets.Nodes, n)
		if d.nodeAt != nil {
			d.nodeAt[n.Name] = len(d.targets.Nodes) - 1
		}
	}
	d.patchTree(changes)
	return Step{Changes: changes}, nil
}

// RemoveNode removes the class of node name, which must have no users and
// no nodes under it; a node that is not there changes nothing.
func (d *Desired) RemoveNode(name string) (Step, error) {
	if !d.built {
		return Step{}, errNotBuilt
	}
	j := d.nodeIndex(name)
	if j < 0 {
		return Step{}, nil
	}
	for _, n := range d.targets.Nodes {
		if n.Parent == name {
			return Step{}, fmt.Errorf("node %s: node %s is under it: move or remove it first", name, n.Name)
		}
	}
	for _, u := range d.targets.Users {
		if u.Node == name {
			return Step{}, fmt.Errorf("node %s: user %s is under it: move or remove the node's users first", name, u.Name)
		}
	}
	chain := d.chains(name)
	changes, err := d.nodeDiff(chain, chain[:len(chain)-1])
	if err != nil {
		return Step{}, fmt.Errorf("node %s: %w", name, err)
	}
	d.targets.Nodes = slices.Delete(slices.Clone(d.targets.Nodes), j, j+1)
	d.nodeAt = nil
	if _, ok := d.targets.NodeQueues[name]; ok {
		nodeQueues := maps.Clone(d.targets.NodeQueues)
		delete(nodeQueues, name)
		d.targets.NodeQueues = nodeQueues
	}
	d.patchTree(changes)
	return Step{Changes: changes}, nil
}

// nodeDiff is the Diff of two trees of just the nodes before and after.
func (d *Desired) nodeDiff(before, after []NodeTarget) ([]Change, error) {
	build := func(nodes []NodeTarget) (Tree, error) {
		ids, err := d.miniIDs(nodes)
		if err != nil {
			return Tree{}, err
		}
		return Build(d.miniTargets(nodes), ids)
	}
	b, err := build(before)
	if err != nil {
		return nil, err
	}
	a, err := build(after)
	if err != nil {
		return nil, err
	}
	return Diff(b, a), nil
}

// placeNode gives node n, unless it has one, a free minor from the users'
// range (under per-queue trees in its top-level node's queue).
func (d *Desired) placeNode(n NodeTarget) error {
	ids, have := d.ids, len(d.targets.Users)+len(d.targets.Nodes)
	if nq := d.targets.Interface.Queues; nq > 1 {
		// A split node has a class in every queue; a placement unit is
		// placed as a user is; the others follow their unit.
		k := nodeKey(n.Name)
		if d.splitsAsNew(n) {
			d.ids.UseQueues(nq)
			for q := 0; q < nq; q++ {
				qids := d.ids.QueueIDs(q)
				if _, ok := qids.Node(n.Name); ok {
					continue
				}
				m, ok := freeMinor(qids, have/nq)
				if !ok {
					return fmt.Errorf("node %s: queue %d: %w", n.Name, q, ErrTooManyUsers)
				}
				if err := qids.SetNode(n.Name, m); err != nil {
					return err
				}
			}
			return nil
		}
		q, ok := 0, false
		if unit := d.unitOf(n.Parent); unit == "" {
			q, ok = d.ids.PlaceUser(k, n.Rate)
		} else if q, ok = d.ids.Queue(nodeKey(unit)); ok {
			_ = d.ids.SetQueue(k, nq, q) // q < nq
		}
		if !ok {
			return fmt.Errorf("node %s: no queue placement", n.Name)
		}
		ids, have = d.ids.QueueIDs(q), have/nq
	}
	if _, ok := ids.Node(n.Name); ok {
		return nil
	}
	m, ok := freeMinor(ids, have)
	if !ok {
		return fmt.Errorf("node %s: %w", n.Name, ErrTooManyUsers)
	}
	return ids.SetNode(n.Name, m)
}

// withUser returns a copy of the targets with old replaced by new (either
// may be nil: add or remove).
func (d *Desired) withUser(old, new *UserTarget) Targets {
	tg := d.targets
	users := make([]UserTarget, 0, len(tg.Users)+1)
	for _, u := range tg.Users {
		if old != nil && u.Name == old.Name {
			continue
		}
		users = append(users, u)
	}
	if new != nil {
		users = append(users, *new)
	}
	tg.Users = users
	return tg
}

// splitComplete reports whether the targets carry a split for every queue
// and tier (completeSplit), so that a Build of a few users makes the queue
// and tier classes exactly.
func (d *Desired) splitComplete() bool {
	n := d.targets.Interface.Queues
	if len(d.targets.Queues) != n || d.ids.QueueCount() != n {
		return false
	}
	for _, t := range d.targets.Tiers {
		if len(d.targets.TierQueues[t.Name]) != n {
			return false
		}
	}
	for name := range SplitNodes(d.targets.Interface, d.targets.Nodes) {
		if len(d.targets.NodeQueues[name]) != n {
			return false
		}
	}
	return true
}

// completeSplit fills in the split of per-queue targets that Build chose
// itself (queues or tiers without one: the idle split), from the tree.
func (d *Desired) completeSplit() {
	if d.targets.Interface.Queues < 2 || d.splitComplete() {
		return
	}
	have, ok := SplitOf(&d.tree, d.ids)
	if !ok {
		return
	}
	if len(d.targets.Queues) != len(have.Queues) {
		d.targets.Queues = have.Queues
	}
	tiers := maps.Clone(have.Tiers)
	maps.Copy(tiers, d.targets.TierQueues) // the targets' own splits stay
	d.targets.TierQueues = tiers
	nodes := maps.Clone(have.Nodes)
	maps.Copy(nodes, d.targets.NodeQueues)
	d.targets.NodeQueues = nodes
}

// targetsEqual reports whether a and b would build the same tree with the
// same assignment, so that Set can skip Build (which allocates per user)
// when nothing changed. It compares every field; prefixes usually share
// the plan's backing arrays.
func targetsEqual(a, b *Targets) bool {
	if !specEqual(&a.Interface, &b.Interface) || !slices.Equal(a.Tiers, b.Tiers) || !slices.Equal(a.Nodes, b.Nodes) || len(a.Users) != len(b.Users) ||
		!slices.Equal(a.Queues, b.Queues) || !maps.EqualFunc(a.TierQueues, b.TierQueues, slices.Equal) ||
		!maps.EqualFunc(a.NodeQueues, b.NodeQueues, slices.Equal) {
		return false
	}
	for i := range a.Users {
		x, y := &a.Users[i], &b.Users[i]
		if x.Name != y.Name || x.Tier != y.Tier || x.Node != y.Node || x.Rate != y.Rate || x.Ceil != y.Ceil ||
			x.Burst != y.Burst || x.CBurst != y.CBurst || x.Prio != y.Prio || !slices.Equal(x.Prefixes, y.Prefixes) ||
			!leafPtrEqual(x.Leaf, y.Leaf) {
			return false
		}
	}
	return true
}

// leafPtrEqual compares two leaf settings by value (nil only equals nil).
func leafPtrEqual(a, b *LeafQdisc) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// specEqual compares two interface specs by value, leaves included.
func specEqual(a, b *InterfaceSpec) bool {
	leafEqual := leafPtrEqual(a.Leaf, b.Leaf)
	x, y := *a, *b
	x.Leaf, y.Leaf = nil, nil
	return leafEqual && x == y
}
