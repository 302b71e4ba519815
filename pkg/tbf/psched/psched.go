package psched

import (
	"errors"
	"math"
)

// The psched clock as the kernel and tc see it on every kernel since 2.6.x with
// high-resolution timers (measured here: /proc/net/psched =
// "000003e8 00000040 000f4240 3b9aca00").
const (
	// Shift is PSCHED_SHIFT: one psched tick is 1 << 6 ns.
	Shift = 6
	// TickNS is the length of one psched tick in ns (64). Netlink carries
	// HTB buffer/cbuffer, TBF buffer/mtu and HTB's tokens/ctokens in ticks.
	TickNS = 1 << Shift
	// TickInUsec is tc's tick_in_usec: ticks per microsecond,
	// t2us/us2t * clock_res/1e6 = 1000/64 * 1e6/1e6 = 15.625.
	TickInUsec = 15.625
	// HZ is the fourth field of /proc/net/psched, which tc's get_hz()
	// returns: 1e9 on high-resolution kernels. HTB's default burst divides
	// the rate by it.
	HZ = 1_000_000_000
	// timeUnitsPerSec is tc's TIME_UNITS_PER_SEC (tc works in microseconds).
	timeUnitsPerSec = 1_000_000
)

// ErrTicksOverflow is the error (wrapped by tbf.BufferTicks) of a burst at
// a rate that needs a buffer of 2^32-1 psched ticks (~274.9 s) or more: the
// netlink field is a u32, and tc refuses exactly these values ("burst out
// of range"). XmitTimeFits reports it.
var ErrTicksOverflow = errors.New("buffer does not fit in the kernel's 32-bit tick field")

// ErrZeroByteRate is the error (wrapped by tbf.BufferTicks and the
// simulator) of a rate below 8 bit/s, which is 0 bytes/s once divided by 8
// as tc and the kernel count.
var ErrZeroByteRate = errors.New("rate is 0 bytes/s (below 8 bit/s)")

// TicksToNS is PSCHED_TICKS2NS: ticks << 6, computed in 64 bits (a u32 tick
// value always fits: at most ~274.9 s).
func TicksToNS(ticks uint32) int64 { return int64(ticks) << Shift }

// NSToTicks is PSCHED_NS2TICKS: ns >> 6, an arithmetic shift, so negative
// token counts round toward minus infinity (-1 ns is -1 tick) as in the kernel.
func NSToTicks(ns int64) int64 { return ns >> Shift }

// XmitTicks is tc's tc_core_time2tick(TIME_UNITS_PER_SEC * ((double)size/(double)rate))
// before rounding, with the same float64 operations in the same order: the
// psched ticks size bytes take at rateBytes bytes/s, as a float64. XmitTime
// rounds it up.
func XmitTicks(rateBytes, size uint64) float64 {
	return timeUnitsPerSec * (float64(size) / float64(rateBytes)) * TickInUsec
}

// XmitTime is tc's tc_calc_xmittime as iproute2 >= 6.15 computes it: the
// psched ticks needed to send size bytes at rateBytes bytes/s,
//
//	ticks = ceil(1e6 * (size/rate) * 15.625)   (float64, as tc's double)
//
// saturated at MaxUint32 (iproute2 >= 6.18 does the same; tc then refuses a
// result of MaxUint32 with "burst out of range"). Older tc and
// vishvananda/netlink's Xmittime truncate twice instead (1e6*size/rate to an
// integer, then the product), which gives 0 ticks for bursts under one
// microsecond of transmission: tc's default HTB burst at 100 Gbit/s, 1612 B,
// is 1e6*1612/12.5e9 = 0.12896 us = 2.015 ticks, which XmitTime rounds up to
// 3 and old tc truncates to 0.
//
// rateBytes 0 saturates (tc would divide by zero). Use XmitTimeFits to tell
// a real value from a saturated one, or tbf.BufferTicks for an error.
func XmitTime(rateBytes uint64, size uint32) uint32 {
	return XmitTime64(rateBytes, uint64(size))
}

