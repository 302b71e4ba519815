package tbf

import (
	"math"
	"testing"
)

func TestDefaultHTBBurst(t *testing.T) {
	tests := []struct {
		rate Rate
		want Size
	}{
		// rate_bytes/1e9 + 1600 (integer division).
		{10 * Mbit, 1600},
		{8*Gbit - 8, 1600}, // 999999999 B/s / 1e9 = 0
		{8 * Gbit, 1601},   // 1e9 B/s
		{20 * Gbit, 1602},  // 2.5e9 B/s: docs/kernel.md's "burst 0b" class
		{100 * Gbit, 1612}, // 12.5e9 B/s
		{0, 1600},
	}
	for _, tt := range tests {
		if got := DefaultHTBBurst(tt.rate); got != tt.want {
			t.Errorf("DefaultHTBBurst(%s) = %d, want %d", tt.rate, got, tt.want)
		}
	}
}

func TestRecommendedBurst(t *testing.T) {
	tests := []struct {
		name string
		rate Rate
		want Size
	}{
		// 1250000 B/s * 5 ms = 6250 B < 15140 -> 15140.
		{"10mbit floor", 10 * Mbit, 15140},
		// crossover: 15140 B / 5 ms = 3028000 B/s = 24.224 Mbit/s.
		{"crossover", 24224 * Kbit, 15140},
		{"above crossover", 24232 * Kbit, 15145}, // 3029000 B/s * 5 ms
		{"1gbit", Gbit, 625_000},
		{"34.4gbit", 34400 * Mbit, 21_500_000},
		{"100gbit", 100 * Gbit, 62_500_000},
		// 1 B/s: the 15140 B floor would need 15140 s > 274.9 s of ticks;
		// the largest burst that fits is 274 B (see TestXmitTime).
		{"8bit capped by ticks", 8 * Bit, 274},
		// 440 bit/s = 55 B/s: 15140 B takes 275.27 s, too long; cap is
		// floor((2^32-2)*64*55/1e9) = 15118 B (15118 B = 274.87 s).
		{"440bit capped by ticks", 440 * Bit, 15118},
		// 10 Tbit/s: 1.25e12 * 5 ms = 6.25e9 B > TCA_TBF_BURST's u32.
		{"10tbit capped by u32", 10 * Tbit, math.MaxUint32},
		{"below 8 bit/s", 7 * Bit, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RecommendedBurst(tt.rate)
			if got != tt.want {
				t.Errorf("RecommendedBurst(%s) = %d, want %d", tt.rate, got, tt.want)
			}
			if got == 0 {
				return
			}
			if _, err := BufferTicks(tt.rate, got); err != nil {
				t.Errorf("RecommendedBurst(%s) = %d does not fit the kernel: %v", tt.rate, got, err)
			}
		})
	}
}

// TestRecommendedBurstAlwaysFits sweeps rates from 8 bit/s to 100 Tbit/s:
// the recommended burst always has a valid tick buffer, fits u32, and is
// maximal where the tick cap binds.
func TestRecommendedBurstAlwaysFits(t *testing.T) {
	for r := 8 * Bit; r <= 100*Tbit; r = r*3/2 + 8 {
		b := RecommendedBurst(r)
		if b == 0 || b > math.MaxUint32 {
			t.Fatalf("RecommendedBurst(%s) = %d", r, b)
		}
		if _, err := BufferTicks(r, b); err != nil {
			t.Fatalf("RecommendedBurst(%s) = %d: %v", r, b, err)
		}
		if b < RecommendedBurstMin && XmitTimeFits(r.BytesPerSecond(), uint64(b)+1) {
			t.Fatalf("RecommendedBurst(%s) = %d is below the floor although %d fits", r, b, b+1)
		}
	}
}

func TestQuantum(t *testing.T) {
	tests := []struct {
		rate Rate
		want uint32
	}{
		{0, 1000},
		{64 * Kbit, 1000},      // 8000 B/s / 10 = 800 -> 1000
		{80 * Kbit, 1000},      // 10000 / 10 = 1000 exactly
		{88 * Kbit, 1100},      // 11000 / 10
		{10 * Mbit, 125_000},   // 1250000 / 10
		{16 * Mbit, 200_000},   // 2000000 / 10 = 200000 exactly
		{100 * Mbit, 200_000},  // 1250000 -> 200000
		{100 * Gbit, 200_000},  // 1.25e9 -> 200000 (the kernel's INT_MAX cap is moot)
		{8*Kbit + 7, 1000},     // 1000 B/s (7 bit dropped) / 10 = 100 -> 1000
		{1599999 * 8, 159_999}, // 1599999 B/s / 10 = 159999.9 -> 159999
	}
	for _, tt := range tests {
		if got := Quantum(tt.rate); got != tt.want {
			t.Errorf("Quantum(%s) = %d, want %d", tt.rate, got, tt.want)
		}
	}
}

