package tcwire

import (
	"bytes"
	"encoding/binary"
	"testing"
)

var hostOrder = binary.NativeEndian

// le builds the expected bytes of a C struct field by field: each value is
// written in host order at the width of its Go type.
func le(fields ...any) []byte {
	var b []byte
	for _, f := range fields {
		switch v := f.(type) {
		case uint8:
			b = append(b, v)
		case uint16:
			b = hostOrder.AppendUint16(b, v)
		case int16:
			b = hostOrder.AppendUint16(b, uint16(v))
		case uint32:
			b = hostOrder.AppendUint32(b, v)
		case int32:
			b = hostOrder.AppendUint32(b, uint32(v))
		case uint64:
			b = hostOrder.AppendUint64(b, v)
		case []byte:
			b = append(b, v...)
		default:
			panic(f)
		}
	}
	return b
}

// wantRatespec is struct tc_ratespec: cell_log u8, linklayer u8, overhead
// u16, cell_align s16, mpu u16, rate u32.
func wantRatespec(linklayer uint8, overhead, mpu uint16, rate uint32) []byte {
	return le(uint8(0), linklayer, overhead, int16(0), mpu, rate)
}

// checkStruct pins one encoded C struct: b must be want (wantLen bytes),
// parse must give v back, and parse must refuse b without its last byte.
func checkStruct[T comparable](t *testing.T, name string, b, want []byte, wantLen int, parse func([]byte) (T, bool), v T) {
	t.Helper()
	if !bytes.Equal(b, want) || len(b) != wantLen {
		t.Fatalf("%s (%d bytes, want %d)\n% x\nwant\n% x", name, len(b), wantLen, b, want)
	}
	if back, ok := parse(b); !ok || back != v {
		t.Errorf("%s round trip %+v, want %+v", name, back, v)
	}
	if _, ok := parse(b[:len(b)-1]); ok {
		t.Errorf("short %s accepted", name)
	}
}

func TestTcmsgWireLayout(t *testing.T) {
	m := Tcmsg{Ifindex: 7, Handle: 0x10002, Parent: 0x10000, Info: 0x640008}
	b := m.AppendTo([]byte{0xaa})
	want := append([]byte{0xaa}, le(uint8(0), uint8(0), uint16(0), uint32(7), uint32(0x10002), uint32(0x10000), uint32(0x640008))...)
	if !bytes.Equal(b, want) || len(b)-1 != TcmsgLen {
		t.Fatalf("tcmsg\n% x\nwant\n% x", b, want)
	}
	back, rest, err := ParseTcmsg(append(b[1:], 1, 2, 3, 4))
	if err != nil || back != m || !bytes.Equal(rest, []byte{1, 2, 3, 4}) {
		t.Errorf("round trip: %+v %v %v", back, rest, err)
	}
	if _, _, err := ParseTcmsg(b[1:TcmsgLen]); err == nil {
		t.Error("short tcmsg accepted")
	}
	prio, proto := InfoPrioProto(FilterInfo(100, 0x0800))
	if prio != 100 || proto != 0x0800 || !bytes.Equal(hostOrder.AppendUint16(nil, uint16(FilterInfo(100, 0x0800))), []byte{0x08, 0x00}) {
		t.Errorf("filter info: prio %d proto %#x", prio, proto)
	}
}

func TestRatespecWireLayout(t *testing.T) {
	r := Ratespec{Linklayer: 2, Overhead: 44, MPU: 96, Rate: 125000}
	b := r.AppendTo(nil)
	if want := wantRatespec(2, 44, 96, 125000); !bytes.Equal(b, want) || len(b) != RatespecLen {
		t.Fatalf("tc_ratespec\n% x\nwant\n% x", b, want)
	}
	if back := ParseRatespec(b); back != r {
		t.Errorf("round trip %+v, want %+v", back, r)
	}
	if Rate32(1<<33) != 0xFFFFFFFF || Rate32(5) != 5 {
		t.Error("Rate32 does not saturate")
	}
}

func TestHTBOptWireLayout(t *testing.T) {
	o := HTBOpt{
		Rate: Ratespec{Linklayer: 1, Rate: 1000}, Ceil: Ratespec{Linklayer: 1, Overhead: 4, Rate: 2000},
		Buffer: 11, CBuffer: 12, Quantum: 13, Level: 14, Prio: 15,
	}
	want := le(wantRatespec(1, 0, 0, 1000), wantRatespec(1, 4, 0, 2000), uint32(11), uint32(12), uint32(13), uint32(14), uint32(15))
	checkStruct(t, "tc_htb_opt", o.AppendTo(nil), want, HTBOptLen, ParseHTBOpt, o)
}

func TestHTBGlobWireLayout(t *testing.T) {
	g := HTBGlob{Version: HTBVersion, Rate2Quantum: 10, Defcls: 0x20, Debug: 4, DirectPkts: 5}
	b := g.AppendTo(nil)
	if want := le(uint32(3), uint32(10), uint32(0x20), uint32(4), uint32(5)); !bytes.Equal(b, want) || len(b) != HTBGlobLen {
		t.Fatalf("tc_htb_glob\n% x\nwant\n% x", b, want)
	}
	if d, ok := HTBGlobDefcls(b[:12]); !ok || d != 0x20 {
		t.Errorf("defcls %#x %v", d, ok)
	}
	if _, ok := HTBGlobDefcls(b[:11]); ok {
		t.Error("tc_htb_glob without defcls accepted")
	}
}

