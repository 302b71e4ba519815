package u32

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
)

// divisor is the bucket count of every shaperd hash table (the kernel's
// maximum).
const divisor = 256

// Ensure makes the skeleton of all four trees exist: each priority, the
// level-1 hash table of every hierarchy and the root's links to them, and
// the level-1 links of every level-2 table that exists. It deletes nodes in
// shaperd's priorities that are neither a link nor a filter. Level-2 tables
// are created by Add when a prefix first needs them. It writes nothing when
// the picture of the kernel (from the last Dump, or taken now when there is
// none) shows a complete skeleton.
//
// A priority that was deleted on its own (tc filter del ... pref 102) is
// created again first, and its hash tables are reused with whatever nodes
// they still hold: see ensurePrios.
func (c *Classifier) Ensure() (writes int, err error) {
	if err := c.ready(); err != nil {
		return 0, err
	}
	all := make([]int, len(trees))
	for t := range trees {
		all[t] = t
	}
	writes, err = c.ensurePrios(all...)
	if err != nil {
		return writes, c.errorf(err, "ensure priorities")
	}
	for t := range trees {
		w, err := c.ensureTree(t)
		writes += w
		if err != nil {
			return writes, c.errorf(err, "ensure prio %d", trees[t].prio)
		}
	}
	for _, h := range c.l2Tables() {
		hi, _, b, _ := tableOf(h)
		w, err := c.ensureL2(hi, b)
		writes += w
		if err != nil {
			return writes, c.errorf(err, "ensure table %x", h)
		}
	}
	for _, h := range slices.Clone(c.st.foreign) {
		n, ok := c.st.nodes[h]
		if !ok {
			continue // went with its table (removeNode drops it from foreign too)
		}
		if err := c.remove(n.tree, h); err != nil {
			return writes, c.errorf(err, "delete foreign node %x", h)
		}
		writes++
		c.st.removeNode(h)
	}
	return writes, nil
}

// ensurePrios creates the priorities of trees ts that the picture lacks,
// each as an empty u32 instance (a request without options: the kernel
// makes just its root table), and then dumps once, so that the picture
// holds their root tables' automatic handles and any hash tables the
// kernel kept for them.
//
// It has to come before any table is made. cls_u32 keeps every hash table
// of a qdisc in one list shared by all its u32 priorities (tc_u_common);
// deleting a priority frees only its root table, and its other tables
// stay, with their nodes, until the last u32 priority of the qdisc goes.
// A dump lists a table only under an existing priority of the same number
// (u32_walk), so such tables are invisible while their priority is gone,
// yet creating one again fails with EEXIST ("Filter already exists").
// Once the priority exists again they are dumped as its own and Ensure
// reuses them; Dump judges the nodes in them like any others.
func (c *Classifier) ensurePrios(ts ...int) (writes int, err error) {
	for _, t := range ts {
		if _, ok := c.st.roots[t]; ok {
			continue
		}
		err := c.execute(tcwire.RTMNewTFilter, netlink.Create, tcwire.Tcmsg{Info: tcwire.FilterInfo(trees[t].prio, trees[t].proto)}, nil)
		if err != nil {
			return writes, fmt.Errorf("create prio %d: %w", trees[t].prio, err)
		}
		writes++
	}
	if writes == 0 {
		return 0, nil
	}
	if _, err := c.dump(); err != nil {
		return writes, fmt.Errorf("dump after creating priorities: %w", err)
	}
	for _, t := range ts {
		if _, ok := c.st.roots[t]; !ok {
			return writes, fmt.Errorf("prio %d: created, but the dump shows no root table for it", trees[t].prio)
		}
	}
	return writes, nil
}

