package bpfcls

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
)

// frame builds an Ethernet frame: ethertype typ (with one 802.1Q tag
// when vlan), then an IPv4 or IPv6 header from src to dst (nil: payload
// as is).
func frame(vlan bool, typ uint16, src, dst netip.Addr, payload []byte) []byte {
	b := make([]byte, 12) // MAC addresses
	b[0], b[6] = 0x02, 0x02
	if vlan {
		b = binary.BigEndian.AppendUint16(b, ethP8021Q)
		b = binary.BigEndian.AppendUint16(b, 7) // VLAN 7
	}
	b = binary.BigEndian.AppendUint16(b, typ)
	switch {
	case payload != nil:
		return append(b, payload...)
	case src.Is4():
		h := make([]byte, 20)
		h[0], h[8], h[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(h[2:], 28)
		copy(h[12:], src.AsSlice())
		copy(h[16:], dst.AsSlice())
		b = append(b, h...)
	default:
		h := make([]byte, 40)
		h[0], h[6], h[7] = 0x60, 17, 64
		binary.BigEndian.PutUint16(h[4:], 8)
		copy(h[8:], src.AsSlice())
		copy(h[24:], dst.AsSlice())
		b = append(b, h...)
	}
	return append(b, make([]byte, 8)...) // a UDP header's worth
}

// TestProgram runs the classifier program on crafted frames
// (BPF_PROG_TEST_RUN): destination before source, longest prefix, IPv6,
// one 802.1Q tag, and 0 (the default class) for misses and other
// ethertypes. (Frames too short for an address cannot be tested this way:
// the kernel refuses to run a program on an IPv4 or IPv6 frame shorter
// than the header.)
func TestProgram(t *testing.T) {
	netnslab.Require(t) // root
	v4, err := ebpf.NewMap(mapSpec(v4MapName, v4KeySize, 16))
	if err != nil {
		t.Fatal(err)
	}
	defer v4.Close()
	v6, err := ebpf.NewMap(mapSpec(v6MapName, v6KeySize, 16))
	if err != nil {
		t.Fatal(err)
	}
	defer v6.Close()
	prog, err := ebpf.NewProgram(programSpec(v4, v6))
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	put := func(p string, m model.MatchField, cls model.Handle) {
		k, is6, err := key(netip.MustParsePrefix(p), m)
		if err != nil {
			t.Fatal(err)
		}
		mp := v4
		if is6 {
			mp = v6
		}
		if err := mp.Put(k, value(cls)); err != nil {
			t.Fatal(err)
		}
	}
	put("198.18.0.0/16", model.MatchDst, 0x10100)
	put("198.18.5.0/24", model.MatchDst, 0x10101)
	put("198.18.5.7/32", model.MatchDst, 0x10102)
	put("198.19.0.0/16", model.MatchSrc, 0x10103)
	put("2001:db8::/32", model.MatchDst, 0x10104)
	put("2001:db8:1::/64", model.MatchSrc, 0x10105)
	put("0.0.0.0/0", model.MatchSrc, 0x20106) // another qdisc's major: returned as is
	a := netip.MustParseAddr
	for _, c := range []struct {
		name string
		data []byte
		want uint32
	}{
		{"IPv4 /32 in /24 in /16", frame(false, ethPIP, a("10.0.0.1"), a("198.18.5.7"), nil), 0x10102},
		{"IPv4 /24", frame(false, ethPIP, a("10.0.0.1"), a("198.18.5.8"), nil), 0x10101},
		{"IPv4 /16", frame(false, ethPIP, a("10.0.0.1"), a("198.18.6.1"), nil), 0x10100},
		{"IPv4 destination before source", frame(false, ethPIP, a("198.19.1.1"), a("198.18.6.1"), nil), 0x10100},
		{"IPv4 source", frame(false, ethPIP, a("198.19.1.1"), a("10.0.0.2"), nil), 0x10103},
		{"IPv4 source /0", frame(false, ethPIP, a("10.0.0.1"), a("10.0.0.2"), nil), 0x20106},
		{"802.1Q IPv4", frame(true, ethPIP, a("10.0.0.1"), a("198.18.5.7"), nil), 0x10102},
		{"IPv6 destination", frame(false, ethPIPv6, a("2001:db8:9::1"), a("2001:db8:2::1"), nil), 0x10104},
		{"IPv6 source", frame(false, ethPIPv6, a("2001:db8:1::5"), a("2001:db9::1"), nil), 0x10105},
		{"IPv6 miss", frame(false, ethPIPv6, a("2001:db9::5"), a("2001:db9::1"), nil), 0},
		{"802.1Q IPv6", frame(true, ethPIPv6, a("2001:db8:9::1"), a("2001:db8:2::1"), nil), 0x10104},
		{"ARP", frame(false, 0x0806, netip.Addr{}, netip.Addr{}, make([]byte, 28)), 0},
	} {
		got, err := prog.Run(&ebpf.RunOptions{Data: c.data})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}