func TestTBFFromBurst(t *testing.T) {
	tests := []struct {
		name     string
		rate     uint64
		burst    uint32
		bufferNS int64
		ticks    uint32
	}{
		// 1600 B at 10 Mbit: 1600*800 = 1280000 ns = 20000 ticks.
		{"10mbit", bps10Mbit, 1600, 1_280_000, 20000},
		// 100 Gbit, 1612 B: 1612*1374389534 >> 34 = 128.96 -> 128 ns = 2 ticks.
		{"100gbit default", bps100Gbit, 1612, 128, 2},
		// 100 Gbit, 62.5 MB (5 ms): 62500000*1374389534 >> 34 = 4999999.99.. -> 4999999 ns.
		{"100gbit 5ms", bps100Gbit, 62_500_000, 4_999_999, 78124},
		// u32 burst at 1 B/s: 4294967295*4e9 >> 2 = 4294967295e9 ns; the dump
		// truncates 67108863984375000 ticks to u32.
		{"1 B/s max", 1, math.MaxUint32, 4_294_967_295_000_000_000, uint32(67_108_863_984_375_000 & math.MaxUint32)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TBFFromBurst(NewRateConfig(tt.rate, 0, 0), tt.burst)
			if got.BufferNS != tt.bufferNS || got.MaxSize != uint64(tt.burst) {
				t.Errorf("TBFFromBurst = %+v, want buffer %d max_size %d", got, tt.bufferNS, tt.burst)
			}
			if !got.Valid() {
				t.Errorf("TBFFromBurst(%d) not valid", tt.burst)
			}
			if d := got.DumpTicks(); d != tt.ticks {
				t.Errorf("DumpTicks = %d, want %d", d, tt.ticks)
			}
		})
	}
}

func TestTBFFromTicks(t *testing.T) {
	tests := []struct {
		name    string
		rate    uint64
		ticks   uint32
		buffer  int64
		maxSize uint64
		valid   bool
	}{
		{"10mbit", bps10Mbit, 20000, 1_280_000, 1600, true},
		// Old tc / vishvananda/netlink at 100 Gbit: 0 ticks -> max_size 0 -> EINVAL.
		{"100gbit legacy 0 ticks", bps100Gbit, XmitTimeLegacy(bps100Gbit, 1612), 0, 0, false},
		// 100 Gbit with a 1.4757 s buffer: the u64 wrap leaves max_size 1526 B.
		{"100gbit wrap", bps100Gbit, 23_058_432, 1_475_739_648, 1526, true},
		// q->buffer keeps all ticks (274.9 s) although max_size used 4.29 s.
		{"max ticks", bps10Mbit, math.MaxUint32, 274_877_906_880, 5_368_709, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TBFFromTicks(NewRateConfig(tt.rate, 0, 0), tt.ticks)
			if got.BufferNS != tt.buffer || got.MaxSize != tt.maxSize || got.Valid() != tt.valid {
				t.Errorf("TBFFromTicks(%d) = %+v valid %v, want buffer %d max_size %d valid %v",
					tt.ticks, got, got.Valid(), tt.buffer, tt.maxSize, tt.valid)
			}
			if got.DumpTicks() != tt.ticks {
				t.Errorf("DumpTicks = %d, want the ticks back (%d)", got.DumpTicks(), tt.ticks)
			}
		})
	}
}

func TestMaxBurstFitsAndIsTheMost(t *testing.T) {
	for _, r := range []Rate{8 * Bit, 1000 * Bit, 1900 * Bit, Kbit, Mbit, Gbit} {
		m := MaxBurst(r)
		if m == 0 {
			t.Fatalf("MaxBurst(%s) = 0", r)
		}
		if _, err := BufferTicks(r, m); err != nil {
			t.Errorf("MaxBurst(%s) = %s does not fit: %v", r, m, err)
		}
		if m < math.MaxUint64-1 {
			if _, err := BufferTicks(r, m+1); err == nil {
				t.Errorf("MaxBurst(%s) = %s but %d fits too", r, m, m+1)
			}
		}
	}
	if MaxBurst(7*Bit) != 0 {
		t.Errorf("MaxBurst(7bit) = %d, want 0", MaxBurst(7*Bit))
	}
}
