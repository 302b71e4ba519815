package kernel

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// object is one dumped qdisc, class or filter: its tcmsg, kind, raw
// options and counters.
type object struct {
	msg     tcmsg
	kind    string
	options []byte
	stats   *model.Stats
	// stabOverhead is the overhead of a qdisc's size table (TCA_STAB).
	stabOverhead int32
}

// parseObject decodes a RTM_NEWQDISC/NEWTCLASS/NEWTFILTER message body.
// Unknown attributes are ignored.
func parseObject(b []byte) (object, error) {
	m, rest, err := parseTcmsg(b)
	if err != nil {
		return object{}, err
	}
	o := object{msg: m}
	err = eachAttr(rest, func(typ uint16, p []byte) {
		switch typ {
		case tcaKind:
			o.kind = cString(p)
		case tcaOptions:
			o.options = p
		case tcaStats2:
			o.stats = parseStats2(p)
		case tcaStab:
			_ = eachAttr(p, func(typ uint16, b []byte) {
				if typ == tcaStabBase && len(b) >= sizespecOvOff+4 {
					o.stabOverhead = int32(binary.NativeEndian.Uint32(b[sizespecOvOff:]))
				}
			})
		}
	})
	return o, err
}

func cString(p []byte) string {
	for i, c := range p {
		if c == 0 {
			p = p[:i]
			break
		}
	}
	// The kinds of a dump, without a string per object.
	for _, k := range commonKinds {
		if string(p) == k {
			return k
		}
	}
	return string(p)
}

var commonKinds = [...]string{"htb", "u32", "pfifo", "bfifo", "tbf", "ingress", "mirred"}

