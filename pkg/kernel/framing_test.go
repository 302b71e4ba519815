package kernel

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// wantRatespec is struct tc_ratespec written field by field.
func wantRatespec(linklayer uint8, overhead, mpu uint16, rate uint32) []byte {
	ne := binary.NativeEndian
	b := []byte{0, linklayer} // cell_log, linklayer
	b = ne.AppendUint16(b, overhead)
	b = ne.AppendUint16(b, 0) // cell_align
	b = ne.AppendUint16(b, mpu)
	return ne.AppendUint32(b, rate)
}

func optionAttr(t *testing.T, options []byte, typ uint16) []byte {
	t.Helper()
	var got []byte
	_ = tcwire.EachAttr(options, func(ty uint16, p []byte) {
		if ty == typ {
			got = p
		}
	})
	if got == nil {
		t.Fatalf("attribute %d missing", typ)
	}
	return got
}

func TestHTBClassFramingBytes(t *testing.T) {
	for _, tt := range []struct {
		f         psched.Framing
		linklayer uint8
	}{
		{psched.Framing{}, 1},
		{psched.Framing{Overhead: 34}, 1},                     // PPPoE over VDSL
		{psched.Framing{Overhead: 44, MPU: 96, ATM: true}, 2}, // PPPoA/LLC over ADSL
	} {
		c := model.Class{Handle: model.MakeHandle(1, 0x100), Parent: model.RootClass,
			Rate: 10 * tbf.Mbit, Ceil: 20 * tbf.Mbit, Buffer: 1000, CBuffer: 1000, Quantum: 12500, Framing: tt.f}
		o := encoded(t, tcwire.Tcmsg{}, func(a *tcwire.Attrs) { encodeHTBClass(a, &c) })
		parms := optionAttr(t, o.options, tcwire.TCAHTBParms)
		want := append(wantRatespec(tt.linklayer, uint16(tt.f.Overhead), tt.f.MPU, 1250000),
			wantRatespec(tt.linklayer, uint16(tt.f.Overhead), tt.f.MPU, 2500000)...)
		if !bytes.Equal(parms[:24], want) {
			t.Errorf("%+v: rate specs\n% x\nwant\n% x", tt.f, parms[:24], want)
		}
		out, err := decodeHTBClass(o)
		if err != nil {
			t.Fatal(err)
		}
		if out.Framing != tt.f || !model.ClassParamsEqual(c, out) {
			t.Errorf("%+v: decoded framing %+v", tt.f, out.Framing)
		}
	}
	// A class that differs only in its framing is not equal: a changed
	// overhead is applied.
	a := model.Class{Rate: tbf.Mbit, Ceil: tbf.Mbit}
	b := a
	b.Framing.Overhead = 8
	if model.ClassParamsEqual(a, b) {
		t.Error("classes with different overheads compare equal")
	}
}

func TestTBFFramingBytes(t *testing.T) {
	f := psched.Framing{Overhead: 34, MPU: 64}
	in := model.TBFParams{Rate: 10 * tbf.Mbit, Burst: 16000, Limit: 80000, PeakRate: 50 * tbf.Mbit, MTU: 1514, Framing: f}
	o := encoded(t, tcwire.Tcmsg{}, func(a *tcwire.Attrs) {
		if err := encodeTBFQdisc(a, &in); err != nil {
			t.Fatal(err)
		}
	})
	parms := optionAttr(t, o.options, tcwire.TCATBFParms)
	want := append(wantRatespec(1, 34, 64, 1250000), wantRatespec(1, 34, 64, 6250000)...)
	if !bytes.Equal(parms[:24], want) {
		t.Errorf("rate specs\n% x\nwant\n% x", parms[:24], want)
	}
	// The kernel dumps buffer = l2t(burst) at the framing: decoding such a
	// dump gives back the burst that was set.
	rc := f.RateConfig(in.Rate.BytesPerSecond())
	ticks := psched.TBFFromBurst(rc, 16000).DumpTicks()
	binary.NativeEndian.PutUint32(parms[28:], ticks)
	prc := f.RateConfig(in.PeakRate.BytesPerSecond())
	binary.NativeEndian.PutUint32(parms[32:], psched.TBFFromBurst(prc, 1514).DumpTicks())
	out, err := decodeTBF(o)
	if err != nil {
		t.Fatal(err)
	}
	if out.Framing != f || !model.TBFParamsEqual(in, *out) {
		t.Errorf("decoded %+v, want %+v", *out, in)
	}
}

// TCA_STAB as `tc qdisc add ... root stab overhead -4 htb` sends it
// (recorded with strace, iproute2 6.1): an unflagged nest holding
// TCA_STAB_BASE, struct tc_sizespec with only the overhead set; and the
// dump decoder reads the overhead back.
func TestSizeTableBytes(t *testing.T) {
	var a tcwire.Attrs
	encodeSizeTable(&a, -4)
	want := []byte{
		0x20, 0x00, 0x08, 0x00, // TCA_STAB, 32 bytes
		0x1c, 0x00, 0x01, 0x00, // TCA_STAB_BASE, 28 bytes
		0x00, 0x00, 0x00, 0x00, // cell_log, size_log, cell_align
		0xfc, 0xff, 0xff, 0xff, // overhead -4
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // linklayer, mpu, mtu, tsize
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the recorded bytes are little-endian")
	}
	if !bytes.Equal(a.B, want) {
		t.Errorf("size table\n% x\nwant\n% x", a.B, want)
	}
	var none tcwire.Attrs
	encodeSizeTable(&none, 0)
	if len(none.B) != 0 {
		t.Errorf("overhead 0 sends a size table: % x", none.B)
	}
	o, err := parseObject(append(tcwire.Tcmsg{}.AppendTo(nil), append([]byte{8, 0, 1, 0, 'h', 't', 'b', 0}, a.B...)...))
	if err != nil || o.stabOverhead != -4 || o.kind != "htb" {
		t.Errorf("decoded %+v, %v", o, err)
	}
}