// l2Tables lists the level-2 tables in the picture, sorted.
func (c *Classifier) l2Tables() []uint16 {
	var out []uint16
	for h := range c.st.tables {
		if _, level, _, _ := tableOf(h); level == 2 {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// ensureFor makes the tables and links that placement pl needs.
func (c *Classifier) ensureFor(pl placement) (writes int, err error) {
	writes, err = c.ensurePrios(pl.tree)
	if err == nil {
		var w int
		w, err = c.ensureTree(pl.tree)
		writes += w
	}
	if err != nil || pl.level != 2 {
		return writes, err
	}
	h, _, b, _ := tableOf(pl.slots[0].htid)
	w, err := c.ensureL2(h, b)
	return writes + w, err
}

// ensureTree makes tree t's level-1 tables and root links. The priority
// must exist (ensurePrios).
func (c *Classifier) ensureTree(t int) (writes int, err error) {
	for _, h := range trees[t].hiers {
		w, err := c.ensureTable(t, l1HTID(h))
		writes += w
		if err != nil {
			return writes, err
		}
		w, err = c.ensureLink(t, c.st.roots[t]|uint32(rootLinkNode(h)), tcwire.U32RootHTID, l1HTID(h), linkSel(t, hiers[h].b1))
		writes += w
		if err != nil {
			return writes, err
		}
	}
	return writes, nil
}

// ensureL2 makes hierarchy h's level-2 table for level-1 bucket b and the
// link to it.
func (c *Classifier) ensureL2(h int, b uint8) (writes int, err error) {
	t := hiers[h].tree
	w, err := c.ensureTable(t, l2HTID(h, b))
	if err != nil {
		return w, err
	}
	at := handleOf(l1HTID(h), b, 0)
	w2, err := c.ensureLink(t, at|uint32(l2LinkNode), at, l2HTID(h, b), linkSel(t, hiers[h].b1+1))
	return w + w2, err
}

// ensureTable creates hash table htid in tree t unless it exists as it
// should. A table of the wrong size or priority is deleted first, with the
// links to it; the kernel drops a deleted link's reference to the table
// only after an RCU grace period, so that delete may fail with EBUSY once
// and succeed on the next call (the links are gone by then).
func (c *Classifier) ensureTable(t int, htid uint16) (writes int, err error) {
	if tb, ok := c.st.tables[htid]; ok {
		if tb.tree == t && tb.divisor == divisor {
			return 0, nil
		}
		for h, n := range c.st.nodes {
			if n.link == htid {
				if err := c.remove(n.tree, h); err != nil {
					return writes, fmt.Errorf("unlink table %x from node %x: %w", htid, h, err)
				}
				writes++
				c.st.removeNode(h)
			}
		}
		if err := c.remove(tb.tree, handleOf(htid, 0, 0)); err != nil {
			return writes, fmt.Errorf("delete table %x (divisor %d, prio %d): %w", htid, tb.divisor, trees[tb.tree].prio, err)
		}
		writes++
		c.dropTable(htid)
	}
	if err := c.create(t, handleOf(htid, 0, 0), &u32Opts{divisor: divisor}); err != nil {
		return writes, fmt.Errorf("create table %x: %w", htid, err)
	}
	c.st.tables[htid] = table{tree: t, divisor: divisor}
	return writes + 1, nil
}

// dropTable forgets table htid and the nodes that were in it.
func (c *Classifier) dropTable(htid uint16) {
	delete(c.st.tables, htid)
	for h := range c.st.nodes {
		if htidOf(h) == htid {
			c.st.removeNode(h)
		}
	}
}

// ensureLink makes node handle (in the bucket that hash names) a link to
// table target hashing with sel, replacing whatever node has that handle.
func (c *Classifier) ensureLink(t int, handle, hash uint32, target uint16, sel tcwire.U32Sel) (writes int, err error) {
	if n, ok := c.st.nodes[handle]; ok {
		if n.link == target && n.sel.Equal(sel) && n.classID == 0 && n.flags&tcwire.U32UserFlags == 0 {
			return 0, nil
		}
		if err := c.remove(t, handle); err != nil {
			return writes, fmt.Errorf("delete wrong link %x: %w", handle, err)
		}
		writes++
		c.st.removeNode(handle)
	}
	err = c.create(t, handle, &u32Opts{hash: hash, link: uint32(target) << 20, sel: &sel})
	if err != nil {
		return writes, fmt.Errorf("create link %x to table %x: %w", handle, target, err)
	}
	c.st.addNode(&node{handle: handle, tree: t, link: target, sel: sel})
	return writes + 1, nil
}

// Remove deletes shaperd's four u32 priorities under the qdisc; those that
// do not exist are skipped. When no other u32 priority is left under the
// qdisc, the kernel frees every node and hash table shaperd made with them.
// Otherwise it keeps the deleted priorities' non-root hash tables, with the
// nodes in them, until the last u32 priority or the qdisc goes (cls_u32
// shares tables per qdisc); Ensure and Add reuse them when they create
// shaperd's priorities again, and the next Dump shows the filters that
// were in them (see ensurePrios).
func (c *Classifier) Remove() error {
	if c.connErr != nil {
		return c.errorf(c.connErr, "no netlink connection")
	}
	for t := range trees {
		err := c.execute(tcwire.RTMDelTFilter, 0, tcwire.Tcmsg{Info: tcwire.FilterInfo(trees[t].prio, trees[t].proto)}, nil)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			c.st = nil
			return c.errorf(err, "delete prio %d", trees[t].prio)
		}
	}
	c.st = nil
	return nil
}
