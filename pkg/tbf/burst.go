package tbf

import (
	"math"
	"math/bits"
	"time"
)

// HTBDefaultMTU is tc's default "mtu" for HTB classes (q_htb.c: 1600, "eth
// packet len"): the size its default burst adds to rate/HZ.
const HTBDefaultMTU = 1600

// DefaultHTBBurst is the burst tc gives an HTB class when none is given
// (q_htb.c): rate_bytes/HZ + mtu, integer division, with HZ = PschedHZ
// (1e9 on this kernel) and mtu HTBDefaultMTU. So it is 1600 B for every rate
// below 8 Gbit/s and 1612 B at 100 Gbit/s: far too small for fast classes.
// tc applies the same rule to cburst with the ceil rate.
func DefaultHTBBurst(rate Rate) Size {
	return Size(rate.BytesPerSecond()/PschedHZ + HTBDefaultMTU)
}

// Parameters of RecommendedBurst.
const (
	// RecommendedBurstTime is the burst shaperd recommends, as time at the
	// rate: long enough to cover GSO packets (64 KiB) and timer/softirq
	// granularity at high rates, and a constant time so that a smooth rate
	// change scales the burst with the rate.
	RecommendedBurstTime = 5 * time.Millisecond
	// RecommendedBurstMin is the smallest recommended burst: ten full-size
	// Ethernet frames (10 * 1514 B), so slow classes still pass a frame
	// train without drops.
	RecommendedBurstMin Size = 10 * 1514
)

// RecommendedBurst is shaperd's default burst for a rate:
//
//	max(rate_bytes * 5 ms, 10 * 1514 B)
//
// (rate_bytes*5ms rounded down), capped so that it stays usable by the
// kernel: BufferTicks(rate, burst) must fit the u32 tick field (a burst below
// ~274.9 s at the rate, which only binds below ~440 bit/s) and the burst must
// fit TBF's u32 TCA_TBF_BURST (binds above ~6.9 Tbit/s). A rate of 0 bytes/s
// (below 8 bit/s) gives 0.
func RecommendedBurst(rate Rate) Size {
	b := rate.BytesPerSecond()
	if b == 0 {
		return 0
	}
	hi, lo := bits.Mul64(b, uint64(RecommendedBurstTime))
	// hi < 5e6 < 1e9 for every u64 rate, so the quotient fits (Div64 needs hi < divisor).
	byTime, _ := bits.Div64(hi, lo, NanosPerSecond)
	burst := max(Size(byTime), RecommendedBurstMin)
	return min(burst, maxBurstForTicks(b), math.MaxUint32)
}

// maxBurstForTicks is the largest burst whose buffer at rateBytes still fits
// (XmitTimeFits), found from the closed form (2^32-2)*64*rate/1e9 and then
// adjusted for tc's float rounding.
func maxBurstForTicks(rateBytes uint64) Size {
	hi, lo := bits.Mul64(rateBytes, (math.MaxUint32-1)*TickNS)
	if hi >= NanosPerSecond {
		return math.MaxUint64
	}
	s, _ := bits.Div64(hi, lo, NanosPerSecond)
	for s > 0 && !XmitTimeFits(rateBytes, s) {
		s--
	}
	for XmitTimeFits(rateBytes, s+1) {
		s++
	}
	return Size(s)
}

// Quantum limits of HTB leaf classes: the kernel clamps rate/r2q to this
// range (warning "quantum of class ... is small/big. Consider r2q change.")
// when no quantum is given.
const (
	HTBQuantumMin = 1000
	HTBQuantumMax = 200000
	// HTBDefaultR2Q is HTB's default r2q (rate to quantum divisor).
	HTBDefaultR2Q = 10
)

// Quantum is the DRR quantum in bytes that HTB would pick for a leaf class
// with this rate and the default r2q: rate_bytes/10 clamped to
// [1000, 200000] (htb_change_class). shaperd sends it explicitly so the
// kernel never warns; it is 1000 below 80 kbit/s and 200000 from 16 Mbit/s.
func Quantum(rate Rate) uint32 {
	q := rate.BytesPerSecond() / HTBDefaultR2Q
	return uint32(min(max(q, HTBQuantumMin), HTBQuantumMax))
}

// TBFBuffer is what tbf_change derives from a rate and a burst: the bucket
// depth and the largest packet the TBF accepts.
type TBFBuffer struct {
	// BufferNS is q->buffer: the bucket depth in ns of transmission at the
	// rate. Tokens are refilled to it on every change of the qdisc.
	BufferNS int64
	// MaxSize is q->max_size in bytes (u32 in the kernel). A packet larger
	// than this is dropped unless it is GSO and its segments fit.
	MaxSize uint64
}

// TBFFromBurst is tbf_change with TCA_TBF_BURST (what tc >= 3.13 and shaperd
// send): max_size = burst, buffer = L2T(burst).
func TBFFromBurst(r RateConfig, burst uint32) TBFBuffer {
	return TBFBuffer{BufferNS: int64(r.l2t(burst)), MaxSize: uint64(burst)}
}

// TBFFromTicks is tbf_change without TCA_TBF_BURST (what
// vishvananda/netlink's Tbf sends): buffer = ticks << 6 ns, and max_size =
// r.MaxSizeFromTicks(ticks), which the u64 wrap in T2L can make smaller than
// one packet at high rates.
func TBFFromTicks(r RateConfig, ticks uint32) TBFBuffer {
	return TBFBuffer{BufferNS: TicksToNS(ticks), MaxSize: r.MaxSizeFromTicks(ticks)}
}

// Valid reports whether the kernel accepts the TBF: tbf_change returns
// EINVAL when max_size is 0. (It only warns when max_size is below the
// device MTU; such a TBF drops every full-size non-GSO packet.)
func (b TBFBuffer) Valid() bool { return b.MaxSize != 0 }

// DumpTicks is the buffer as the kernel reports it back in tc_tbf_qopt.buffer:
// PSCHED_NS2TICKS(buffer) stored in a u32.
func (b TBFBuffer) DumpTicks() uint32 { return uint32(NSToTicks(b.BufferNS)) }

// MaxBurst is the largest burst (or cburst) an HTB class at rate can have:
// the kernel keeps the bucket as psched ticks of transmission in a u32
// field, so BufferTicks(rate, b) fails for every b above it. At 8 bit/s it
// is 274 bytes, at 1 Mbit/s about 34 MB. A rate below 8 bit/s (0
// bytes/s) gives 0.
func MaxBurst(rate Rate) Size {
	b := rate.BytesPerSecond()
	if b == 0 {
		return 0
	}
	return maxBurstForTicks(b)
}
