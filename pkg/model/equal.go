package model

import (
	"math"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// ClassParamsEqual reports whether the kernel holds the same parameters for
// classes a and b: rate and ceil in bytes per second (what the kernel
// keeps), Buffer and CBuffer ticks, Quantum (not of inner classes, see
// inner), Prio, Framing and Leaf (LeafEqual).
// Handle, Parent, Burst/CBurst (informative), Labels and Stats are ignored.
func ClassParamsEqual(a, b Class) bool {
	return a.Rate.BytesPerSecond() == b.Rate.BytesPerSecond() &&
		a.Ceil.BytesPerSecond() == b.Ceil.BytesPerSecond() &&
		a.Buffer == b.Buffer && a.CBuffer == b.CBuffer &&
		(a.Quantum == b.Quantum || inner(a) || inner(b)) && a.Prio == b.Prio &&
		a.Framing == b.Framing &&
		LeafEqual(a.Leaf, b.Leaf)
}

// inner reports whether c is an inner class (the root, a tier's
// aggregate): HTB sets an inner class's quantum when it is created and
// never changes it again (htb_change_class updates it for leaves only),
// and uses it for nothing, so it is not compared.
func inner(c Class) bool {
	return c.Labels.Kind == "root" || c.Labels.Kind == "tier" || c.Labels.Kind == "node"
}

// LeafEqual compares leaf qdiscs: nil (the kernel's default pfifo) equals
// only nil; otherwise kinds must match, and each parameter must match
// where both sides give one: 0 (or "") on either side is the kernel's
// default and matches any value. Target and Interval, which the kernel
// keeps in units of 1.024 us and dumps in whole microseconds, match within
// 1% + 2us. Latency is not compared (Build turns it into Limit): a
// latency-sized queue whose class's ceil moves is resized at every change
// (in place: bfifo and tbf keep their queued packets). A LeafTBF's Segment
// matches within one SegmentGrain (what the kernel's dump of its bucket in
// ticks can tell apart).
func LeafEqual(a, b *LeafQdisc) bool {
	if a == nil || b == nil {
		return a == b
	}
	u32 := func(x, y uint32) bool { return x == 0 || y == 0 || x == y }
	dur := func(x, y time.Duration) bool {
		if x == 0 || y == 0 {
			return true
		}
		d := x - y
		if d < 0 {
			d = -d
		}
		return d <= max(x, y)/100+2*time.Microsecond
	}
	limit := u32(a.Limit, b.Limit)
	segment := max(a.Segment, b.Segment)-min(a.Segment, b.Segment) < SegmentGrain
	return a.Kind == b.Kind && limit && segment && u32(a.Flows, b.Flows) && u32(a.Quantum, b.Quantum) &&
		dur(a.Target, b.Target) && dur(a.Interval, b.Interval) &&
		(a.Diffserv == "" || b.Diffserv == "" || a.Diffserv == b.Diffserv)
}

// QdiscParamsEqual reports whether two root qdiscs are the same in the
// kernel: Kind, Handle, the size table's SizeOverhead, HTB's DefaultMinor, TBF's parameters
// (TBFParamsEqual). Stats are ignored. Kind or Handle differing means the
// qdisc must be replaced; anything else can be changed in place.
func QdiscParamsEqual(a, b Qdisc) bool {
	if !sameQdisc(a, b) || a.SizeOverhead != b.SizeOverhead {
		return false
	}
	switch a.Kind {
	case ShaperHTB:
		return a.DefaultMinor == b.DefaultMinor
	case ShaperTBF:
		if a.TBF == nil || b.TBF == nil {
			return a.TBF == b.TBF
		}
		return TBFParamsEqual(*a.TBF, *b.TBF)
	}
	return a.DefaultMinor == b.DefaultMinor
}

// sameQdisc reports whether b can be reached from a by an in-place change.
func sameQdisc(a, b Qdisc) bool { return a.Kind == b.Kind && a.Handle == b.Handle }

// TBFParamsEqual compares TBF parameters as the kernel holds them: rates in
// bytes per second, Limit in bytes, and Burst and MTU as bucket lengths in
// psched ticks at their rates (what the kernel dumps; it does not report
// bytes). Two bursts are equal when those tick counts differ by at most one,
// so a burst that pkg/kernel reconstructs from the dumped ticks (with
// psched.XmitSize or tbf.BurstFromTicks) equals the burst it was set from.
func TBFParamsEqual(a, b TBFParams) bool {
	if a.Rate.BytesPerSecond() != b.Rate.BytesPerSecond() ||
		a.PeakRate.BytesPerSecond() != b.PeakRate.BytesPerSecond() || a.Limit != b.Limit ||
		a.Framing != b.Framing {
		return false
	}
	return bucketEqual(a.Rate, a.Framing, a.Burst, b.Burst) && bucketEqual(a.PeakRate, a.Framing, a.MTU, b.MTU)
}

// bucketEqual compares two bucket sizes at rate by the ticks the kernel
// would dump for them, with a tolerance of one byte's worth of ticks plus
// one: the kernel reports ticks, and below ~125 Mbit/s one byte lasts more
// than one 64 ns tick, so a burst rebuilt in whole bytes from dumped ticks
// can be a byte short of the one that was set.
// The kernel computes the bucket with the link's framing (l2t of the burst
// includes the overhead), so the ticks are compared at that framing.
func bucketEqual(rate tbf.Rate, f psched.Framing, x, y tbf.Size) bool {
	if x == y {
		return true
	}
	if rate.BytesPerSecond() == 0 || x > math.MaxUint32 || y > math.MaxUint32 {
		return false
	}
	rc := f.RateConfig(rate.BytesPerSecond())
	tx := int64(psched.TBFFromBurst(rc, uint32(x)).DumpTicks())
	ty := int64(psched.TBFFromBurst(rc, uint32(y)).DumpTicks())
	d := tx - ty
	// One byte at rate lasts 1e9/bytesPerSecond ns = that / 64 ticks.
	tol := int64(1e9/float64(rate.BytesPerSecond())/float64(psched.TickNS)) + 1
	return d >= -tol && d <= tol
}

// RedirectEqual reports whether two redirects are the same (both nil
// counts): the same interface to the same IFB (Queues, a creation
// setting, is not compared).
func RedirectEqual(a, b *Redirect) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Interface == b.Interface && a.IFB == b.IFB
}

// filterOK reports whether actual filter a already does what desired filter
// d asks: same class and not damaged.
func filterOK(a, d Filter) bool { return a.ClassID == d.ClassID && !a.Damaged && !d.Damaged }

// Equal reports whether actual already is desired as far as the kernel is
// concerned: Diff(actual, desired) is empty.
func Equal(actual, desired Tree) bool { return len(Diff(actual, desired)) == 0 }
