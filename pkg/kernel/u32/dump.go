package u32

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// Dump reads shaperd's u32 objects under the qdisc and decodes the nodes
// back to filters (prefix, match field, class), one per prefix and match
// field however many replica nodes it has, sorted as Tree.Filters
// (prefix, then match). Labels are not stored in the kernel and stay
// empty. A filter is Damaged when its nodes are not exactly its layout:
// a replica missing, misplaced or duplicated, replicas that disagree on the
// class (ClassID is then the most common one), a node that is not terminal
// or has an id out of its length's range, or a table or link on the way to
// it missing or wrong. Nodes that decode to no filter are not returned;
// Ensure deletes them. Dump also renews the Classifier's picture of the
// kernel.
func (c *Classifier) Dump() ([]model.Filter, error) {
	if c.connErr != nil {
		return nil, c.errorf(c.connErr, "no netlink connection")
	}
	fs, err := c.dump()
	if err != nil {
		return nil, c.errorf(err, "dump")
	}
	return fs, nil
}

// dump is Dump with errors that do not name the device yet.
func (c *Classifier) dump() ([]model.Filter, error) {
	c.st = nil
	req := filterRequest(tcwire.RTMGetTFilter, netlink.Dump, tcwire.Tcmsg{Ifindex: c.ifindex, Parent: uint32(c.parent)}, nil)
	req.Data = req.Data[:tcwire.TcmsgLen] // a dump request carries no attributes
	defer c.deadline()()
	sent, err := c.conn.Send(req)
	if err != nil {
		return nil, err
	}
	// Decoded as the datagrams arrive: collecting the messages first
	// would hold megabytes of them with 10,000 users.
	objs := make([]object, 0, c.lastObjects) // sized by the last dump
	for m, err := range c.conn.ReceiveIter() {
		if err != nil {
			return nil, err
		}
		if m.Header.Sequence != sent.Header.Sequence {
			return nil, fmt.Errorf("answer with sequence %d to request %d", m.Header.Sequence, sent.Header.Sequence)
		}
		_, o, err := parseObject(m.Data)
		if err != nil {
			return nil, fmt.Errorf("decode filter message: %w", err)
		}
		objs = append(objs, o)
	}
	c.lastObjects = len(objs)
	st := buildState(objs)
	c.st = st
	return st.filters(), nil
}

// Foreign describes the filters under the qdisc that are not shaperd's
// (other kinds, or u32 in other priorities), as of the last Dump, at most
// maxForeign of them; Ensure leaves them alone. Nodes in shaperd's own
// priorities that are not its own are not listed: Ensure deletes them.
func (c *Classifier) Foreign() []string {
	if c.st == nil {
		return nil
	}
	if c.st.otherCount > 0 {
		return append(slices.Clone(c.st.others), fmt.Sprintf("... and %d more filter objects", c.st.otherCount))
	}
	return c.st.others
}

// maxForeign caps the descriptions of foreign filters kept per dump.
const maxForeign = 20

// treeOfPrio is the tree with priority prio and protocol proto, or -1.
func treeOfPrio(prio, proto uint16) int {
	for t := range trees {
		if trees[t].prio == prio && trees[t].proto == proto {
			return t
		}
	}
	return -1
}

// buildState makes the picture of the kernel from dumped objects.
func buildState(objs []object) *state {
	st := newStateSized(len(objs))
	for _, o := range objs {
		t := treeOfPrio(o.prio, o.proto)
		if o.kind != "u32" || t < 0 {
			if o.handle != 0 { // not the priority's header
				st.noteOther(o)
			}
			continue // not shaperd's
		}
		if o.handle == 0 {
			continue // the priority's own header
		}
		if nodeIDOf(o.handle) == 0 {
			htid := htidOf(o.handle)
			if htid >= 0x800 {
				st.roots[t] = o.handle
			} else {
				st.tables[htid] = table{tree: t, divisor: o.divisor}
			}
			continue
		}
		if _, dup := st.nodes[o.handle]; dup {
			// A dump that raced with outside changes can list a node
			// twice: the first copy stands (a second would leave the
			// picture with handles that point at nothing once removed).
			continue
		}
		n := &node{handle: o.handle, tree: t, link: htidOf(o.link), classID: o.classID, flags: o.flags, sel: o.sel}
		switch {
		case o.decodeErr != nil || o.selErr != nil || !o.hasSel:
			st.foreign = append(st.foreign, o.handle)
		case o.link != 0:
			if !linkPosition(t, o.handle) {
				st.foreign = append(st.foreign, o.handle)
			}
		case o.classID != 0:
			p, err := keysPrefix(o.sel.Keys, trees[t].v6, trees[t].addrOff)
			if err == nil {
				n.user, n.key = true, fkey{p, trees[t].match}
			} else {
				st.foreign = append(st.foreign, o.handle)
			}
		default:
			st.foreign = append(st.foreign, o.handle)
		}
		st.addNode(n)
	}
	return st
}

