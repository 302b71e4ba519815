package u32

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// fuzzState turns fuzz bytes into a kernel state: the layout of a few
// filters, then objects changed, removed or added by the bytes (tables of
// other sizes, nodes with other keys, links, classes, duplicates, handles
// anywhere in shaperd's priorities), and filters to add and delete.
func fuzzState(data []byte) (objs []object, dups []int, add, del []model.Filter, extra [][]byte) {
	fs := dumpTestFilters()
	objs = kernelObjects(fs[:len(fs)/2])
	next := func(n int) []byte {
		if len(data) < n {
			data = append(data, make([]byte, n-len(data))...)
		}
		b := data[:n]
		data = data[n:]
		return b
	}
	for len(data) > 0 {
		op := next(1)[0]
		b := next(12)
		ne := binary.LittleEndian
		v := ne.Uint32(b[4:])
		w := ne.Uint32(b[8:])
		if len(objs) == 0 {
			op = 3
		}
		i := int(b[0]) % max(len(objs), 1)
		t := int(b[1]) % len(trees)
		// Priority headers and root tables stay: the kernel has exactly
		// one of each per priority.
		fixed := len(objs) > 0 && (objs[i].handle == 0 || htidOf(objs[i].handle) >= 0x800 && nodeIDOf(objs[i].handle) == 0)
		if fixed && op%9 < 3 {
			continue
		}
		switch op % 9 {
		case 0: // another handle (bucket, node, table)
			objs[i].handle = fuzzHandle(v, treeOfPrio(objs[i].prio, objs[i].proto))
		case 1: // another divisor or class
			objs[i].divisor, objs[i].classID = w&0x1ff, v
		case 2: // drop
			objs = slices.Delete(objs, i, i+1)
		case 3: // a new node, link or table anywhere in tree t
			v = fuzzHandle(v, t)
			o := object{prio: trees[t].prio, proto: trees[t].proto, kind: "u32", handle: v, classID: w & 0x1ffff,
				hasSel: b[2]&1 == 0, sel: tcwire.U32Sel{Flags: b[3] & 0xf, Hmask: w, Hoff: int16(b[2]),
					Keys: []tcwire.U32Key{{Mask: v ^ w, Val: v & (v ^ w), Off: int32(b[3]&0x1c) + 12}}}}
			if b[2]&2 != 0 {
				o.link = w &^ 0xfffff
			}
			if nodeIDOf(v) == 0 {
				o.isTable, o.divisor = true, uint32(b[3])+1
			}
			objs = append(objs, o)
		case 4: // listed twice in a dump
			dups = append(dups, i)
		case 5: // another selector
			objs[i].sel.Keys = append(objs[i].sel.Keys, tcwire.U32Key{Mask: v, Val: w & v, Off: int32(b[2] & 0x3c)})
		case 6, 7: // a filter to add or delete
			f := fs[int(b[0])%len(fs)]
			if b[1]&1 == 0 {
				a4 := netip.AddrFrom4([4]byte(b[4:8]))
				p, _ := a4.Prefix(int(b[2]%33) | 1)
				f.Prefix = p
			}
			f.ClassID = model.MakeHandle(1, 0x100+uint16(b[3]))
			if op%9 == 6 {
				add = append(add, f)
			} else {
				del = append(del, f)
			}
		case 8: // another tool's filter: any kind, priority and options
			kinds := []string{"bpf", "matchall", "flower", "basic", "u32"}
			opts := next(int(b[3] % 24))
			extra = append(extra, rawFilter(uint16(b[1])%8+uint16(b[2]&1)*100, ethPIPv4, v, kinds[int(b[0])%len(kinds)], opts))
		}
	}
	// Nodes live in tables that exist (in any priority: cls_u32 shares
	// tables per qdisc).
	tables := map[uint16]bool{}
	for _, o := range objs {
		if nodeIDOf(o.handle) == 0 {
			tables[htidOf(o.handle)] = true
		}
	}
	objs = slices.DeleteFunc(objs, func(o object) bool { return nodeIDOf(o.handle) != 0 && !tables[htidOf(o.handle)] })
	return objs, dups, add, del, extra
}

// fuzzHandle makes v a handle the kernel could hold in tree t: not 0
// (the priority's header), and in the automatic range (0x800..) only in
// t's root table (kernelObjects gives tree t root 0x800+t), as a node.
func fuzzHandle(v uint32, t int) uint32 {
	switch htid := htidOf(v); {
	case htid == 0 || htid >= 0x800:
		v = handleOf(uint16(0x800+t), 0, nodeIDOf(v))
		if nodeIDOf(v) == 0 {
			v |= 1
		}
	}
	return v
}

// FuzzClassifier drives Dump, Ensure, Add and Delete over random kernel
// states: no panic, whatever the kernel holds; after a
// successful Ensure and Add, the next Dump shows the filter undamaged.
func FuzzClassifier(f *testing.F) {
	f.Add([]byte{})
	// The kernel states that used to panic the classifier (panic_test.go):
	// a table of the wrong size holding a foreign node; a non-link node at
	// 800::1; a node listed twice.
	f.Add([]byte{1, 3, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 3, 0, 0, 0, 0x20, 0x30, 1, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 0, 0, 0, 0, 1, 0, 0, 0x80, 0, 0, 0, 0})
	f.Add([]byte{4, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 512 {
			return
		}
		objs, dups, add, del, extra := fuzzState(data)
		c, fk := classifierOn(t, objs)
		fk.extra = extra
		for _, i := range dups {
			if i < len(objs) {
				fk.extra = append(fk.extra, encodeObject(tcwire.Tcmsg{Ifindex: 1, Parent: uint32(model.RootQdisc)}, objs[i]))
			}
		}
		if _, err := c.Dump(); err != nil {
			t.Fatalf("Dump: %v", err)
		}
		fk.extra = extra
		_, ensureErr := c.Ensure()
		for _, f := range del {
			_, _ = c.Delete(f)
		}
		for _, f := range add {
			if _, err := c.Add(f); err != nil || ensureErr != nil {
				continue
			}
			got, err := c.Dump()
			if err != nil {
				t.Fatalf("Dump after Add(%v): %v", f.Prefix, err)
			}
			i := slices.IndexFunc(got, func(g model.Filter) bool { return g.Prefix == f.Prefix && g.Match == f.Match })
			if i < 0 || got[i].Damaged || got[i].ClassID != f.ClassID {
				t.Fatalf("after Add(%v %v class %v): dump has %v", f.Match, f.Prefix, f.ClassID, got)
			}
		}
	})
}
