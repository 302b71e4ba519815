package kernel

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// nla is one netlink attribute: length, type, payload, padding.
func nla(typ uint16, payload []byte) []byte {
	ne := binary.NativeEndian
	b := ne.AppendUint16(nil, uint16(4+len(payload)))
	b = ne.AppendUint16(b, typ)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u32b(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.NativeEndian.AppendUint32(b, v)
	}
	return b
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// Every leaf kind's attributes, byte for byte as the kernel's uapi
// structs and attribute numbers lay them out (what tc sends for the same
// options), and the decoder reads them back.
func TestLeafEncodingBytes(t *testing.T) {
	kind := func(s string) []byte { return nla(tcwire.TCAKind, append([]byte(s), 0)) }
	const nested = 0 // tc writes nested options without NLA_F_NESTED
	tests := []struct {
		name string
		leaf model.LeafQdisc
		want []byte
	}{
		{"pfifo", model.LeafQdisc{Kind: "pfifo", Limit: 1000},
			cat(kind("pfifo"), nla(tcwire.TCAOptions, u32b(1000)))},
		{"pfifo default", model.LeafQdisc{Kind: "pfifo"}, kind("pfifo")},
		{"bfifo", model.LeafQdisc{Kind: "bfifo", Limit: 31250},
			cat(kind("bfifo"), nla(tcwire.TCAOptions, u32b(31250)))},
		// tc qdisc add ... fq_codel limit 1000 flows 64 quantum 300 interval 50ms target 2ms
		{"fq_codel", model.LeafQdisc{Kind: "fq_codel", Limit: 1000, Flows: 64, Quantum: 300,
			Interval: 50 * time.Millisecond, Target: 2 * time.Millisecond},
			cat(kind("fq_codel"), nla(tcwire.TCAOptions|nested, cat(
				nla(2, u32b(1000)), nla(5, u32b(64)), nla(6, u32b(300)), nla(3, u32b(50000)), nla(1, u32b(2000)))))},
		{"fq_codel target only", model.LeafQdisc{Kind: "fq_codel", Target: 5 * time.Millisecond},
			cat(kind("fq_codel"), nla(tcwire.TCAOptions|nested, nla(1, u32b(5000))))},
		{"fq_codel defaults", model.LeafQdisc{Kind: "fq_codel"}, kind("fq_codel")},
		// struct tc_sfq_qopt_v1: v0 {quantum, perturb_period, limit, divisor, flows}, then 52 bytes of 0
		{"sfq", model.LeafQdisc{Kind: "sfq", Limit: 127, Flows: 64, Quantum: 1514},
			cat(kind("sfq"), nla(tcwire.TCAOptions, append(u32b(1514, 0, 127, 0, 64), make([]byte, 52)...)))},
		{"sfq defaults", model.LeafQdisc{Kind: "sfq"}, kind("sfq")},
		// TCA_CAKE_DIFFSERV_MODE = 3; CAKE_DIFFSERV_BESTEFFORT = 3, DIFFSERV4 = 1
		{"cake besteffort", model.LeafQdisc{Kind: "cake", Diffserv: "besteffort"},
			cat(kind("cake"), nla(tcwire.TCAOptions|nested, nla(3, u32b(3))))},
		{"cake diffserv4", model.LeafQdisc{Kind: "cake", Diffserv: "diffserv4"},
			cat(kind("cake"), nla(tcwire.TCAOptions|nested, nla(3, u32b(1))))},
		{"cake defaults", model.LeafQdisc{Kind: "cake"}, kind("cake")},
		{"other kind", model.LeafQdisc{Kind: "codel", Limit: 5}, kind("codel")},
	}
	for _, tt := range tests {
		var a tcwire.Attrs
		encodeLeaf(&a, &tt.leaf)
		if !bytes.Equal(a.B, tt.want) {
			t.Errorf("%s:\n got % x\nwant % x", tt.name, a.B, tt.want)
			continue
		}
		o, err := parseObject(append(tcwire.Tcmsg{}.AppendTo(nil), a.B...))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got := decodeLeaf(o)
		want := tt.leaf
		if want.Kind == "codel" {
			want.Limit = 0 // sent without options
		}
		if *got != want {
			t.Errorf("%s: decoded %+v, want %+v", tt.name, *got, want)
		}
	}
}

// The segmenting leaf is a TBF at model.SegmentRate: its bucket (max_size)
// and its queue's limit come back from the bytes the kernel would dump,
// exactly (whole model.SegmentGrain buckets, one tick each), and a leaf
// without a max_size is refused before anything is sent.
func TestSegmentingLeafRoundTrip(t *testing.T) {
	for _, seg := range []tbf.Size{1536, 9024, 64 * 1024} {
		l := model.LeafQdisc{Kind: model.LeafTBF, Limit: 31250, Segment: seg}
		var a tcwire.Attrs
		if err := encodeLeaf(&a, &l); err != nil {
			t.Fatal(err)
		}
		o, err := parseObject(append(tcwire.Tcmsg{}.AppendTo(nil), a.B...))
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeLeaf(o); *got != l {
			t.Errorf("segment %s: decoded %+v, want %+v", seg, *got, l)
		}
	}
	var a tcwire.Attrs
	if err := encodeLeaf(&a, &model.LeafQdisc{Kind: model.LeafTBF, Limit: 1000}); err == nil {
		t.Errorf("a tbf leaf without Segment encoded as % x", a.B)
	}
}
