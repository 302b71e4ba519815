package u32

import (
	"fmt"
	"net/netip"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// Filter priorities (tc "pref") of shaperd's four u32 trees under the HTB
// root. Each priority is one u32 instance (tcf_proto) for one address family
// and one match field; the kernel tries them in this order.
const (
	PrioIPv4Dst uint16 = 100
	PrioIPv4Src uint16 = 101
	PrioIPv6Dst uint16 = 102
	PrioIPv6Src uint16 = 103
)

// Ethernet protocol numbers of the trees (host order).
const (
	ethPIPv4 uint16 = 0x0800
	ethPIPv6 uint16 = 0x86DD
)

// Node ids: links sit before every prefix node of their bucket, so the
// deeper (longer) prefixes behind a link are tried first.
const (
	firstPrefixNode uint16 = 0x010 // prefix nodes use 0x010..0xfff
	lastNode        uint16 = 0xfff
	l2LinkNode      uint16 = 0x001 // the link in a level-1 bucket to its level-2 table
)

// tree is one u32 priority: one family and one match field.
type tree struct {
	index   int
	prio    uint16
	proto   uint16
	v6      bool
	match   model.MatchField
	addrOff int // offset of the matched address in the IP header
	// hiers are the hierarchies linked from the root, in node order (the
	// root link of hiers[i] has node id i+1).
	hiers []int
	// rootMax is the longest prefix kept in the root's linear list
	// (/1../rootMax, longest first).
	rootMax int
}

// hier is a two-level hash hierarchy under a tree's root: level 1 is hashed
// on address byte b1, its bucket b links to level-2 table b hashed on
// address byte b1+1. Level 1 keeps prefixes /8*b1+1../8*b1+8, level 2
// keeps /8*b1+9../8*b1+16.
type hier struct {
	index int
	tree  int
	b1    int
}

var trees = [4]tree{
	{index: 0, prio: PrioIPv4Dst, proto: ethPIPv4, match: model.MatchDst, addrOff: 16, hiers: []int{0}, rootMax: 16},
	{index: 1, prio: PrioIPv4Src, proto: ethPIPv4, match: model.MatchSrc, addrOff: 12, hiers: []int{1}, rootMax: 16},
	{index: 2, prio: PrioIPv6Dst, proto: ethPIPv6, v6: true, match: model.MatchDst, addrOff: 24, hiers: []int{4, 2}, rootMax: 48},
	{index: 3, prio: PrioIPv6Src, proto: ethPIPv6, v6: true, match: model.MatchSrc, addrOff: 8, hiers: []int{5, 3}, rootMax: 48},
}

var hiers = [6]hier{
	{index: 0, tree: 0, b1: 2},  // IPv4 dst: 3rd octet, then 4th
	{index: 1, tree: 1, b1: 2},  // IPv4 src
	{index: 2, tree: 2, b1: 6},  // IPv6 dst networks: bytes 6, 7 (/49../64)
	{index: 3, tree: 3, b1: 6},  // IPv6 src networks
	{index: 4, tree: 2, b1: 14}, // IPv6 dst hosts: bytes 14, 15 (/113../128)
	{index: 5, tree: 3, b1: 14}, // IPv6 src hosts
}

// rootLinkNode is the node id of hierarchy h's link in its tree's root.
func rootLinkNode(h int) uint16 {
	for i, x := range trees[hiers[h].tree].hiers {
		if x == h {
			return uint16(i + 1)
		}
	}
	panic("u32: hierarchy without a root link")
}

// Hash table ids (the 12-bit "htid" tc prints as "10:"). Ids from 0x800 up
// are the kernel's automatic root tables; shaperd's are below.
func l1HTID(h int) uint16          { return 0x010 + uint16(h) }
func l2HTID(h int, b uint8) uint16 { return 0x100*uint16(h+1) + uint16(b) }

// tableOf says which table an htid is: its hierarchy, level (1 or 2) and,
// for level 2, the level-1 bucket it hangs off. ok is false for other ids.
func tableOf(htid uint16) (h, level int, b uint8, ok bool) {
	switch {
	case htid >= 0x010 && htid < 0x010+uint16(len(hiers)):
		return int(htid - 0x010), 1, 0, true
	case htid >= 0x100 && htid < 0x100*uint16(len(hiers)+1):
		return int(htid/0x100) - 1, 2, uint8(htid), true
	}
	return 0, 0, 0, false
}

// slot is a table bucket; htid 0 stands for the tree's root table.
type slot struct {
	htid   uint16
	bucket uint8
}

// placement is where a filter's nodes go: every slot gets one node with the
// same full-prefix selector.
type placement struct {
	tree  int
	hier  int // -1 for the root
	level int // 0 root, 1 or 2
	slots []slot
	keys  []tcwire.U32Key
	bits  int
}

// linkSel is the selector of a link that hashes address byte b of tree t.
func linkSel(t int, b int) tcwire.U32Sel {
	return tcwire.U32Sel{
		Hoff:  int16(trees[t].addrOff + b&^3),
		Hmask: 0xff << (8 * (3 - uint(b)%4)),
	}
}

// treeFor is the tree of a family and match field.
func treeFor(v6 bool, m model.MatchField) (int, error) {
	switch {
	case m == model.MatchDst && !v6:
		return 0, nil
	case m == model.MatchSrc && !v6:
		return 1, nil
	case m == model.MatchDst && v6:
		return 2, nil
	case m == model.MatchSrc && v6:
		return 3, nil
	}
	return 0, fmt.Errorf("match field %q: want %q or %q", m, model.MatchDst, model.MatchSrc)
}

// checkPrefix rejects prefixes shaperd's layout cannot hold.
func checkPrefix(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("invalid prefix %v", p)
	case p.Addr().Zone() != "":
		return fmt.Errorf("prefix %v: zoned addresses cannot be matched", p)
	case p.Addr().Is4In6():
		return fmt.Errorf("prefix %v: IPv4-mapped IPv6 address; use the IPv4 form %v", p, netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0)))
	case p != p.Masked():
		return fmt.Errorf("prefix %v has host bits set; did you mean %v?", p, p.Masked())
	case p.Bits() == 0:
		return fmt.Errorf("prefix %v matches every address; leave such traffic to the default class", p)
	case p.Addr().Is6() && p.Bits() > 64 && p.Bits() <= 112:
		return fmt.Errorf("IPv6 prefix %v: lengths /65../112 are not supported (use /64 or shorter, or /113../128)", p)
	}
	return nil
}

