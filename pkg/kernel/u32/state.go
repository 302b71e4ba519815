package u32

import (
	"fmt"
	"slices"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
)

// node is one u32 key node in shaperd's trees.
type node struct {
	handle  uint32
	tree    int
	link    uint16 // htid the node links to; 0: none
	classID uint32
	flags   uint32
	sel     tcwire.U32Sel
	// user nodes decode to a filter key; others are links or foreign.
	user bool
	key  fkey
}

// table is one of shaperd's hash tables as the kernel has it.
type table struct {
	tree    int // from its priority
	divisor uint32
}

// state is the Classifier's picture of its u32 objects in the kernel.
type state struct {
	roots    map[int]uint32      // tree -> its root table's handle (htid<<20)
	tables   map[uint16]table    // shaperd's tables by htid
	nodes    map[uint32]*node    // every key node of shaperd's trees, by handle
	byFilter map[fkey][]uint32   // user nodes by filter
	used     map[uint32][]uint16 // node ids in use per table bucket (handle&^0xfff)
	foreign  []uint32            // nodes that are neither links nor filters
	// others describes filters of other tools (kinds, priorities), at
	// most maxForeign priorities, with otherN objects each; otherCount
	// counts the objects beyond those.
	others     []string
	otherN     []int
	otherIdx   map[any]int
	otherCount int
}

// newStateSized returns an empty picture with room for about n nodes.
func newStateSized(n int) *state {
	return &state{
		roots:    map[int]uint32{},
		tables:   map[uint16]table{},
		nodes:    make(map[uint32]*node, n),
		byFilter: make(map[fkey][]uint32, n),
		used:     map[uint32][]uint16{},
	}
}

// slotBase is the handle (node id 0) of slot s in tree t. The root of a
// tree whose root table is not known yet (no priority yet) maps to 0.
func (st *state) slotBase(t int, s slot) uint32 {
	if s.htid == 0 {
		return st.roots[t]
	}
	return handleOf(s.htid, s.bucket, 0)
}

func (st *state) addNode(n *node) {
	st.nodes[n.handle] = n
	b := n.handle &^ 0xfff
	st.used[b] = append(st.used[b], nodeIDOf(n.handle))
	if n.user {
		st.byFilter[n.key] = append(st.byFilter[n.key], n.handle)
	}
}

func (st *state) removeNode(h uint32) {
	n, ok := st.nodes[h]
	if !ok {
		return
	}
	delete(st.nodes, h)
	// A foreign node that went (replaced by a link, or with its table) is
	// no longer to be deleted: the handle may be a new node of shaperd's.
	st.foreign = slices.DeleteFunc(st.foreign, func(x uint32) bool { return x == h })
	b := h &^ 0xfff
	st.used[b] = slices.DeleteFunc(st.used[b], func(id uint16) bool { return id == nodeIDOf(h) })
	if len(st.used[b]) == 0 {
		delete(st.used, b)
	}
	if n.user {
		st.byFilter[n.key] = slices.DeleteFunc(st.byFilter[n.key], func(x uint32) bool { return x == h })
		if len(st.byFilter[n.key]) == 0 {
			delete(st.byFilter, n.key)
		}
	}
}

// freeNode is the lowest node id in lo..hi not used in bucket base.
func (st *state) freeNode(base uint32, lo, hi uint16) (uint16, error) {
	used := st.used[base]
	for id := lo; id <= hi; id++ {
		if !slices.Contains(used, id) {
			return id, nil
		}
	}
	return 0, fmt.Errorf("all %d node ids for this prefix length are in use (%d prefixes of one length share the bucket)", hi-lo+1, hi-lo+1)
}
