package kernel

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// object is one dumped qdisc, class or filter: its tcmsg, kind, raw
// options and counters.
type object struct {
	msg     tcwire.Tcmsg
	kind    string
	options []byte
	stats   *model.Stats
	// stabOverhead is the overhead of a qdisc's size table (TCA_STAB).
	stabOverhead int32
}

// parseObject decodes a RTM_NEWQDISC/NEWTCLASS/NEWTFILTER message body.
// Unknown attributes are ignored.
func parseObject(b []byte) (object, error) {
	m, rest, err := tcwire.ParseTcmsg(b)
	if err != nil {
		return object{}, err
	}
	o := object{msg: m}
	err = tcwire.EachAttr(rest, func(typ uint16, p []byte) {
		switch typ {
		case tcwire.TCAKind:
			o.kind = tcwire.Kind(p)
		case tcwire.TCAOptions:
			o.options = p
		case tcwire.TCAStats2:
			o.stats = parseStats2(p)
		case tcwire.TCAStab:
			_ = tcwire.EachAttr(p, func(typ uint16, b []byte) {
				if s, ok := tcwire.ParseSizespec(b); typ == tcwire.TCAStabBase && ok {
					o.stabOverhead = s.Overhead
				}
			})
		}
	})
	return o, err
}

// parseStats2 decodes TCA_STATS2: basic, queue, rate estimator and HTB's
// xstats (TCA_STATS_APP, struct tc_htb_xstats) when present.
func parseStats2(b []byte) *model.Stats {
	s := &model.Stats{}
	_ = tcwire.EachAttr(b, func(typ uint16, p []byte) {
		switch typ {
		case tcwire.TCAStatsBasic:
			if b, ok := tcwire.ParseStatsBasic(p); ok {
				s.Bytes = b.Bytes
				if s.Packets == 0 {
					s.Packets = uint64(b.Packets)
				}
			}
		case tcwire.TCAStatsPkt64:
			if len(p) >= 8 {
				s.Packets = binary.NativeEndian.Uint64(p)
			}
		case tcwire.TCAStatsQueue:
			if q, ok := tcwire.ParseStatsQueue(p); ok {
				s.Qlen, s.Backlog, s.Drops, s.Overlimits = q.Qlen, q.Backlog, q.Drops, q.Overlimits
			}
		case tcwire.TCAStatsRateEst:
			if bps, ok := tcwire.ParseRateEstBps(p, false); ok && s.RateEstimateBits == 0 {
				s.RateEstimateBits = bps * 8
			}
		case tcwire.TCAStatsRateEst64:
			if bps, ok := tcwire.ParseRateEstBps(p, true); ok {
				s.RateEstimateBits = bps * 8
			}
		case tcwire.TCAStatsApp:
			if x, ok := tcwire.ParseHTBXstats(p); ok {
				s.Tokens, s.CTokens = x.Tokens, x.CTokens
			}
		}
	})
	return s
}

// decodeHTBClass turns a dumped HTB class into a model.Class: Rate/Ceil from
// the 64-bit attributes when present, Buffer/CBuffer ticks, and Burst/CBurst
// reconstructed from them (informative). Leaf and Labels are left to the caller.
func decodeHTBClass(o object) (model.Class, error) {
	c := model.Class{Handle: model.Handle(o.msg.Handle), Parent: model.Handle(o.msg.Parent), Stats: o.stats}
	if c.Parent == model.HandleRoot {
		// HTB reports a top-level class's parent as TC_H_ROOT; the model
		// (and our requests) use the qdisc's handle.
		c.Parent = model.MakeHandle(c.Handle.Major(), 0)
	}
	parms, rate64, ceil64, err := shaperOptions(o.options, tcwire.TCAHTBParms, tcwire.TCAHTBRate64, tcwire.TCAHTBCeil64)
	if err != nil {
		return c, fmt.Errorf("class %s: %w", c.Handle, err)
	}
	opt, ok := tcwire.ParseHTBOpt(parms)
	if !ok {
		return c, fmt.Errorf("class %s: no HTB parameters in dump", c.Handle)
	}
	rate := max(uint64(opt.Rate.Rate), rate64)
	ceil := max(uint64(opt.Ceil.Rate), ceil64)
	c.Rate, c.Ceil = tbf.RateFromBytes(rate), tbf.RateFromBytes(ceil)
	c.Framing = ratespecFraming(opt.Rate)
	c.Buffer, c.CBuffer = opt.Buffer, opt.CBuffer
	c.Quantum = opt.Quantum
	c.Prio = opt.Prio
	c.Burst = tbf.Size(psched.XmitSize(rate, c.Buffer))
	c.CBurst = tbf.Size(psched.XmitSize(ceil, c.CBuffer))
	return c, nil
}