func TestTBFQoptWireLayout(t *testing.T) {
	q := TBFQopt{Rate: Ratespec{Linklayer: 1, MPU: 64, Rate: 1e6}, Peakrate: Ratespec{Linklayer: 1, Rate: 2e6}, Limit: 30000, Buffer: 77, MTU: 88}
	want := le(wantRatespec(1, 0, 64, 1e6), wantRatespec(1, 0, 0, 2e6), uint32(30000), uint32(77), uint32(88))
	checkStruct(t, "tc_tbf_qopt", q.AppendTo(nil), want, TBFQoptLen, ParseTBFQopt, q)
}

func TestSizespecWireLayout(t *testing.T) {
	b := Sizespec{Overhead: -4}.AppendTo(nil)
	// cell_log, size_log u8, cell_align s16, overhead s32, linklayer, mpu,
	// mtu, tsize u32.
	want := le(uint8(0), uint8(0), int16(0), int32(-4), uint32(0), uint32(0), uint32(0), uint32(0))
	if !bytes.Equal(b, want) || len(b) != SizespecLen {
		t.Fatalf("tc_sizespec\n% x\nwant\n% x", b, want)
	}
	if s, ok := ParseSizespec(b); !ok || s.Overhead != -4 {
		t.Errorf("overhead %d %v", s.Overhead, ok)
	}
	if _, ok := ParseSizespec(b[:7]); ok {
		t.Error("tc_sizespec without overhead accepted")
	}
}

func TestSFQQoptWireLayout(t *testing.T) {
	q := SFQQopt{Quantum: 1514, PerturbPeriod: 2, Limit: 127, Divisor: 1024, Flows: 64}
	b := q.AppendV1To(nil)
	want := le(uint32(1514), uint32(2), uint32(127), uint32(1024), uint32(64))
	checkStruct(t, "tc_sfq_qopt", b[:SFQQoptLen], want, SFQQoptLen, ParseSFQQopt, q)
	// The rest of tc_sfq_qopt_v1 (depth, headdrop, RED) is 0: defaults.
	if len(b) != SFQQoptV1Len || !bytes.Equal(b[SFQQoptLen:], make([]byte, SFQQoptV1Len-SFQQoptLen)) {
		t.Errorf("tc_sfq_qopt_v1 tail (%d bytes) % x", len(b), b[SFQQoptLen:])
	}
}

func TestMirredWireLayout(t *testing.T) {
	m := Mirred{Action: TCActStolen, Eaction: TCAEgressRedir, Ifindex: 42}
	// tc_gen: index, capab, action, refcnt, bindcnt; eaction, ifindex.
	want := le(uint32(0), uint32(0), uint32(4), int32(0), int32(0), int32(1), uint32(42))
	checkStruct(t, "tc_mirred", m.AppendTo(nil), want, MirredLen, ParseMirred, m)
}

func TestStatsWireLayout(t *testing.T) {
	if s, ok := ParseStatsBasic(le(uint64(1<<40), uint32(7))); !ok || s.Bytes != 1<<40 || s.Packets != 7 {
		t.Errorf("gnet_stats_basic %+v %v", s, ok)
	}
	// qlen, backlog, drops, requeues, overlimits.
	if q, ok := ParseStatsQueue(le(uint32(1), uint32(2), uint32(3), uint32(99), uint32(5))); !ok || q != (StatsQueue{1, 2, 3, 5}) {
		t.Errorf("gnet_stats_queue %+v %v", q, ok)
	}
	if bps, ok := ParseRateEstBps(le(uint32(1000), uint32(9)), false); !ok || bps != 1000 {
		t.Errorf("gnet_stats_rate_est %d %v", bps, ok)
	}
	if bps, ok := ParseRateEstBps(le(uint64(1<<33), uint64(9)), true); !ok || bps != 1<<33 {
		t.Errorf("gnet_stats_rate_est64 %d %v", bps, ok)
	}
	if _, ok := ParseRateEstBps(le(uint32(1000), uint32(9)), true); ok {
		t.Error("short gnet_stats_rate_est64 accepted")
	}
	// lends, borrows, giants, tokens, ctokens.
	if x, ok := ParseHTBXstats(le(uint32(1), uint32(2), uint32(3), int32(-4), int32(5))); !ok || x != (HTBXstats{-4, 5}) {
		t.Errorf("tc_htb_xstats %+v %v", x, ok)
	}
	if _, ok := ParseHTBXstats(make([]byte, 24)); ok {
		t.Error("xstats of another size read as tc_htb_xstats")
	}
}

func TestAttrsEncodeAndWalk(t *testing.T) {
	var a Attrs
	a.String(TCAKind, "htb")
	a.Nest(TCAOptions, func() { a.U32(1, 5); a.U64(2, 1<<40) })
	a.NestPlain(TCAStab, func() { a.Bytes(TCAStabBase, []byte{1, 2, 3}) })
	want := le(uint16(8), uint16(TCAKind), []byte("htb\x00"),
		uint16(24), uint16(TCAOptions|NLAFNested), uint16(8), uint16(1), uint32(5), uint16(12), uint16(2), uint64(1<<40),
		uint16(12), uint16(TCAStab), uint16(7), uint16(TCAStabBase), []byte{1, 2, 3, 0})
	if !bytes.Equal(a.B, want) {
		t.Fatalf("attributes\n% x\nwant\n% x", a.B, want)
	}
	var types []uint16
	var kind string
	if err := EachAttr(a.B, func(typ uint16, p []byte) {
		types = append(types, typ)
		if typ == TCAKind {
			kind = Kind(p)
		}
	}); err != nil || kind != "htb" || len(types) != 3 || types[1] != TCAOptions {
		t.Errorf("walk: %v kind %q, %v", types, kind, err)
	}
	if err := EachAttr([]byte{200, 0, 1, 0}, func(uint16, []byte) {}); err == nil {
		t.Error("attribute longer than its buffer accepted")
	}
	if Kind([]byte("fq_codel\x00junk")) != "fq_codel" {
		t.Error("kind not cut at NUL")
	}
}
