package psched

import "math/bits"

// NanosPerSecond is NSEC_PER_SEC, the kernel's time base for token buckets.
const NanosPerSecond = 1_000_000_000

// LinkLayer is the kernel's TC_LINKLAYER_* value of a rate (tc_ratespec.linklayer).
type LinkLayer uint8

// Link layers the kernel knows. shaperd uses LinkLayerEthernet; ATM is
// implemented only so that a dumped kernel rate can be reproduced.
const (
	LinkLayerUnaware  LinkLayer = 0 // TC_LINKLAYER_UNAWARE: old tc; treated like Ethernet
	LinkLayerEthernet LinkLayer = 1 // TC_LINKLAYER_ETHERNET: no size adjustment
	LinkLayerATM      LinkLayer = 2 // TC_LINKLAYER_ATM: 53-byte cells carrying 48 bytes
)

// RateConfig is the kernel's struct psched_ratecfg (include/net/sch_generic.h):
// a rate in bytes per second with the reciprocal (Mult, Shift) that the
// kernel uses instead of a division on every packet, plus the per-packet
// Overhead and minimum packet unit MPU (both u16 in the kernel).
//
// Build it with NewRateConfig; the zero value is the kernel's rate-0 config
// except for Mult (the kernel sets Mult = 1 for rate 0, see NewRateConfig).
type RateConfig struct {
	BytesPerSec uint64    // rate_bytes_ps = max(tc_ratespec.rate (u32), the 64-bit rate attribute)
	Mult        uint32    // reciprocal multiplier: about 1e9 << Shift / BytesPerSec
	Shift       uint8     // reciprocal shift
	Overhead    uint16    // bytes added to every packet before the mpu check
	MPU         uint16    // minimum packet unit: (len + Overhead) is raised to at least MPU
	LinkLayer   LinkLayer // LinkLayerEthernet for everything shaperd installs
}

// NewRateConfig mirrors psched_ratecfg_precompute (net/sched/sch_generic.c)
// for an Ethernet rate of bytesPerSec bytes/s:
//
//	factor = 1e9; shift = 0
//	loop: mult = factor / rate (u64 division, stored in a u32)
//	      stop when mult has bit 31 set or factor has bit 63 set
//	      else factor <<= 1, shift++
//
// Rate 0: the kernel skips the loop and keeps mult = 1, shift = 0, so L2T(len)
// is len ns: a 0 bytes/s rate config charges 1 ns per byte, i.e. it behaves
// like 1 GB/s (8 Gbit/s), not like "stopped". tc never sends rate 0 (it
// refuses "rate 1bit", which is 0 bytes/s after its division by 8, and
// shaperd's config rejects rates below 8 bit/s), but the kernel would accept
// it for TBF, so the case is reproduced exactly.
//
// overhead and mpu are the kernel's u16 fields (tc_ratespec.overhead/mpu; tc
// parses both with get_u16): values outside [0, 65535] are reduced to 16 bits
// exactly as the netlink field would carry them (-4 becomes 65532). Check
// them with ValidOverheadMPU before building a config from user input.
func NewRateConfig(bytesPerSec uint64, overhead int, mpu uint32) RateConfig {
	r := RateConfig{
		BytesPerSec: bytesPerSec,
		Mult:        1,
		Overhead:    uint16(overhead),
		MPU:         uint16(mpu),
		LinkLayer:   LinkLayerEthernet,
	}
	if bytesPerSec == 0 {
		return r
	}
	factor := uint64(NanosPerSecond)
	for {
		// div64_u64 result assigned to the u32 field. It always fits: mult
		// starts at <= 1e9 and at most doubles (plus one) from a value
		// below 2^31 before the loop stops.
		r.Mult = uint32(factor / bytesPerSec)
		if r.Mult&(1<<31) != 0 || factor&(1<<63) != 0 {
			break
		}
		factor <<= 1
		r.Shift++
	}
	return r
}