// shaperOptions picks from HTB's or TBF's options the parameter struct
// (attribute parmsType) and the two 64-bit rates (rate and ceil, or rate
// and peak rate) that the kernel adds when a rate does not fit 32 bits.
func shaperOptions(options []byte, parmsType, rateType, rate2Type uint16) (parms []byte, rate, rate2 uint64, err error) {
	err = tcwire.EachAttr(options, func(typ uint16, p []byte) {
		switch {
		case typ == parmsType:
			parms = p
		case typ == rateType && len(p) >= 8:
			rate = binary.NativeEndian.Uint64(p)
		case typ == rate2Type && len(p) >= 8:
			rate2 = binary.NativeEndian.Uint64(p)
		}
	})
	return parms, rate, rate2, err
}

// decodeHTBQdisc returns the default class minor of a dumped HTB qdisc.
func decodeHTBQdisc(o object) (uint16, error) {
	var defcls uint32
	found := false
	err := tcwire.EachAttr(o.options, func(typ uint16, p []byte) {
		if d, ok := tcwire.HTBGlobDefcls(p); typ == tcwire.TCAHTBInit && ok {
			defcls, found = d, true
		}
	})
	if err == nil && !found {
		err = fmt.Errorf("no HTB init parameters in dump")
	}
	return uint16(defcls), err
}

// decodeTBF returns a dumped TBF's parameters. The kernel reports the
// bucket and peak bucket as ticks; Burst and MTU are the byte sizes they
// hold at the rate and framing (the rate config's MaxSizeFromTicks), which model.TBFParamsEqual
// compares with a tolerance of one tick.
func decodeTBF(o object) (*model.TBFParams, error) {
	parms, rate64, prate64, err := shaperOptions(o.options, tcwire.TCATBFParms, tcwire.TCATBFRate64, tcwire.TCATBFPrate64)
	if err != nil {
		return nil, err
	}
	q, ok := tcwire.ParseTBFQopt(parms)
	if !ok {
		return nil, fmt.Errorf("no TBF parameters in dump")
	}
	rate := max(uint64(q.Rate.Rate), rate64)
	peak := max(uint64(q.Peakrate.Rate), prate64)
	p := &model.TBFParams{
		Rate:    tbf.RateFromBytes(rate),
		Limit:   tbf.Size(q.Limit),
		Framing: ratespecFraming(q.Rate),
	}
	// The kernel's buckets are l2t(burst) and l2t(mtu) at the framing.
	p.Burst = framedSize(p.Framing, rate, q.Buffer)
	if peak != 0 {
		p.PeakRate = tbf.RateFromBytes(peak)
		p.MTU = framedSize(p.Framing, peak, q.MTU)
	}
	return p, nil
}

// framedSize is the bucket size in bytes that a dumped TBF bucket of ticks
// holds at rate bytes/s and framing f. Without framing it is the rate
// config's MaxSizeFromTicks. With framing, turning ticks back into bytes
// loses up to an ATM cell (l2t rounds down, then t2l drops the partial
// cell), so the result is raised to the largest size the kernel would
// have dumped as the same ticks.
func framedSize(f psched.Framing, rate uint64, ticks uint32) tbf.Size {
	rc := f.RateConfig(rate)
	size := rc.MaxSizeFromTicks(ticks)
	if f == (psched.Framing{}) || rate == 0 {
		return tbf.Size(size)
	}
	for i := 0; i < 4096 && size < 0xFFFFFFFF; i++ {
		if psched.TBFFromBurst(rc, uint32(size+1)).DumpTicks() > ticks {
			break
		}
		size++
	}
	return tbf.Size(size)
}

