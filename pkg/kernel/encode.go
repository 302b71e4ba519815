package kernel

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// HTBR2Q is the r2q shaperd gives its HTB root qdisc. Every class carries
// an explicit quantum, so r2q only matters for classes made by others.
const HTBR2Q = 10

// encodeHTBQdisc returns TCA_KIND and TCA_OPTIONS of an HTB root qdisc.
func encodeHTBQdisc(a *attrs, q *model.Qdisc) {
	a.str(tcaKind, "htb")
	a.nest(tcaOptions, func() {
		ne := binary.NativeEndian
		var g []byte
		g = ne.AppendUint32(g, htbVersion)
		g = ne.AppendUint32(g, HTBR2Q)
		g = ne.AppendUint32(g, uint32(q.DefaultMinor))
		g = ne.AppendUint32(g, 0) // debug
		g = ne.AppendUint32(g, 0) // direct_pkts
		a.bytes(tcaHTBInit, g)
	})
}

// encodeHTBClass returns TCA_KIND and TCA_OPTIONS of an HTB class: the
// link framing (overhead, mpu, link layer) in both rate specs, the
// 32-bit rate fields saturated (never 0), TCA_HTB_RATE64/CEIL64 when the
// rate needs more than 32 bits, buffer/cbuffer ticks and quantum as given.
func encodeHTBClass(a *attrs, c *model.Class) {
	rate, ceil := c.Rate.BytesPerSecond(), c.Ceil.BytesPerSecond()
	a.str(tcaKind, "htb")
	a.nest(tcaOptions, func() {
		ne := binary.NativeEndian
		p := make([]byte, 0, 44)
		p = framedRatespec(c.Framing, rate).appendTo(p)
		p = framedRatespec(c.Framing, ceil).appendTo(p)
		p = ne.AppendUint32(p, c.Buffer)
		p = ne.AppendUint32(p, c.CBuffer)
		p = ne.AppendUint32(p, c.Quantum)
		p = ne.AppendUint32(p, 0) // level: the kernel's
		p = ne.AppendUint32(p, c.Prio)
		a.bytes(tcaHTBParms, p)
		if rate > 0xFFFFFFFF {
			a.u64(tcaHTBRate64, rate)
		}
		if ceil > 0xFFFFFFFF {
			a.u64(tcaHTBCeil64, ceil)
		}
	})
}

// encodeTBFQdisc returns TCA_KIND and TCA_OPTIONS of a TBF root qdisc. It
// sends TCA_TBF_BURST (so the kernel's max_size is the burst) and, with a
// peak rate, TCA_TBF_PBURST = MTU, plus 64-bit rates when needed. Both rate
// specs carry the link framing; the kernel then computes the buckets as
// l2t(burst) and l2t(mtu) with it.
func encodeTBFQdisc(a *attrs, p *model.TBFParams) error {
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
	a.str(tcaKind, "tbf")
	a.nest(tcaOptions, func() {
		ne := binary.NativeEndian
		q := make([]byte, 0, 36)
		q = framedRatespec(p.Framing, rate).appendTo(q)
		if peak != 0 {
			q = framedRatespec(p.Framing, peak).appendTo(q)
		} else {
			q = ratespec{}.appendTo(q)
		}
		q = ne.AppendUint32(q, uint32(p.Limit))
		q = ne.AppendUint32(q, buf)
		q = ne.AppendUint32(q, mtu)
		a.bytes(tcaTBFParms, q)
		if rate > 0xFFFFFFFF {
			a.u64(tcaTBFRate64, rate)
		}
		if peak > 0xFFFFFFFF {
			a.u64(tcaTBFPrate64, peak)
		}
		a.u32(tcaTBFBurst, uint32(p.Burst))
		if peak != 0 {
			a.u32(tcaTBFPburst, uint32(p.MTU))
		}
	})
	return nil
}