// parseStats2 decodes TCA_STATS2: basic, queue, rate estimator and HTB's
// xstats (TCA_STATS_APP, struct tc_htb_xstats) when present.
func parseStats2(b []byte) *model.Stats {
	ne := binary.NativeEndian
	s := &model.Stats{}
	_ = eachAttr(b, func(typ uint16, p []byte) {
		switch typ {
		case tcaStatsBasic:
			if len(p) >= 12 {
				s.Bytes = ne.Uint64(p)
				if s.Packets == 0 {
					s.Packets = uint64(ne.Uint32(p[8:]))
				}
			}
		case tcaStatsPkt64:
			if len(p) >= 8 {
				s.Packets = ne.Uint64(p)
			}
		case tcaStatsQueue:
			if len(p) >= 20 {
				s.Qlen = ne.Uint32(p)
				s.Backlog = ne.Uint32(p[4:])
				s.Drops = ne.Uint32(p[8:])
				s.Overlimits = ne.Uint32(p[16:])
			}
		case tcaStatsRateEst:
			if len(p) >= 8 && s.RateEstimateBits == 0 {
				s.RateEstimateBits = uint64(ne.Uint32(p)) * 8
			}
		case tcaStatsRateEst64:
			if len(p) >= 16 {
				s.RateEstimateBits = ne.Uint64(p) * 8
			}
		case tcaStatsApp:
			if len(p) == 20 { // struct tc_htb_xstats
				s.Tokens = int32(ne.Uint32(p[12:]))
				s.CTokens = int32(ne.Uint32(p[16:]))
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
	parms, rate64, ceil64, err := shaperOptions(o.options, tcaHTBParms, tcaHTBRate64, tcaHTBCeil64)
	if err != nil {
		return c, fmt.Errorf("class %s: %w", c.Handle, err)
	}
	if len(parms) < 44 {
		return c, fmt.Errorf("class %s: no HTB parameters in dump", c.Handle)
	}
	ne := binary.NativeEndian
	rs := parseRatespec(parms)
	rate := max(uint64(rs.Rate), rate64)
	ceil := max(uint64(parseRatespec(parms[12:]).Rate), ceil64)
	c.Rate, c.Ceil = tbf.RateFromBytes(rate), tbf.RateFromBytes(ceil)
	c.Framing = rs.framing()
	c.Buffer, c.CBuffer = ne.Uint32(parms[24:]), ne.Uint32(parms[28:])
	c.Quantum = ne.Uint32(parms[32:])
	c.Prio = ne.Uint32(parms[40:])
	c.Burst = tbf.Size(tbf.XmitSize(rate, c.Buffer))
	c.CBurst = tbf.Size(tbf.XmitSize(ceil, c.CBuffer))
	return c, nil
}

// shaperOptions picks from HTB's or TBF's options the parameter struct
// (attribute parmsType) and the two 64-bit rates (rate and ceil, or rate
// and peak rate) that the kernel adds when a rate does not fit 32 bits.
func shaperOptions(options []byte, parmsType, rateType, rate2Type uint16) (parms []byte, rate, rate2 uint64, err error) {
	err = eachAttr(options, func(typ uint16, p []byte) {
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
	err := eachAttr(o.options, func(typ uint16, p []byte) {
		if typ == tcaHTBInit && len(p) >= 12 {
			defcls, found = binary.NativeEndian.Uint32(p[8:]), true
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
	parms, rate64, prate64, err := shaperOptions(o.options, tcaTBFParms, tcaTBFRate64, tcaTBFPrate64)
	if err != nil {
		return nil, err
	}
	if len(parms) < 36 {
		return nil, fmt.Errorf("no TBF parameters in dump")
	}
	ne := binary.NativeEndian
	rs := parseRatespec(parms)
	rate := max(uint64(rs.Rate), rate64)
	peak := max(uint64(parseRatespec(parms[12:]).Rate), prate64)
	p := &model.TBFParams{
		Rate:    tbf.RateFromBytes(rate),
		Limit:   tbf.Size(ne.Uint32(parms[24:])),
		Framing: rs.framing(),
	}
	// The kernel's buckets are l2t(burst) and l2t(mtu) at the framing.
	p.Burst = framedSize(p.Framing, rate, ne.Uint32(parms[28:]))
	if peak != 0 {
		p.PeakRate = tbf.RateFromBytes(peak)
		p.MTU = framedSize(p.Framing, peak, ne.Uint32(parms[32:]))
	}
	return p, nil
}

// framedSize is the bucket size in bytes that a dumped TBF bucket of ticks
// holds at rate bytes/s and framing f. Without framing it is the rate
// config's MaxSizeFromTicks. With framing, turning ticks back into bytes
// loses up to an ATM cell (l2t rounds down, then t2l drops the partial
// cell), so the result is raised to the largest size the kernel would
// have dumped as the same ticks.
func framedSize(f tbf.Framing, rate uint64, ticks uint32) tbf.Size {
	rc := f.RateConfig(rate)
	size := rc.MaxSizeFromTicks(ticks)
	if f == (tbf.Framing{}) || rate == 0 {
		return tbf.Size(size)
	}
	for i := 0; i < 4096 && size < 0xFFFFFFFF; i++ {
		if tbf.TBFFromBurst(rc, uint32(size+1)).DumpTicks() > ticks {
			break
		}
		size++
	}
	return tbf.Size(size)
}

// decodeLeaf returns the leaf qdisc as the model sees it: kind, and the
// parameters of pfifo, bfifo (limit), fq_codel (limit, flows, quantum,
// target, interval), sfq (limit, flows, quantum) and cake (diffserv mode).
func decodeLeaf(o object) *model.LeafQdisc {
	l := &model.LeafQdisc{Kind: o.kind}
	ne := binary.NativeEndian
	switch o.kind {
	case model.LeafPfifo, model.LeafBfifo:
		if len(o.options) >= 4 {
			l.Limit = ne.Uint32(o.options)
		}
	case model.LeafFQCodel:
		_ = eachAttr(o.options, func(typ uint16, p []byte) {
			if len(p) < 4 {
				return
			}
			v := ne.Uint32(p)
			switch typ {
			case tcaFQCodelLimit:
				l.Limit = v
			case tcaFQCodelFlows:
				l.Flows = v
			case tcaFQCodelQuantum:
				l.Quantum = v
			case tcaFQCodelTarget:
				l.Target = time.Duration(v) * time.Microsecond
			case tcaFQCodelInterval:
				l.Interval = time.Duration(v) * time.Microsecond
			}
		})
	case model.LeafSFQ:
		if len(o.options) >= 20 {
			l.Quantum, l.Limit, l.Flows = ne.Uint32(o.options), ne.Uint32(o.options[8:]), ne.Uint32(o.options[16:])
		}
	case model.LeafCake:
		_ = eachAttr(o.options, func(typ uint16, p []byte) {
			if typ == tcaCakeDiffservMode && len(p) >= 4 {
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
	ne := binary.NativeEndian
	_ = eachAttr(o.options, func(typ uint16, p []byte) {
		switch typ {
		case tcaU32Sel:
			if len(p) >= 32 && p[2] == 1 && ne.Uint32(p[16:]) == 0 && ne.Uint32(p[20:]) == 0 {
				matchAll = true
			}
		case tcaU32Act:
			_ = eachAttr(p, func(_ uint16, act []byte) {
				var kind string
				var opts []byte
				_ = eachAttr(act, func(t uint16, v []byte) {
					switch t {
					case tcaActKind:
						kind = cString(v)
					case tcaActOptions:
						opts = v
					}
				})
				if kind != "mirred" {
					return
				}
				_ = eachAttr(opts, func(t uint16, v []byte) {
					if t == tcaMirredParms && len(v) >= 28 && ne.Uint32(v[20:]) == tcaEgressRedir {
						ifindex, found = ne.Uint32(v[24:]), true
					}
				})
			})
		}
	})
	return ifindex, matchAll && found
}