// decodeLeaf returns the leaf qdisc as the model sees it: kind, and the
// parameters of pfifo, bfifo (limit), fq_codel (limit, flows, quantum,
// target, interval), sfq (limit, flows, quantum), cake (diffserv mode)
// and the segmenting tbf (limit; Segment: its bucket, whole
// model.SegmentGrain bytes, as encodeLeaf sends it).
func decodeLeaf(o object) *model.LeafQdisc {
	l := &model.LeafQdisc{Kind: o.kind}
	ne := binary.NativeEndian
	switch o.kind {
	case model.LeafTBF:
		if p, err := decodeTBF(o); err == nil {
			l.Limit, l.Segment = uint32(min(p.Limit, 0xFFFFFFFF)), p.Burst/model.SegmentGrain*model.SegmentGrain
		}
	case model.LeafPfifo, model.LeafBfifo:
		if len(o.options) >= tcwire.FifoQoptLen { // struct tc_fifo_qopt {limit}
			l.Limit = ne.Uint32(o.options)
		}
	case model.LeafFQCodel:
		_ = tcwire.EachAttr(o.options, func(typ uint16, p []byte) {
			if len(p) < 4 {
				return
			}
			v := ne.Uint32(p)
			switch typ {
			case tcwire.TCAFQCodelLimit:
				l.Limit = v
			case tcwire.TCAFQCodelFlows:
				l.Flows = v
			case tcwire.TCAFQCodelQuantum:
				l.Quantum = v
			case tcwire.TCAFQCodelTarget:
				l.Target = time.Duration(v) * time.Microsecond
			case tcwire.TCAFQCodelInterval:
				l.Interval = time.Duration(v) * time.Microsecond
			}
		})
	case model.LeafSFQ:
		if q, ok := tcwire.ParseSFQQopt(o.options); ok {
			l.Quantum, l.Limit, l.Flows = q.Quantum, q.Limit, q.Flows
		}
	case model.LeafCake:
		_ = tcwire.EachAttr(o.options, func(typ uint16, p []byte) {
			if typ == tcwire.TCACakeDiffservMode && len(p) >= 4 {
				for name, mode := range model.CakeDiffservModes {
					if mode == ne.Uint32(p) {
						l.Diffserv = name
					}
				}
			}
		})
	}
	return l
}

// decodeRedirect reports the IFB ifindex a dumped u32 filter redirects to
// with mirred egress redirect, if it is a match-all filter that does so.
func decodeRedirect(o object) (uint32, bool) {
	if o.kind != "u32" {
		return 0, false
	}
	var ifindex uint32
	var matchAll, found bool
	_ = tcwire.EachAttr(o.options, func(typ uint16, p []byte) {
		switch typ {
		case tcwire.TCAU32Sel:
			// One key, mask 0 and value 0 (tc's "match u32 0 0").
			if s, err := tcwire.ParseU32Sel(p); err == nil && len(s.Keys) == 1 && s.Keys[0].Mask == 0 && s.Keys[0].Val == 0 {
				matchAll = true
			}
		case tcwire.TCAU32Act:
			_ = tcwire.EachAttr(p, func(_ uint16, act []byte) {
				var kind string
				var opts []byte
				_ = tcwire.EachAttr(act, func(t uint16, v []byte) {
					switch t {
					case tcwire.TCAActKind:
						kind = tcwire.Kind(v)
					case tcwire.TCAActOptions:
						opts = v
					}
				})
				if kind != "mirred" {
					return
				}
				_ = tcwire.EachAttr(opts, func(t uint16, v []byte) {
					if m, ok := tcwire.ParseMirred(v); t == tcwire.TCAMirredParms && ok && m.Eaction == tcwire.TCAEgressRedir {
						ifindex, found = m.Ifindex, true
					}
				})
			})
		}
	})
	return ifindex, matchAll && found
}