// XmitTime64 is XmitTime with the 64-bit size of iproute2 >= 6.18, which
// tc uses for bursts (saturated at MaxUint32 the same way).
func XmitTime64(rateBytes, size uint64) uint32 {
	if rateBytes == 0 {
		return math.MaxUint32
	}
	v := math.Ceil(XmitTicks(rateBytes, size))
	if v > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(v)
}

// XmitTimeFits reports whether XmitTime(rateBytes, size) is a real value
// that tc would accept: the rate is not 0 and the tick count is below
// MaxUint32. size is 64-bit as in iproute2 >= 6.18.
func XmitTimeFits(rateBytes, size uint64) bool {
	return rateBytes != 0 && math.Ceil(XmitTicks(rateBytes, size)) < math.MaxUint32
}

// XmitSize is tc's tc_calc_xmitsize: the bytes that ticks allow at
// rateBytes, ((double)rate * (ticks/15.625)) / 1e6 truncated. This is the
// "burst" that `tc -d class show` and `tc -d qdisc show` print for a buffer.
func XmitSize(rateBytes uint64, ticks uint32) uint64 {
	v := (float64(rateBytes) * (float64(ticks) / TickInUsec)) / timeUnitsPerSec
	if v >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(v)
}

// MaxSizeFromTicks is the burst in bytes that the kernel derives from a
// tick buffer when no byte burst is given: TBF without TCA_TBF_BURST
// (tbf_change) computes
//
//	buffer   = min(ticks << 6, 2^32-1) ns
//	max_size = min(psched_ns_t2l(rate, buffer), 2^32-1) bytes
//
// with this rate config's overhead and link layer and the kernel's u64
// wrap (T2L). Rates of 0 bytes/s give 0 (the kernel then rejects the TBF
// with EINVAL). For what tc prints as "burst" use XmitSize.
func (r RateConfig) MaxSizeFromTicks(ticks uint32) uint64 {
	buf := uint64(TicksToNS(ticks))
	if buf > math.MaxUint32 {
		buf = math.MaxUint32
	}
	return min(r.T2L(buf), math.MaxUint32)
}

// XmitTimeLegacy is tc_calc_xmittime as iproute2 < 6.15 (the 6.1 on our
// machines) and vishvananda/netlink compute it: both steps truncate to a
// 32-bit unsigned integer,
//
//	us    = (unsigned)(1e6 * (size/rate))
//	ticks = (unsigned)(us * 15.625)
//
// so 1600 B at 1 Gbit/s gives 187 ticks (12.8 us computes as 12.79..., kept
// as 12) where XmitTime gives 200, and every burst under 1 us of
// transmission gives 0 ticks: tc 6.1 installs a 20gbit class (default burst
// 1602 B, 0.64 us) with buffer 0 and shows "burst 0b". Out-of-range
// conversions, undefined in C, are reproduced as gcc on x86-64 does them
// (the low 32 bits of the 64-bit truncation). Use it only to predict what
// old tc installed.
func XmitTimeLegacy(rateBytes uint64, size uint32) uint32 {
	if rateBytes == 0 {
		return 0 // C: +Inf converted to unsigned; undefined, 0 on x86-64
	}
	us := cUint32(timeUnitsPerSec * (float64(size) / float64(rateBytes)))
	return cUint32(float64(us) * TickInUsec)
}

// XmitSizeLegacy is tc_calc_xmitsize of iproute2 < 6.15: the "burst" tc 6.1
// prints for a tick buffer, (unsigned)(rate * (unsigned)(ticks/15.625) / 1e6).
func XmitSizeLegacy(rateBytes uint64, ticks uint32) uint32 {
	us := cUint32(float64(ticks) / TickInUsec)
	return cUint32((float64(rateBytes) * float64(us)) / timeUnitsPerSec)
}

// cUint32 converts like gcc's double -> unsigned int on x86-64: truncate to
// a 64-bit integer, keep the low 32 bits.
func cUint32(v float64) uint32 {
	if v >= math.MaxInt64 || v != v {
		return 0 // cvttsd2si's "integer indefinite" 0x8000000000000000, low 32 bits 0
	}
	return uint32(uint64(int64(v)))
}
