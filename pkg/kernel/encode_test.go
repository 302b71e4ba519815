package kernel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// encoded builds a dumped-object view of what an encoder wrote: kind and
// options as the kernel would echo them back.
func encoded(t *testing.T, m tcwire.Tcmsg, fn func(a *tcwire.Attrs)) object {
	t.Helper()
	var a tcwire.Attrs
	a.B = m.AppendTo(nil)
	fn(&a)
	o, err := parseObject(a.B)
	if err != nil {
		t.Fatalf("parseObject: %v", err)
	}
	return o
}

func TestHTBClassRoundTrip(t *testing.T) {
	for _, rate := range []tbf.Rate{8 * tbf.Kbit, 10 * tbf.Mbit, 34 * tbf.Gbit, 40 * tbf.Gbit, 100 * tbf.Gbit} {
		burst := tbf.RecommendedBurst(rate)
		buf, err := tbf.BufferTicks(rate, burst)
		if err != nil {
			t.Fatal(err)
		}
		in := model.Class{Handle: model.MakeHandle(1, 0x105), Parent: model.RootClass, Rate: rate, Ceil: 2 * rate,
			Buffer: buf, CBuffer: buf + 7, Quantum: psched.HTBQuantum(rate.BytesPerSecond()), Prio: 3}
		o := encoded(t, tcwire.Tcmsg{Handle: uint32(in.Handle), Parent: uint32(in.Parent)}, func(a *tcwire.Attrs) { encodeHTBClass(a, &in) })
		if o.kind != "htb" {
			t.Fatalf("kind %q", o.kind)
		}
		out, err := decodeHTBClass(o)
		if err != nil {
			t.Fatal(err)
		}
		if !model.ClassParamsEqual(in, out) || out.Handle != in.Handle || out.Parent != in.Parent {
			t.Errorf("rate %s: decoded %+v, want %+v", rate, out, in)
		}
		// The 32-bit fields are saturated, never 0, and 64-bit attributes
		// appear exactly when needed.
		var parms []byte
		var has64 bool
		_ = tcwire.EachAttr(o.options, func(typ uint16, p []byte) {
			switch typ {
			case tcwire.TCAHTBParms:
				parms = p
			case tcwire.TCAHTBRate64:
				has64 = true
			}
		})
		r32 := binary.NativeEndian.Uint32(parms[8:])
		if r32 == 0 || (rate.BytesPerSecond() > 0xFFFFFFFF) != has64 {
			t.Errorf("rate %s: rate.rate %d, RATE64 present %v", rate, r32, has64)
		}
		if parms[1] != tcwire.TCLinklayerEth {
			t.Errorf("rate %s: linklayer %d, want ethernet", rate, parms[1])
		}
	}
}

func TestHTBQdiscRoundTrip(t *testing.T) {
	q := model.Qdisc{Kind: model.ShaperHTB, Handle: model.RootQdisc, DefaultMinor: 2}
	o := encoded(t, tcwire.Tcmsg{Handle: uint32(q.Handle), Parent: uint32(model.HandleRoot)}, func(a *tcwire.Attrs) { encodeHTBQdisc(a, &q) })
	def, err := decodeHTBQdisc(o)
	if err != nil || def != 2 {
		t.Fatalf("default minor %d, %v; want 2", def, err)
	}
}

func TestTBFRoundTrip(t *testing.T) {
	cases := []model.TBFParams{
		{Rate: 20 * tbf.Mbit, Burst: 32 * tbf.Kibibyte, Limit: 150000},
		{Rate: 40 * tbf.Gbit, Burst: 4 * tbf.Mebibyte, Limit: 300 * tbf.Mebibyte},
		{Rate: 10 * tbf.Mbit, Burst: 16000, Limit: 80000, PeakRate: 50 * tbf.Mbit, MTU: 1514},
	}
	for _, in := range cases {
		o := encoded(t, tcwire.Tcmsg{}, func(a *tcwire.Attrs) {
			if err := encodeTBFQdisc(a, &in); err != nil {
				t.Fatal(err)
			}
		})
		// The parms carry tc's buffer ticks for the burst; decoding them
		// gives back an equal TBF (the kernel's own ticks are checked by
		// the integration tests).
		out, err := decodeTBF(o)
		if err != nil {
			t.Fatal(err)
		}
		if !model.TBFParamsEqual(in, *out) {
			t.Errorf("%+v: decoded %+v", in, *out)
		}
		var burst uint32
		_ = tcwire.EachAttr(o.options, func(typ uint16, p []byte) {
			if typ == tcwire.TCATBFBurst {
				burst = binary.NativeEndian.Uint32(p)
			}
		})
		if burst != uint32(in.Burst) {
			t.Errorf("%+v: TCA_TBF_BURST %d, want the burst", in, burst)
		}
	}
	if err := encodeTBFQdisc(&tcwire.Attrs{}, &model.TBFParams{Rate: 1, Burst: 1}); err == nil {
		t.Error("tbf at 1 bit/s: no error")
	}
}

