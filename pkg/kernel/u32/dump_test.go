package u32

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// kernelObjects is what the kernel dumps for filters installed by this
// package's layout: root tables, level-1 tables and root links for every
// tree, level-2 tables and links where needed, and one node per replica.
func kernelObjects(filters []model.Filter) []object {
	var objs []object
	tableObj := func(t int, htid uint16) object {
		return object{prio: trees[t].prio, proto: trees[t].proto, kind: "u32", handle: handleOf(htid, 0, 0), isTable: true, divisor: divisor}
	}
	linkObj := func(t int, h uint32, target uint16, sel tcwire.U32Sel) object {
		return object{prio: trees[t].prio, proto: trees[t].proto, kind: "u32", handle: h, link: uint32(target) << 20, sel: sel, hasSel: true, flags: 8}
	}
	for t := range trees {
		root := uint16(0x800 + t)
		objs = append(objs, object{prio: trees[t].prio, proto: trees[t].proto, kind: "u32"}) // the priority's header
		r := tableObj(t, root)
		r.divisor = 1
		objs = append(objs, r)
		for _, h := range trees[t].hiers {
			objs = append(objs, tableObj(t, l1HTID(h)), linkObj(t, handleOf(root, 0, rootLinkNode(h)), l1HTID(h), linkSel(t, hiers[h].b1)))
		}
	}
	l2 := map[uint16]bool{}
	next := map[uint32]uint16{}
	for _, f := range filters {
		pl, err := layoutOf(f.Prefix, f.Match)
		if err != nil {
			panic(err)
		}
		t := pl.tree
		lo, _ := nodeRange(pl)
		for _, s := range pl.slots {
			htid := s.htid
			if htid == 0 {
				htid = uint16(0x800 + t)
			}
			if pl.level == 2 && !l2[htid] {
				l2[htid] = true
				h, _, b, _ := tableOf(htid)
				objs = append(objs, tableObj(t, htid), linkObj(t, handleOf(l1HTID(h), b, l2LinkNode), htid, linkSel(t, hiers[h].b1+1)))
			}
			base := handleOf(htid, s.bucket, 0)
			id := max(next[base|uint32(lo)], lo)
			next[base|uint32(lo)] = id + 1
			objs = append(objs, object{prio: trees[t].prio, proto: trees[t].proto, kind: "u32", handle: base | uint32(id),
				classID: uint32(f.ClassID), sel: tcwire.U32Sel{Flags: tcwire.U32Terminal, Keys: pl.keys}, hasSel: true, flags: 8, hash: base})
		}
	}
	return objs
}

func dumpTestFilters() []model.Filter {
	var fs []model.Filter
	for i, p := range []string{"198.18.5.7/32", "198.19.5.7/32", "198.18.5.16/28", "198.18.0.0/16", "198.18.6.0/23",
		"2001:db8::10/128", "2001:db8:1:2::/64", "2001:db8:1:300::/56", "2001:db8::/48", "2001:db8::ab10/124"} {
		fs = append(fs, model.Filter{Prefix: netip.MustParsePrefix(p), Match: model.MatchDst, ClassID: model.MakeHandle(1, 0x100+uint16(i))})
	}
	fs = append(fs, model.Filter{Prefix: netip.MustParsePrefix("198.18.5.7/32"), Match: model.MatchSrc, ClassID: 0x10200})
	slices.SortFunc(fs, func(a, b model.Filter) int {
		if c := a.Prefix.Compare(b.Prefix); c != 0 {
			return c
		}
		if a.Match < b.Match {
			return -1
		}
		return 1
	})
	return fs
}

// findObj returns the index of the node of filter f in slot (htid, bucket).
func findObj(objs []object, f model.Filter, htid uint16, bucket uint8) int {
	keys := prefixKeys(f.Prefix, trees[must(treeFor(f.Prefix.Addr().Is6(), f.Match))].addrOff)
	return slices.IndexFunc(objs, func(o object) bool {
		return htidOf(o.handle) == htid && bucketOf(o.handle) == bucket && nodeIDOf(o.handle) != 0 && o.classID != 0 &&
			o.sel.Equal(tcwire.U32Sel{Flags: tcwire.U32Terminal, Keys: keys}) && o.prio == trees[must(treeFor(f.Prefix.Addr().Is6(), f.Match))].prio
	})
}

func must(t int, err error) int {
	if err != nil {
		panic(err)
	}
	return t
}

func TestDumpDecodesLayout(t *testing.T) {
	want := dumpTestFilters()
	got := buildState(kernelObjects(want)).filters()
	if !slices.Equal(got, want) {
		t.Errorf("decoded\n%v\nwant\n%v", got, want)
	}
}

