package u32

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

func TestPrefixKeysRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		v6 := r.IntN(2) == 0
		var a netip.Addr
		if v6 {
			var b [16]byte
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			a = netip.AddrFrom16(b)
		} else {
			a = netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		}
		p, _ := a.Prefix(1 + r.IntN(a.BitLen()))
		t0, _ := treeFor(v6, []model.MatchField{model.MatchDst, model.MatchSrc}[r.IntN(2)])
		off := trees[t0].addrOff
		keys := prefixKeys(p, off)
		if want := (p.Bits() + 31) / 32; len(keys) != want {
			t.Fatalf("%v: %d keys, want %d", p, len(keys), want)
		}
		// Through the wire format and back.
		s, err := tcwire.ParseU32Sel(tcwire.U32Sel{Flags: tcwire.U32Terminal, Keys: keys}.Marshal())
		if err != nil {
			t.Fatal(err)
		}
		got, err := keysPrefix(s.Keys, v6, off)
		if err != nil || got != p {
			t.Fatalf("%v at %d: decoded %v, %v", p, off, got, err)
		}
	}
}

func TestKeysPrefixRejects(t *testing.T) {
	good := prefixKeys(netip.MustParsePrefix("2001:db8:1::/48"), 24)
	bad := map[string]struct {
		keys []tcwire.U32Key
		v6   bool
		off  int
	}{
		"no keys":          {nil, false, 16},
		"wrong offset":     {[]tcwire.U32Key{{Mask: 0xffffffff, Val: 1, Off: 12}}, false, 16},
		"hole in mask":     {[]tcwire.U32Key{{Mask: 0xff00ff00, Val: 0, Off: 16}}, false, 16},
		"bits off mask":    {[]tcwire.U32Key{{Mask: 0xffffff00, Val: 0xc6120501, Off: 16}}, false, 16},
		"zero mask":        {[]tcwire.U32Key{{Mask: 0, Val: 0, Off: 16}}, false, 16},
		"variable offset":  {[]tcwire.U32Key{{Mask: 0xffffffff, Val: 1, Off: 16, OffMask: 0xff}}, false, 16},
		"too many for v4":  {[]tcwire.U32Key{{Mask: ^uint32(0), Off: 16}, {Mask: ^uint32(0), Off: 20}}, false, 16},
		"partial then key": {[]tcwire.U32Key{{Mask: 0xffff0000, Val: 0x20010000, Off: 24}, {Mask: ^uint32(0), Off: 28}}, true, 24},
		"swapped words":    {[]tcwire.U32Key{good[1], good[0]}, true, 24},
	}
	for name, c := range bad {
		if p, err := keysPrefix(c.keys, c.v6, c.off); err == nil {
			t.Errorf("%s: decoded to %v", name, p)
		}
	}
}

func TestLinkSelectors(t *testing.T) {
	tests := []struct {
		tree, b int
		hoff    int16
		hmask   uint32
	}{
		{0, 2, 16, 0x0000ff00}, {0, 3, 16, 0x000000ff}, // IPv4 dst 3rd, 4th octet
		{1, 2, 12, 0x0000ff00}, {1, 3, 12, 0x000000ff}, // IPv4 src
		{2, 14, 36, 0x0000ff00}, {2, 15, 36, 0x000000ff}, // IPv6 dst bytes 14, 15
		{2, 6, 28, 0x0000ff00}, {2, 7, 28, 0x000000ff}, // IPv6 dst bytes 6, 7
		{3, 14, 20, 0x0000ff00}, {3, 7, 12, 0x000000ff}, // IPv6 src
	}
	for _, tt := range tests {
		s := linkSel(tt.tree, tt.b)
		if s.Hoff != tt.hoff || s.Hmask != tt.hmask || len(s.Keys) != 0 || s.Flags != 0 {
			t.Errorf("tree %d byte %d: %+v, want hoff %d hmask %08x", tt.tree, tt.b, s, tt.hoff, tt.hmask)
		}
	}
}

func TestMessageEncoding(t *testing.T) {
	sel := tcwire.U32Sel{Flags: tcwire.U32Terminal, Keys: prefixKeys(netip.MustParsePrefix("198.18.0.1/32"), 16)}
	m := filterRequest(tcwire.RTMNewTFilter, 0, tcwire.Tcmsg{Ifindex: 7, Handle: handleOf(0x105, 9, 0x410), Parent: uint32(model.RootQdisc), Info: tcwire.FilterInfo(PrioIPv4Dst, ethPIPv4)},
		&u32Opts{classID: 0x10100, hash: handleOf(0x105, 9, 0), sel: &sel})
	tm, o, err := parseObject(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if tm.Ifindex != 7 || tm.Parent != 0x10000 || o.prio != PrioIPv4Dst || o.proto != ethPIPv4 || o.kind != "u32" ||
		o.handle != 0x10509410 || o.classID != 0x10100 || o.hash != 0x10509000 || !o.hasSel || !o.sel.Equal(sel) || o.isTable {
		t.Errorf("decoded %+v %+v", tm, o)
	}
	// tcm_info carries the protocol in network order, as tc sends it.
	if info := tcwire.FilterInfo(PrioIPv4Dst, ethPIPv4); !bytes.Equal(binary.NativeEndian.AppendUint16(nil, uint16(info)), []byte{0x08, 0x00}) || info>>16 != 100 {
		t.Errorf("info %#x", info)
	}
}