func TestRedirectRoundTrip(t *testing.T) {
	o := encoded(t, redirectFilterMsg(3), func(a *tcwire.Attrs) { encodeRedirectFilter(a, 42) })
	if ifb, ok := decodeRedirect(o); !ok || ifb != 42 {
		t.Fatalf("decodeRedirect = %d, %v; want 42, true", ifb, ok)
	}
	// tcm_info: pref, then ETH_P_ALL in network order.
	proto := binary.NativeEndian.AppendUint16(nil, uint16(o.msg.Info))
	if uint16(o.msg.Info>>16) != RedirectPref || !bytes.Equal(proto, []byte{0x00, 0x03}) {
		t.Errorf("tcm_info %#x: want pref %#x, protocol all", o.msg.Info, RedirectPref)
	}
	if _, ok := decodeRedirect(object{kind: "bpf"}); ok {
		t.Error("a bpf filter decoded as a redirect")
	}
}

func TestLeafEncoding(t *testing.T) {
	o := encoded(t, tcwire.Tcmsg{}, func(a *tcwire.Attrs) { encodeLeaf(a, &model.LeafQdisc{Kind: "bfifo", Limit: 30000}) })
	if l := decodeLeaf(o); l.Kind != "bfifo" || l.Limit != 30000 {
		t.Errorf("bfifo leaf decoded as %+v", l)
	}
	o = encoded(t, tcwire.Tcmsg{}, func(a *tcwire.Attrs) { encodeLeaf(a, &model.LeafQdisc{Kind: "fq_codel"}) })
	if o.kind != "fq_codel" || o.options != nil {
		t.Errorf("fq_codel leaf: kind %q options %v; want the kind alone", o.kind, o.options)
	}
}

func TestParseStats2(t *testing.T) {
	ne := binary.NativeEndian
	var a tcwire.Attrs
	a.Nest(tcwire.TCAStats2, func() {
		basic := ne.AppendUint64(nil, 123456789)
		basic = ne.AppendUint32(basic, 1000)
		basic = append(basic, 0, 0, 0, 0)
		a.Bytes(tcwire.TCAStatsBasic, basic)
		a.U64(tcwire.TCAStatsPkt64, 5000000000)
		var q []byte
		for _, v := range []uint32{7, 9000, 11, 0, 13} { // qlen backlog drops requeues overlimits
			q = ne.AppendUint32(q, v)
		}
		a.Bytes(tcwire.TCAStatsQueue, q)
		var x []byte
		for _, v := range []uint32{1, 2, 3, uint32(0xFFFFFFFF - 99), 200} { // lends borrows giants tokens ctokens
			x = ne.AppendUint32(x, v)
		}
		a.Bytes(tcwire.TCAStatsApp, x)
	})
	var s *model.Stats
	_ = tcwire.EachAttr(a.B, func(typ uint16, p []byte) { s = parseStats2(p) })
	want := model.Stats{Bytes: 123456789, Packets: 5000000000, Qlen: 7, Backlog: 9000, Drops: 11, Overlimits: 13, Tokens: -100, CTokens: 200}
	if s == nil || *s != want {
		t.Fatalf("parseStats2 = %+v, want %+v", s, want)
	}
}

func TestErrorText(t *testing.T) {
	op := &netlink.OpError{Op: "receive", Err: unix.ENOENT, Message: "Specified qdisc kind is unknown"}
	err := kernelError(op, "lan0", model.OpAdd, "leaf qdisc fq_codel of class 1:105 (user alice)", "fq_codel")
	if !errors.Is(err, ErrKindUnsupported) || !errors.Is(err, unix.ENOENT) {
		t.Errorf("%v: want ErrKindUnsupported and ENOENT", err)
	}
	for _, s := range []string{"lan0", "add", "class 1:105 (user alice)", "fq_codel", "Specified qdisc kind is unknown"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q lacks %q", err, s)
		}
	}
	busy := kernelError(&netlink.OpError{Op: "receive", Err: unix.EBUSY, Message: "HTB class in use"}, "lan0", model.OpDelete, "class 1:2", "htb")
	if errors.Is(busy, ErrKindUnsupported) {
		t.Errorf("%v: a busy class is not an unsupported kind", busy)
	}
	if got := labelSuffix(model.Labels{Kind: "tier", Tier: "gold"}); got != " (tier gold)" {
		t.Errorf("tier label %q", got)
	}
}

func TestAttrsNesting(t *testing.T) {
	var a tcwire.Attrs
	a.Nest(1, func() {
		a.String(2, "abc") // 4+4 = 8 bytes padded
		a.U32(3, 7)        // 8 bytes
	})
	if len(a.B) != 20 || binary.NativeEndian.Uint16(a.B) != 20 || binary.NativeEndian.Uint16(a.B[2:]) != 1|tcwire.NLAFNested {
		t.Fatalf("nested attribute header %v", a.B[:4])
	}
	var kinds []uint16
	if err := tcwire.EachAttr(a.B[4:], func(typ uint16, p []byte) { kinds = append(kinds, typ) }); err != nil || len(kinds) != 2 {
		t.Fatalf("inner attributes %v, %v", kinds, err)
	}
	if err := tcwire.EachAttr([]byte{200, 0, 1, 0}, func(uint16, []byte) {}); err == nil {
		t.Error("an attribute longer than its buffer: no error")
	}
}
