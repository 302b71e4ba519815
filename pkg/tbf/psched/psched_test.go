package psched

import (
	"math"
	"testing"
)

func TestTicksConversions(t *testing.T) {
	if TickNS != 64 || Shift != 6 {
		t.Fatalf("TickNS = %d, Shift = %d, want 64 and 6", TickNS, Shift)
	}
	toNS := []struct {
		ticks uint32
		want  int64
	}{
		{0, 0}, {1, 64}, {20000, 1_280_000},
		// The largest u32 tick value is 274.87790688 s: 2^32-1 << 6 fits in 64 bits.
		{math.MaxUint32, 274_877_906_880},
	}
	for _, tt := range toNS {
		if got := TicksToNS(tt.ticks); got != tt.want {
			t.Errorf("TicksToNS(%d) = %d, want %d", tt.ticks, got, tt.want)
		}
	}
	toTicks := []struct {
		ns   int64
		want int64
	}{
		{0, 0}, {63, 0}, {64, 1}, {127, 1}, {1_280_000, 20000},
		// Arithmetic shift: negative tokens round toward minus infinity.
		{-1, -1}, {-64, -1}, {-65, -2},
		// HTB's token floor 1 - 60 s.
		{1 - HTBMaxBufferNS, -937_500_000},
	}
	for _, tt := range toTicks {
		if got := NSToTicks(tt.ns); got != tt.want {
			t.Errorf("NSToTicks(%d) = %d, want %d", tt.ns, got, tt.want)
		}
	}
}

func TestXmitTime(t *testing.T) {
	tests := []struct {
		name   string
		rate   uint64
		size   uint32
		want   uint32
		fits   bool
		legacy uint32 // iproute2 6.1 / vishvananda/netlink
	}{
		// 1e6*1600/1250000 = 1280 us, *15.625 = 20000 (docs/kernel.md: tokens 20000).
		{"10mbit 1600", bps10Mbit, 1600, 20000, true, 20000},
		// 1e6*1514/1250000 = 1211.2 us -> 18925 ticks; legacy keeps 1211 us -> 18921.875 -> 18921.
		{"10mbit 1514", bps10Mbit, 1514, 18925, true, 18921},
		// 1 Gbit: 1600/125e6*1e6 = 12.799999999999999 in float64, *15.625 =
		// 199.99999999999997 -> ceil 200; legacy truncates 12.79.. to 12 -> 187.5 -> 187.
		{"1gbit 1600", bps1Gbit, 1600, 200, true, 187},
		// 2^32 B/s: 1600/2^32 s = 0.3725290298 us -> 5.82 ticks -> 6; legacy 0.
		{"2^32 1600", bps2pow32, 1600, 6, true, 0},
		// 100 Gbit, tc's default burst 1612: 0.12896 us = 2.015 ticks -> 3; legacy 0.
		{"100gbit 1612", bps100Gbit, 1612, 3, true, 0},
		// 100 Gbit 64 B: 0.00512 us = 0.08 ticks -> 1.
		{"100gbit 64", bps100Gbit, 64, 1, true, 0},
		// 100 Gbit 64 KiB: 5.24288 us = 81.92 ticks -> 82; legacy 5 us -> 78.
		{"100gbit 64KiB", bps100Gbit, 65536, 82, true, 78},
		// 1 B/s: 1 B = 1e6 us = 15625000 ticks.
		{"1 B/s 1", 1, 1, 15_625_000, true, 15_625_000},
		// 1 B/s: 274 B = 4281250000 ticks fits; 275 B = 4296875000 > 2^32-1 saturates.
		{"1 B/s 274", 1, 274, 4_281_250_000, true, 4_281_250_000},
		{"1 B/s 275", 1, 275, math.MaxUint32, false, 4_296_875_000 - 1<<32},
		// 15625000 B/s is exactly one tick per byte: 2^32-1 B gives exactly
		// 2^32-1 ticks, which tc refuses ("burst out of range"). Legacy tc
		// keeps 274877906 of the 274877906.88 us -> 4294967281.25 -> 4294967281.
		{"tick per byte max", 15_625_000, math.MaxUint32, math.MaxUint32, false, 4_294_967_281},
		{"tick per byte max-1", 15_625_000, math.MaxUint32 - 1, math.MaxUint32 - 1, true, 4_294_967_281},
		// rate 0 saturates (tc would compute +Inf).
		{"rate 0", 0, 1600, math.MaxUint32, false, 0},
		{"size 0", bps10Mbit, 0, 0, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := XmitTime(tt.rate, tt.size); got != tt.want {
				t.Errorf("XmitTime(%d, %d) = %d, want %d", tt.rate, tt.size, got, tt.want)
			}
			if got := XmitTimeFits(tt.rate, uint64(tt.size)); got != tt.fits {
				t.Errorf("XmitTimeFits(%d, %d) = %v, want %v", tt.rate, tt.size, got, tt.fits)
			}
			if got := XmitTimeLegacy(tt.rate, tt.size); got != tt.legacy {
				t.Errorf("XmitTimeLegacy(%d, %d) = %d, want %d", tt.rate, tt.size, got, tt.legacy)
			}
		})
	}
}

// TestXmitTimeCoversBurst: rounding up means the buffer is never shorter
// than the burst's transmission time, so the kernel's t2l of the buffer gives
// back at least the burst (old tc could lose up to a microsecond's worth).
func TestXmitTimeCoversBurst(t *testing.T) {
	for _, rate := range []uint64{1000, bps10Mbit, bps1Gbit, bps10Gbit, bps2pow32, bps34_4G, bps100Gbit} {
		for _, size := range []uint32{64, 1514, 1600, 15140, 65536, 1 << 20} {
			if !XmitTimeFits(rate, uint64(size)) {
				continue
			}
			ticks := XmitTime(rate, size)
			// 1 ns of slack for the float64 product in tc.
			got := NewRateConfig(rate, 0, 0).T2LExact(uint64(TicksToNS(ticks)) + 1)
			if got < uint64(size) {
				t.Errorf("rate %d size %d: %d ticks carry only %d B", rate, size, ticks, got)
			}
		}
	}
}

func TestXmitSize(t *testing.T) {
	tests := []struct {
		rate   uint64
		ticks  uint32
		want   uint64
		legacy uint32
	}{
		// 1250000 * (20000/15.625 = 1280 us) / 1e6 = 1600 B.
		{bps10Mbit, 20000, 1600, 1600},
		// 125e6 * (200/15.625 = 12.8 us) / 1e6 = 1600; tc 6.1 uses 12 us -> 1500.
		{bps1Gbit, 200, 1600, 1500},
		// 100 Gbit, 3 ticks = 0.192 us -> 2400 B; tc 6.1: 0 us -> 0 ("burst 0b").
		{bps100Gbit, 3, 2400, 0},
		{bps10Mbit, 0, 0, 0},
	}
	for _, tt := range tests {
		if got := XmitSize(tt.rate, tt.ticks); got != tt.want {
			t.Errorf("XmitSize(%d, %d) = %d, want %d", tt.rate, tt.ticks, got, tt.want)
		}
		if got := XmitSizeLegacy(tt.rate, tt.ticks); got != tt.legacy {
			t.Errorf("XmitSizeLegacy(%d, %d) = %d, want %d", tt.rate, tt.ticks, got, tt.legacy)
		}
	}
}