// encodeSizeTable appends TCA_STAB with struct tc_sizespec {overhead} and
// no table (tsize 0), as `tc qdisc ... stab overhead N` sends it: the
// kernel then counts every packet as len + overhead bytes (at least 1)
// before the qdisc and its classes see it. Overhead 0 sends nothing (no
// size table).
func encodeSizeTable(a *attrs, overhead int32) {
	if overhead == 0 {
		return
	}
	a.nestPlain(tcaStab, func() {
		spec := make([]byte, sizespecLen)
		binary.NativeEndian.PutUint32(spec[sizespecOvOff:], uint32(overhead))
		a.bytes(tcaStabBase, spec)
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
//     bandwidth: cake runs unlimited under its HTB class).
//
// The bytes are those iproute2 sends for the same options (nested options
// without NLA_F_NESTED, as tc writes them; TestLeafEncodingMatchesTc
// compares). Any other kind is sent without options, so the kernel
// decides whether it knows it. Parameters that are zero are the kernel's
// defaults.
func encodeLeaf(a *attrs, l *model.LeafQdisc) {
	a.str(tcaKind, l.Kind)
	switch l.Kind {
	case model.LeafPfifo, model.LeafBfifo:
		if l.Limit != 0 {
			a.u32(tcaOptions, l.Limit)
		}
	case model.LeafFQCodel:
		if l.Limit == 0 && l.Flows == 0 && l.Quantum == 0 && l.Interval == 0 && l.Target == 0 {
			return
		}
		a.nestPlain(tcaOptions, func() {
			for _, f := range []struct {
				typ uint16
				v   uint32
			}{
				{tcaFQCodelLimit, l.Limit}, {tcaFQCodelFlows, l.Flows}, {tcaFQCodelQuantum, l.Quantum},
				{tcaFQCodelInterval, micros(l.Interval)}, {tcaFQCodelTarget, micros(l.Target)},
			} {
				if f.v != 0 {
					a.u32(f.typ, f.v)
				}
			}
		})
	case model.LeafSFQ:
		if l.Limit == 0 && l.Flows == 0 && l.Quantum == 0 {
			return
		}
		ne := binary.NativeEndian
		q := make([]byte, 0, sfqQoptV1Len)
		q = ne.AppendUint32(q, l.Quantum)
		q = ne.AppendUint32(q, 0) // perturb_period: none
		q = ne.AppendUint32(q, l.Limit)
		q = ne.AppendUint32(q, 0) // divisor: the kernel's (1024)
		q = ne.AppendUint32(q, l.Flows)
		q = q[:sfqQoptV1Len] // the rest of tc_sfq_qopt_v1 (depth, headdrop, RED) zero: defaults
		a.bytes(tcaOptions, q)
	case model.LeafCake:
		if mode, ok := model.CakeDiffservModes[l.Diffserv]; ok {
			a.nestPlain(tcaOptions, func() { a.u32(tcaCakeDiffservMode, mode) })
		}
	}
}

// micros is d in whole microseconds for the kernel's u32 fields.
func micros(d time.Duration) uint32 {
	return uint32(min(max(d.Microseconds(), 0), 0xFFFFFFFF))
}

// encodeRedirectFilter returns the u32 match-all filter with a mirred
// egress redirect to ifbIndex (tc filter add ... u32 match u32 0 0 action
// mirred egress redirect dev IFB).
func encodeRedirectFilter(a *attrs, ifbIndex uint32) {
	a.str(tcaKind, "u32")
	a.nest(tcaOptions, func() {
		ne := binary.NativeEndian
		sel := make([]byte, 16, 32)
		sel[0] = tcU32Terminal
		sel[2] = 1                             // nkeys
		sel = append(sel, make([]byte, 16)...) // key: mask 0, val 0, off 0, offmask 0
		a.bytes(tcaU32Sel, sel)
		a.nest(tcaU32Act, func() {
			a.nest(1, func() { // action priority 1
				a.str(tcaActKind, "mirred")
				a.nest(tcaActOptions, func() {
					var m []byte
					m = ne.AppendUint32(m, 0) // index
					m = ne.AppendUint32(m, 0) // capab
					m = ne.AppendUint32(m, tcActStolen)
					m = ne.AppendUint32(m, 0) // refcnt
					m = ne.AppendUint32(m, 0) // bindcnt
					m = ne.AppendUint32(m, tcaEgressRedir)
					m = ne.AppendUint32(m, ifbIndex)
					a.bytes(tcaMirredParms, m)
				})
			})
		})
	})
}