// layoutOf computes where filter f's nodes go and what they match.
func layoutOf(p netip.Prefix, m model.MatchField) (placement, error) {
	if err := checkPrefix(p); err != nil {
		return placement{}, err
	}
	t, err := treeFor(p.Addr().Is6(), m)
	if err != nil {
		return placement{}, err
	}
	pl := placement{tree: t, hier: -1, bits: p.Bits(), keys: prefixKeys(p, trees[t].addrOff)}
	if p.Bits() <= trees[t].rootMax {
		pl.slots = []slot{{}}
		return pl, nil
	}
	a := p.Addr().AsSlice()
	for _, h := range trees[t].hiers {
		b1 := hiers[h].b1
		switch {
		case p.Bits() > 8*b1 && p.Bits() <= 8*b1+8:
			pl.hier, pl.level = h, 1
			pl.slots = replicas(l1HTID(h), a[b1], p.Bits()-8*b1)
		case p.Bits() > 8*b1+8 && p.Bits() <= 8*b1+16:
			pl.hier, pl.level = h, 2
			pl.slots = replicas(l2HTID(h, a[b1]), a[b1+1], p.Bits()-8*b1-8)
		default:
			continue
		}
		return pl, nil
	}
	return placement{}, fmt.Errorf("prefix %v: no table for this length", p) // unreachable after checkPrefix
}

// replicas are the buckets of table htid whose hashed byte can be any value
// whose top n bits equal those of v.
func replicas(htid uint16, v byte, n int) []slot {
	free := 8 - n
	base := v &^ byte(1<<free-1)
	out := make([]slot, 1<<free)
	for i := range out {
		out[i] = slot{htid: htid, bucket: base + byte(i)}
	}
	return out
}

// nodeRange is the node ids a prefix of the given length may use in its
// table, so that within a bucket longer prefixes come first (the kernel
// walks a bucket in node id order).
func nodeRange(pl placement) (lo, hi uint16) {
	minLen, maxLen := 1, trees[pl.tree].rootMax
	if pl.level > 0 {
		minLen = 8*hiers[pl.hier].b1 + 1 + 8*(pl.level-1)
		maxLen = minLen + 7
	}
	n := uint16(maxLen - minLen + 1)
	per := min(256, (lastNode-firstPrefixNode+1)/n)
	lo = firstPrefixNode + uint16(maxLen-pl.bits)*per
	return lo, lo + per - 1
}

// Problem is a filter the layout cannot hold: Index is its index in the
// list given to CheckLayout.
type Problem struct {
	Index int
	Err   error
}

// CheckLayout says, offline, which of filters (unique prefixes with their
// match fields, as model.Build makes them for one device) Add would refuse:
// a prefix the layout has no table for (/0, IPv6 /65../112, host bits set,
// IPv4-mapped or zoned addresses, an unknown match field), or one more
// prefix of some length in one table bucket than that length's node ids
// (256 in level tables, 255 per length in the IPv4 root list, 85 per
// length in the IPv6 root list: e.g. the 86th IPv6 /48). It sends nothing.
func CheckLayout(filters []model.Filter) []Problem {
	type group struct {
		tree int
		at   slot
		bits int
	}
	used := map[group]int{}
	var out []Problem
	for i, f := range filters {
		pl, err := layoutOf(f.Prefix, f.Match)
		if err != nil {
			out = append(out, Problem{i, err})
			continue
		}
		lo, hi := nodeRange(pl)
		room := int(hi-lo) + 1
		for _, s := range pl.slots {
			g := group{pl.tree, s, pl.bits}
			used[g]++
			if used[g] > room {
				out = append(out, Problem{i, fmt.Errorf("prefix %v: the classifier holds at most %d /%d prefixes in one table bucket (%x:%x), and this is one more",
					f.Prefix, room, pl.bits, s.htid, s.bucket)})
				break
			}
		}
	}
	return out
}
