package tbf

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

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
	byTime, _ := bits.Div64(hi, lo, psched.NanosPerSecond)
	burst := max(Size(byTime), RecommendedBurstMin)
	return min(burst, Size(psched.MaxBurst(b)), math.MaxUint32)
}

// MaxBurst is the largest burst (or cburst) an HTB class at rate can have:
// the kernel keeps the bucket as psched ticks of transmission in a u32
// field, so BufferTicks(rate, b) fails for every b above it
// (psched.MaxBurst). At 8 bit/s it is 274 bytes, at 1 Mbit/s about 34 MB.
// A rate below 8 bit/s (0 bytes/s) gives 0.
func MaxBurst(rate Rate) Size {
	b := rate.BytesPerSecond()
	if b == 0 {
		return 0
	}
	return Size(psched.MaxBurst(b))
}

// BufferTicks is the tick value tc puts into HTB's buffer/cbuffer and TBF's
// buffer for a burst at a rate: psched.XmitTime64(rate in bytes/s, burst),
// with the 64-bit burst of iproute2 >= 6.18. It fails with
// psched.ErrZeroByteRate for rates below 8 bit/s and with
// psched.ErrTicksOverflow when the buffer does not fit the u32 field
// (burst/rate of ~274.9 s or more). For TBF, shaperd sends the burst itself
// (TCA_TBF_BURST) and the kernel ignores these ticks except in dumps; note
// that tc computes TBF's ticks from the 32-bit saturated rate.
func BufferTicks(rate Rate, burst Size) (uint32, error) {
	b := rate.BytesPerSecond()
	if b == 0 {
		return 0, fmt.Errorf("buffer for burst %s at rate %s: %w", burst, rate, psched.ErrZeroByteRate)
	}
	if !psched.XmitTimeFits(b, uint64(burst)) {
		return 0, fmt.Errorf("buffer for burst %s at rate %s (%.0f ticks of 64 ns): %w",
			burst, rate, math.Ceil(psched.XmitTicks(b, uint64(burst))), psched.ErrTicksOverflow)
	}
	return psched.XmitTime64(b, uint64(burst)), nil
}

// BurstFromTicks is the burst in bytes that the kernel derives from a tick
// buffer at rate when no byte burst is given (TBF without TCA_TBF_BURST):
// psched.RateConfig.MaxSizeFromTicks with the rate's overhead 0 and the
// kernel's u64 wrap. Rates of 0 bytes/s give 0 (the kernel then rejects the
// TBF with EINVAL). For what tc prints as "burst" use psched.XmitSize.
func BurstFromTicks(rate Rate, ticks uint32) Size {
	return Size(psched.NewRateConfig(rate.BytesPerSecond(), 0, 0).MaxSizeFromTicks(ticks))
}