// noteOther records a filter object of another tool for Foreign: one
// entry per kind, priority and protocol (a u32 priority has tables and
// nodes), at most maxForeign entries.
func (st *state) noteOther(o object) {
	type pk struct {
		kind        string
		prio, proto uint16
	}
	if st.otherIdx == nil {
		st.otherIdx = map[any]int{}
	}
	k := pk{o.kind, o.prio, o.proto}
	i, ok := st.otherIdx[k]
	if !ok {
		if len(st.others) >= maxForeign {
			st.otherCount++
			return
		}
		i = len(st.others)
		st.otherIdx[k] = i
		st.others = append(st.others, "")
		st.otherN = append(st.otherN, 0)
	}
	st.otherN[i]++
	st.others[i] = fmt.Sprintf("%s filter pref %d protocol %#04x (%d objects)", o.kind, o.prio, o.proto, st.otherN[i])
}

// linkPosition reports whether handle is where tree t has a link: node
// 1..n of its root, node 1 of a level-1 bucket. Whether the link is right
// is checked by reachable and repaired by Ensure.
func linkPosition(t int, handle uint32) bool {
	htid, id := htidOf(handle), nodeIDOf(handle)
	if htid >= 0x800 {
		return bucketOf(handle) == 0 && id >= 1 && int(id) <= len(trees[t].hiers)
	}
	h, level, _, ok := tableOf(htid)
	return ok && level == 1 && hiers[h].tree == t && id == l2LinkNode
}

// reachable reports whether packets get to table htid of tree t: for
// level 1 the root's link, for level 2 also the level-1 bucket's link,
// each with the right hash key, and the tables with the right size.
func (st *state) reachable(t int, htid uint16) bool {
	if htid == 0 {
		_, ok := st.roots[t]
		return ok
	}
	h, level, b, ok := tableOf(htid)
	if !ok || hiers[h].tree != t {
		return false
	}
	if tb, ok := st.tables[htid]; !ok || tb.tree != t || tb.divisor != divisor {
		return false
	}
	if level == 1 {
		root, ok := st.roots[t]
		return ok && st.isLink(root|uint32(rootLinkNode(h)), htid, linkSel(t, hiers[h].b1))
	}
	return st.reachable(t, l1HTID(h)) && st.isLink(handleOf(l1HTID(h), b, l2LinkNode), htid, linkSel(t, hiers[h].b1+1))
}

func (st *state) isLink(handle uint32, target uint16, sel tcwire.U32Sel) bool {
	n, ok := st.nodes[handle]
	return ok && n.link == target && n.sel.Equal(sel) && n.classID == 0 && n.flags&tcwire.U32UserFlags == 0
}

// filters decodes the user nodes into filters and checks each against its
// layout.
func (st *state) filters() []model.Filter {
	out := make([]model.Filter, 0, len(st.byFilter))
	reach := map[[2]int]bool{}
	for k, hs := range st.byFilter {
		f := model.Filter{Prefix: k.prefix, Match: k.match}
		f.ClassID, f.Damaged = st.majorityClass(hs)
		if !f.Damaged {
			f.Damaged = !st.matchesLayout(k, hs, reach)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b model.Filter) int {
		if c := a.Prefix.Compare(b.Prefix); c != 0 {
			return c
		}
		return cmp.Compare(a.Match, b.Match)
	})
	return out
}

// majorityClass is the most common class among nodes hs (the lowest on a
// tie); split reports whether they disagree.
func (st *state) majorityClass(hs []uint32) (model.Handle, bool) {
	if same := len(hs) > 0; same { // the usual case: no map
		c := st.nodes[hs[0]].classID
		for _, h := range hs[1:] {
			if st.nodes[h].classID != c {
				same = false
				break
			}
		}
		if same {
			return model.Handle(c), false
		}
	}
	count := map[uint32]int{}
	for _, h := range hs {
		count[st.nodes[h].classID]++
	}
	var best uint32
	for cls, n := range count {
		if n > count[best] || (n == count[best] && cls < best) {
			best = cls
		}
	}
	return model.Handle(best), len(count) > 1
}

// matchesLayout reports whether nodes hs are exactly the layout of k.
func (st *state) matchesLayout(k fkey, hs []uint32, reach map[[2]int]bool) bool {
	pl, err := layoutOf(k.prefix, k.match)
	if err != nil || len(hs) != len(pl.slots) {
		return false
	}
	want := tcwire.U32Sel{Flags: tcwire.U32Terminal, Keys: pl.keys}
	lo, hi := nodeRange(pl)
	seen := map[uint32]bool{}
	for _, h := range hs {
		n := st.nodes[h]
		if n.tree != pl.tree || !n.sel.Equal(want) || n.flags&tcwire.U32UserFlags != 0 || nodeIDOf(h) < lo || nodeIDOf(h) > hi {
			return false
		}
		seen[h&^0xfff] = true
	}
	for _, s := range pl.slots {
		b := st.slotBase(pl.tree, s)
		if !seen[b] {
			return false
		}
		rk := [2]int{pl.tree, int(s.htid)}
		r, ok := reach[rk]
		if !ok {
			r = st.reachable(pl.tree, s.htid)
			reach[rk] = r
		}
		if !r {
			return false
		}
	}
	return true
}

// String summarises the picture for debugging.
func (st *state) String() string {
	return fmt.Sprintf("u32 state: %d roots, %d tables, %d nodes, %d filters, %d foreign",
		len(st.roots), len(st.tables), len(st.nodes), len(st.byFilter), len(st.foreign))
}