func TestDumpDamaged(t *testing.T) {
	fs := dumpTestFilters()
	byPrefix := func(p string, m model.MatchField) model.Filter {
		i := slices.IndexFunc(fs, func(f model.Filter) bool { return f.Prefix == netip.MustParsePrefix(p) && f.Match == m })
		return fs[i]
	}
	f28 := byPrefix("198.18.5.16/28", model.MatchDst)
	f32 := byPrefix("198.18.5.7/32", model.MatchDst)
	other32 := byPrefix("198.19.5.7/32", model.MatchDst)
	tests := []struct {
		name    string
		mutate  func([]object) []object
		damaged []model.Filter
	}{
		{"replica missing", func(o []object) []object {
			return slices.Delete(o, findObj(o, f28, l2HTID(0, 5), 20), findObj(o, f28, l2HTID(0, 5), 20)+1)
		}, []model.Filter{f28}},
		{"replica with another class", func(o []object) []object {
			o[findObj(o, f28, l2HTID(0, 5), 17)].classID = 0x10999
			return o
		}, []model.Filter{f28}},
		{"not terminal", func(o []object) []object {
			o[findObj(o, f32, l2HTID(0, 5), 7)].sel = tcwire.U32Sel{Keys: o[findObj(o, f32, l2HTID(0, 5), 7)].sel.Keys}
			return o
		}, []model.Filter{f32}},
		{"misplaced bucket", func(o []object) []object {
			i := findObj(o, f32, l2HTID(0, 5), 7)
			o[i].handle = handleOf(l2HTID(0, 5), 8, nodeIDOf(o[i].handle))
			return o
		}, []model.Filter{f32}},
		{"node id of another length", func(o []object) []object {
			i := findObj(o, f32, l2HTID(0, 5), 7)
			o[i].handle = handleOf(l2HTID(0, 5), 7, 0x900)
			return o
		}, []model.Filter{f32}},
		{"level-1 link lost", func(o []object) []object {
			return slices.DeleteFunc(o, func(x object) bool { return x.handle == handleOf(l1HTID(0), 5, l2LinkNode) })
		}, []model.Filter{f28, f32, other32}},
		{"root link hashes the wrong byte", func(o []object) []object {
			i := slices.IndexFunc(o, func(x object) bool { return x.handle == handleOf(0x800, 0, 1) })
			o[i].sel = linkSel(0, 1)
			return o
		}, []model.Filter{byPrefix("198.18.6.0/23", model.MatchDst), f28, f32, other32}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildState(tt.mutate(kernelObjects(fs))).filters()
			for _, f := range fs {
				i := slices.IndexFunc(got, func(g model.Filter) bool { return g.Prefix == f.Prefix && g.Match == f.Match })
				if i < 0 {
					t.Errorf("%s %v missing", f.Match, f.Prefix)
					continue
				}
				if want := slices.Contains(tt.damaged, f); got[i].Damaged != want {
					t.Errorf("%s %v: Damaged %v, want %v", f.Match, f.Prefix, got[i].Damaged, want)
				}
				if got[i].ClassID != f.ClassID {
					t.Errorf("%s %v: class %v, want %v (the majority)", f.Match, f.Prefix, got[i].ClassID, f.ClassID)
				}
			}
		})
	}
}

func TestDumpForeignNodes(t *testing.T) {
	fs := dumpTestFilters()
	objs := kernelObjects(fs)
	bad := []object{
		// keys that are no prefix
		{prio: PrioIPv4Dst, proto: ethPIPv4, kind: "u32", handle: handleOf(0x800, 0, 0x500), classID: 0x10300, hasSel: true,
			sel: tcwire.U32Sel{Flags: tcwire.U32Terminal, Keys: []tcwire.U32Key{{Mask: 0xff00ff00, Val: 0x01000100, Off: 16}}}},
		// a link where shaperd has none
		{prio: PrioIPv4Dst, proto: ethPIPv4, kind: "u32", handle: handleOf(0x800, 0, 0x7), link: uint32(l1HTID(0)) << 20, hasSel: true, sel: linkSel(0, 2)},
		// neither class nor link
		{prio: PrioIPv6Dst, proto: ethPIPv6, kind: "u32", handle: handleOf(0x802, 0, 0x600), hasSel: true},
	}
	other := object{prio: 1, proto: ethPIPv4, kind: "u32", handle: handleOf(0x900, 0, 1), classID: 0x10300, hasSel: true,
		sel: tcwire.U32Sel{Flags: tcwire.U32Terminal, Keys: prefixKeys(netip.MustParsePrefix("198.18.9.9/32"), 16)}}
	st := buildState(append(append(objs, bad...), other))
	if len(st.foreign) != len(bad) {
		t.Errorf("foreign nodes %x, want the %d bad ones", st.foreign, len(bad))
	}
	if got := st.filters(); !slices.Equal(got, fs) {
		t.Errorf("filters %v, want %v (foreign nodes and other priorities ignored)", got, fs)
	}
}