// ValidOverheadMPU reports whether overhead and mpu fit the kernel's u16
// fields unchanged (tc rejects anything else).
func ValidOverheadMPU(overhead int, mpu uint32) bool {
	return overhead >= 0 && overhead <= 0xFFFF && mpu <= 0xFFFF
}

// L2T is psched_l2t_ns: the time in ns the rate allows for a packet of
// length bytes (the L2 frame without FCS; a GSO packet counts
// len + (segs-1)*header_len).
//
//	len = len + overhead (unsigned 32-bit arithmetic, as the kernel's "unsigned int len")
//	len = max(len, mpu)
//	ATM: len = ceil(len/48)*53
//	ns  = (u64(len) * mult) >> shift, rounded down
//
// Example: 1.25e9 B/s (10 Gbit/s), 1500 B -> 1199 ns (exact: 1200 ns).
// length is converted to the kernel's unsigned int first: a negative length
// wraps as it would in C; callers should not pass one.
func (r RateConfig) L2T(length int) uint64 { return r.l2t(uint32(length)) }

func (r RateConfig) l2t(length uint32) uint64 {
	l := length + uint32(r.Overhead)
	if l < uint32(r.MPU) {
		l = uint32(r.MPU)
	}
	if r.LinkLayer == LinkLayerATM {
		// DIV_ROUND_UP(len,48)*53 in unsigned int.
		l = (l/48 + boolToU32(l%48 != 0)) * 53
	}
	// (u64)len * mult cannot overflow: both factors are below 2^32.
	return (uint64(l) * uint64(r.Mult)) >> r.Shift
}

// T2L is psched_ns_t2l (net/sched/sch_tbf.c): how many bytes the rate allows
// in ns nanoseconds, with the kernel's arithmetic exactly:
//
//	len = ns * rate (u64, WRAPS modulo 2^64) / 1e9
//	ATM: len = len/53*48
//	len = len - overhead, or 0 when len <= overhead
//
// The product wraps once ns*rate >= 2^64, e.g. at 12.5e9 B/s (100 Gbit/s)
// beyond ns = 1475739525 (1.48 s of buffer): the kernel then computes a
// too-small max_size. T2LExact gives the mathematically intended value.
func (r RateConfig) T2L(ns uint64) uint64 {
	return r.t2lFinish((ns * r.BytesPerSec) / NanosPerSecond)
}

// T2LExact is T2L without the u64 wrap: floor(ns*rate/1e9) computed in 128
// bits, then the same ATM and overhead adjustments. A quotient that does not
// fit in 64 bits (never for ns below 2^64/rate*1e9) saturates at MaxUint64.
func (r RateConfig) T2LExact(ns uint64) uint64 {
	hi, lo := bits.Mul64(ns, r.BytesPerSec)
	if hi >= NanosPerSecond {
		return r.t2lFinish(^uint64(0))
	}
	q, _ := bits.Div64(hi, lo, NanosPerSecond)
	return r.t2lFinish(q)
}

// T2LWraps reports whether T2L(ns) is affected by the kernel's u64 wrap
// (ns * BytesPerSec >= 2^64).
func (r RateConfig) T2LWraps(ns uint64) bool {
	hi, _ := bits.Mul64(ns, r.BytesPerSec)
	return hi != 0
}

func (r RateConfig) t2lFinish(l uint64) uint64 {
	if r.LinkLayer == LinkLayerATM {
		l = l / 53 * 48
	}
	if l > uint64(r.Overhead) {
		return l - uint64(r.Overhead)
	}
	return 0
}

// Rate32 is the value for the legacy 32-bit tc_ratespec.rate field:
// min(BytesPerSec, 2^32-1), as tc and psched_ratecfg_getrate fill it. Rates
// of 2^32 B/s (34.359738368 Gbit/s) and more also need the 64-bit netlink
// attribute (TCA_HTB_RATE64, TCA_TBF_RATE64); HTB rejects a 0 here.
func (r RateConfig) Rate32() uint32 {
	if r.BytesPerSec > 0xFFFFFFFF {
		return 0xFFFFFFFF
	}
	return uint32(r.BytesPerSec)
}

func boolToU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
