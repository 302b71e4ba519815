package kernel

import (
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// HTBR2Q is the r2q shaperd gives its HTB root qdisc. Every class carries
// an explicit quantum, so r2q only matters for classes made by others.
const HTBR2Q = 10

// encodeHTBQdisc returns TCA_KIND and TCA_OPTIONS of an HTB root qdisc.
func encodeHTBQdisc(a *tcwire.Attrs, q *model.Qdisc) {
	a.String(tcwire.TCAKind, "htb")
	a.Nest(tcwire.TCAOptions, func() {
		g := tcwire.HTBGlob{Version: tcwire.HTBVersion, Rate2Quantum: HTBR2Q, Defcls: uint32(q.DefaultMinor)}
		a.Bytes(tcwire.TCAHTBInit, g.AppendTo(make([]byte, 0, tcwire.HTBGlobLen)))
	})
}

// encodeHTBClass returns TCA_KIND and TCA_OPTIONS of an HTB class: the
// link framing (overhead, mpu, link layer) in both rate specs, the
// 32-bit rate fields saturated (never 0), TCA_HTB_RATE64/CEIL64 when the
// rate needs more than 32 bits, buffer/cbuffer ticks and quantum as given.
func encodeHTBClass(a *tcwire.Attrs, c *model.Class) {
	rate, ceil := c.Rate.BytesPerSecond(), c.Ceil.BytesPerSecond()
	a.String(tcwire.TCAKind, "htb")
	a.Nest(tcwire.TCAOptions, func() {
		o := tcwire.HTBOpt{
			Rate: framedRatespec(c.Framing, rate), Ceil: framedRatespec(c.Framing, ceil),
			Buffer: c.Buffer, CBuffer: c.CBuffer, Quantum: c.Quantum, Prio: c.Prio, // level: the kernel's
		}
		a.Bytes(tcwire.TCAHTBParms, o.AppendTo(make([]byte, 0, tcwire.HTBOptLen)))
		if rate > 0xFFFFFFFF {
			a.U64(tcwire.TCAHTBRate64, rate)
		}
		if ceil > 0xFFFFFFFF {
			a.U64(tcwire.TCAHTBCeil64, ceil)
		}
	})
}

// encodeTBFQdisc returns TCA_KIND and TCA_OPTIONS of a TBF root qdisc. It
// sends TCA_TBF_BURST (so the kernel's max_size is the burst) and, with a
// peak rate, TCA_TBF_PBURST = MTU, plus 64-bit rates when needed. Both rate
// specs carry the link framing; the kernel then computes the buckets as
// l2t(burst) and l2t(mtu) with it.
func encodeTBFQdisc(a *tcwire.Attrs, p *model.TBFParams) error {
	rate, peak := p.Rate.BytesPerSecond(), p.PeakRate.BytesPerSecond()
	if rate == 0 {
		return fmt.Errorf("tbf rate %s is below 8bit/s", p.Rate)
	}
	if p.Burst == 0 || p.Burst > 0xFFFFFFFF || p.Limit > 0xFFFFFFFF || p.MTU > 0xFFFFFFFF {
		return fmt.Errorf("tbf burst %s, limit %s or mtu %s outside the kernel's 32-bit fields", p.Burst, p.Limit, p.MTU)
	}
	buf, err := tbf.BufferTicks(p.Rate, p.Burst)
	if err != nil {
		return fmt.Errorf("tbf burst: %w", err)
	}
	var mtu uint32
	if peak != 0 {
		if mtu, err = tbf.BufferTicks(p.PeakRate, p.MTU); err != nil {
			return fmt.Errorf("tbf mtu: %w", err)
		}
	}
	a.String(tcwire.TCAKind, "tbf")
	a.Nest(tcwire.TCAOptions, func() {
		q := tcwire.TBFQopt{Rate: framedRatespec(p.Framing, rate), Limit: uint32(p.Limit), Buffer: buf, MTU: mtu}
		if peak != 0 {
			q.Peakrate = framedRatespec(p.Framing, peak)
		}
		a.Bytes(tcwire.TCATBFParms, q.AppendTo(make([]byte, 0, tcwire.TBFQoptLen)))
		if rate > 0xFFFFFFFF {
			a.U64(tcwire.TCATBFRate64, rate)
		}
		if peak > 0xFFFFFFFF {
			a.U64(tcwire.TCATBFPrate64, peak)
		}
		a.U32(tcwire.TCATBFBurst, uint32(p.Burst))
		if peak != 0 {
			a.U32(tcwire.TCATBFPburst, uint32(p.MTU))
		}
	})
	return nil
}

// encodeSizeTable appends TCA_STAB with struct tc_sizespec {overhead} and
// no table (tsize 0), as `tc qdisc ... stab overhead N` sends it: the
// kernel then counts every packet as len + overhead bytes (at least 1)
// before the qdisc and its classes see it. Overhead 0 sends nothing (no
// size table).
func encodeSizeTable(a *tcwire.Attrs, overhead int32) {
	if overhead == 0 {
		return
	}
	a.NestPlain(tcwire.TCAStab, func() {
		a.Bytes(tcwire.TCAStabBase, tcwire.Sizespec{Overhead: overhead}.AppendTo(nil))
	})
}

// encodeLeaf returns TCA_KIND and TCA_OPTIONS of a leaf qdisc:
//   - pfifo, bfifo: struct tc_fifo_qopt {limit} when a limit is set;
//   - fq_codel: nested TCA_FQ_CODEL_LIMIT, FLOWS, QUANTUM, INTERVAL, TARGET
//     (u32; times in microseconds), in tc's order, each only when set;
//   - sfq: struct tc_sfq_qopt_v1 {v0 {quantum, perturb_period 0, limit,
//     divisor 0, flows}, the rest 0} when any is set (0 keeps the
//     kernel's value);
//   - cake: nested TCA_CAKE_DIFFSERV_MODE when a mode is set (no
//     bandwidth: cake runs unlimited under its HTB class);
//   - tbf (model.LeafTBF, the segmenting leaf): a TBF at
//     model.SegmentRate whose burst, and so max_size, is Segment, with a
//     bfifo child of Limit bytes, as encodeTBFQdisc writes it.
//
// The bytes are those iproute2 sends for the same options (nested options
// without NLA_F_NESTED, as tc writes them; TestLeafEncodingMatchesTc
// compares). Any other kind is sent without options, so the kernel
// decides whether it knows it. Parameters that are zero are the kernel's
// defaults. The one error is a LeafTBF without a Segment.
func encodeLeaf(a *tcwire.Attrs, l *model.LeafQdisc) error {
	if l.Kind == model.LeafTBF {
		if l.Segment == 0 {
			return fmt.Errorf("segmenting tbf leaf without a max_size")
		}
		return encodeTBFQdisc(a, &model.TBFParams{Rate: model.SegmentRate, Burst: l.Segment, Limit: tbf.Size(l.Limit)})
	}
	a.String(tcwire.TCAKind, l.Kind)
	switch l.Kind {
	case model.LeafPfifo, model.LeafBfifo:
		if l.Limit != 0 {
			a.U32(tcwire.TCAOptions, l.Limit)
		}
	case model.LeafFQCodel:
		if l.Limit == 0 && l.Flows == 0 && l.Quantum == 0 && l.Interval == 0 && l.Target == 0 {
			return nil
		}
		a.NestPlain(tcwire.TCAOptions, func() {
			for _, f := range []struct {
				typ uint16
				v   uint32
			}{
				{tcwire.TCAFQCodelLimit, l.Limit}, {tcwire.TCAFQCodelFlows, l.Flows}, {tcwire.TCAFQCodelQuantum, l.Quantum},
				{tcwire.TCAFQCodelInterval, micros(l.Interval)}, {tcwire.TCAFQCodelTarget, micros(l.Target)},
			} {
				if f.v != 0 {
					a.U32(f.typ, f.v)
				}
			}
		})
	case model.LeafSFQ:
		if l.Limit == 0 && l.Flows == 0 && l.Quantum == 0 {
			return nil
		}
		// perturb_period 0: none; divisor 0: the kernel's (1024); the rest
		// of tc_sfq_qopt_v1 (depth, headdrop, RED) 0: defaults.
		q := tcwire.SFQQopt{Quantum: l.Quantum, Limit: l.Limit, Flows: l.Flows}
		a.Bytes(tcwire.TCAOptions, q.AppendV1To(nil))
	case model.LeafCake:
		if mode, ok := model.CakeDiffservModes[l.Diffserv]; ok {
			a.NestPlain(tcwire.TCAOptions, func() { a.U32(tcwire.TCACakeDiffservMode, mode) })
		}
	}
	return nil
}

// micros is d in whole microseconds for the kernel's u32 fields.
func micros(d time.Duration) uint32 {
	return uint32(min(max(d.Microseconds(), 0), 0xFFFFFFFF))
}

// encodeRedirectFilter returns the u32 match-all filter with a mirred
// egress redirect to ifbIndex (tc filter add ... u32 match u32 0 0 action
// mirred egress redirect dev IFB).
func encodeRedirectFilter(a *tcwire.Attrs, ifbIndex uint32) {
	a.String(tcwire.TCAKind, "u32")
	a.Nest(tcwire.TCAOptions, func() {
		sel := tcwire.U32Sel{Flags: tcwire.U32Terminal, Keys: []tcwire.U32Key{{}}} // match u32 0 0
		a.Bytes(tcwire.TCAU32Sel, sel.Marshal())
		a.Nest(tcwire.TCAU32Act, func() {
			a.Nest(1, func() { // action priority 1
				a.String(tcwire.TCAActKind, "mirred")
				a.Nest(tcwire.TCAActOptions, func() {
					m := tcwire.Mirred{Action: tcwire.TCActStolen, Eaction: tcwire.TCAEgressRedir, Ifindex: ifbIndex}
					a.Bytes(tcwire.TCAMirredParms, m.AppendTo(nil))
				})
			})
		})
	})
}
