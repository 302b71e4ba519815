package u32

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

func TestLayoutLevelsAndReplicas(t *testing.T) {
	tests := []struct {
		prefix   string
		match    model.MatchField
		tree     int
		level    int
		table    uint16 // htid of every slot (0: root)
		buckets  []uint8
		keyCount int
	}{
		{"198.18.5.7/32", model.MatchDst, 0, 2, l2HTID(0, 5), []uint8{7}, 1},
		{"198.18.5.16/28", model.MatchDst, 0, 2, l2HTID(0, 5), seq(16, 16), 1},
		{"198.18.5.128/25", model.MatchSrc, 1, 2, l2HTID(1, 5), seq(128, 128), 1},
		{"198.18.5.0/24", model.MatchDst, 0, 1, l1HTID(0), []uint8{5}, 1},
		{"198.18.4.0/23", model.MatchDst, 0, 1, l1HTID(0), []uint8{4, 5}, 1},
		{"198.18.128.0/17", model.MatchDst, 0, 1, l1HTID(0), seq(128, 128), 1},
		{"198.18.0.0/16", model.MatchDst, 0, 0, 0, []uint8{0}, 1},
		{"198.0.0.0/8", model.MatchSrc, 1, 0, 0, []uint8{0}, 1},
		{"2001:db8::10/128", model.MatchDst, 2, 2, l2HTID(4, 0), []uint8{0x10}, 4},
		{"2001:db8::ab00/120", model.MatchDst, 2, 1, l1HTID(4), []uint8{0xab}, 4},
		{"2001:db8::ab10/124", model.MatchSrc, 3, 2, l2HTID(5, 0xab), seq(0x10, 16), 4},
		{"2001:db8:1:2::/64", model.MatchDst, 2, 2, l2HTID(2, 0x00), []uint8{2}, 2},
		{"2001:db8:1:300::/56", model.MatchDst, 2, 1, l1HTID(2), []uint8{3}, 2},
		{"2001:db8:1:300::/60", model.MatchDst, 2, 2, l2HTID(2, 3), seq(0, 16), 2},
		{"2001:db8:1::/48", model.MatchDst, 2, 0, 0, []uint8{0}, 2},
		{"2001:db8:1:200::/55", model.MatchSrc, 3, 1, l1HTID(3), []uint8{2, 3}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			pl, err := layoutOf(netip.MustParsePrefix(tt.prefix), tt.match)
			if err != nil {
				t.Fatal(err)
			}
			if pl.tree != tt.tree || pl.level != tt.level || len(pl.keys) != tt.keyCount {
				t.Errorf("tree %d level %d keys %d, want %d %d %d", pl.tree, pl.level, len(pl.keys), tt.tree, tt.level, tt.keyCount)
			}
			var got []uint8
			for _, s := range pl.slots {
				if s.htid != tt.table {
					t.Errorf("slot in table %x, want %x", s.htid, tt.table)
				}
				got = append(got, s.bucket)
			}
			if !slices.Equal(got, tt.buckets) {
				t.Errorf("buckets %v, want %v", got, tt.buckets)
			}
		})
	}
}

func seq(from, n int) []uint8 {
	out := make([]uint8, n)
	for i := range out {
		out[i] = uint8(from + i)
	}
	return out
}

// TestLayoutBucketsHoldTheAddresses checks for random prefixes that every
// address of the prefix hashes (by the link keys, as the kernel does) into
// one of its slots, and no address outside the prefix's replica bytes does.
func TestLayoutBucketsHoldTheAddresses(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var p netip.Prefix
		if r.IntN(2) == 0 {
			a := netip.AddrFrom4([4]byte{198, byte(18 + r.IntN(2)), byte(r.IntN(256)), byte(r.IntN(256))})
			p, _ = a.Prefix(1 + r.IntN(32))
		} else {
			var b [16]byte
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			bits := []int{1 + r.IntN(64), 113 + r.IntN(16)}[r.IntN(2)]
			p, _ = netip.AddrFrom16(b).Prefix(bits)
		}
		m := []model.MatchField{model.MatchDst, model.MatchSrc}[r.IntN(2)]
		pl, err := layoutOf(p, m)
		if err != nil {
			t.Fatalf("%v: %v", p, err)
		}
		// A random address inside p must land in a slot of pl.
		a := randomIn(r, p)
		if s := hashPath(pl, a); !slices.Contains(pl.slots, s) {
			t.Fatalf("%v %s: address %v hashes to %+v, not one of %d slots", p, m, a, s, len(pl.slots))
		}
		lo, hi := nodeRange(pl)
		if lo < firstPrefixNode || hi > lastNode || lo > hi {
			t.Fatalf("%v: node range %x..%x", p, lo, hi)
		}
	}
}

// hashPath follows the links the way the kernel hashes address a down to
// the level of pl, returning the slot.
func hashPath(pl placement, a netip.Addr) slot {
	if pl.level == 0 {
		return slot{}
	}
	b := a.AsSlice()
	h := pl.hier
	tr := trees[pl.tree]
	pkt := make([]byte, tr.addrOff+len(b)+4)
	copy(pkt[tr.addrOff:], b)
	s1 := linkSel(pl.tree, hiers[h].b1)
	b1 := uint8(fold(pkt, s1))
	if pl.level == 1 {
		return slot{htid: l1HTID(h), bucket: b1}
	}
	s2 := linkSel(pl.tree, hiers[h].b1+1)
	return slot{htid: l2HTID(h, b1), bucket: uint8(fold(pkt, s2))}
}

// fold is the kernel's u32_hash_fold with divisor 256.
func fold(pkt []byte, s tcwire.U32Sel) uint32 {
	w := uint32(pkt[s.Hoff])<<24 | uint32(pkt[s.Hoff+1])<<16 | uint32(pkt[s.Hoff+2])<<8 | uint32(pkt[s.Hoff+3])
	shift := 0
	for s.Hmask>>shift&1 == 0 {
		shift++
	}
	return (w & s.Hmask) >> shift & 0xff
}

func randomIn(r *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		if r.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestLayoutRejects(t *testing.T) {
	tests := []struct{ prefix, want string }{
		{"0.0.0.0/0", "matches every address"},
		{"::/0", "matches every address"},
		{"2001:db8::/65", "/65../112 are not supported"},
		{"2001:db8::/96", "/65../112 are not supported"},
		{"2001:db8::/112", "/65../112 are not supported"},
		{"198.18.1.10/24", "host bits set; did you mean 198.18.1.0/24"},
		{"::ffff:198.18.1.10/128", "use the IPv4 form 198.18.1.10/32"},
	}
	for _, tt := range tests {
		_, err := layoutOf(netip.MustParsePrefix(tt.prefix), model.MatchDst)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.prefix, err, tt.want)
		}
	}
	if _, err := layoutOf(netip.MustParsePrefix("198.18.0.1/32"), "both"); err == nil {
		t.Error("match field \"both\" accepted")
	}
	if _, err := layoutOf(netip.Prefix{}, model.MatchDst); err == nil {
		t.Error("zero prefix accepted")
	}
	for _, ok := range []string{"128.0.0.0/1", "2001:db8::/113", "2001:db8::/64", "::/1"} {
		if _, err := layoutOf(netip.MustParsePrefix(ok), model.MatchDst); err != nil {
			t.Errorf("%s rejected: %v", ok, err)
		}
	}
}

// TestNodeRangesOrderLongestFirst checks that within every table kind the
// node id ranges of longer prefixes lie below those of shorter ones, above
// the link nodes, without overlap.
func TestNodeRangesOrderLongestFirst(t *testing.T) {
	cases := []struct {
		prefix func(bits int) string
		bits   []int
	}{
		{func(b int) string { return "198.18.0.0/" + strconv.Itoa(b) }, span(1, 16)},
		{func(b int) string { return "198.18.0.0/" + strconv.Itoa(b) }, span(17, 24)},
		{func(b int) string { return "198.18.0.0/" + strconv.Itoa(b) }, span(25, 32)},
		{func(b int) string { return "2001:db8::/" + strconv.Itoa(b) }, span(1, 48)},
		{func(b int) string { return "2001:db8::/" + strconv.Itoa(b) }, span(49, 56)},
		{func(b int) string { return "2001:db8::/" + strconv.Itoa(b) }, span(57, 64)},
		{func(b int) string { return "2001:db8::/" + strconv.Itoa(b) }, span(113, 120)},
		{func(b int) string { return "2001:db8::/" + strconv.Itoa(b) }, span(121, 128)},
	}
	for _, c := range cases {
		prevLo := uint16(0xffff)
		for _, bits := range c.bits { // shortest first
			p := netip.MustParsePrefix(c.prefix(bits)).Masked()
			pl, err := layoutOf(p, model.MatchDst)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := nodeRange(pl)
			if hi >= prevLo || lo <= l2LinkNode+1 || hi-lo+1 < 85 {
				t.Errorf("%v: range %x..%x, next shorter starts at %x", p, lo, hi, prevLo)
			}
			prevLo = lo
		}
	}
}

func span(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}
