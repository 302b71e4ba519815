package tbf

import (
	"errors"
	"math"
	"testing"

	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

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
		if b < RecommendedBurstMin && psched.XmitTimeFits(r.BytesPerSecond(), uint64(b)+1) {
			t.Fatalf("RecommendedBurst(%s) = %d is below the floor although %d fits", r, b, b+1)
		}
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

func TestBufferTicks(t *testing.T) {
	tests := []struct {
		name    string
		rate    Rate
		burst   Size
		want    uint32
		wantErr error
	}{
		{"10mbit 1600", 10 * Mbit, 1600, 20000, nil},
		{"100gbit 1612", 100 * Gbit, 1612, 3, nil},
		// 34.4 Gbit (4.3e9 B/s): 64 KiB = 15.24 us = 238.14 ticks -> 239.
		{"34.4gbit 64KiB", 34400 * Mbit, 64 * Kibibyte, 239, nil},
		// 8 bit/s = 1 B/s: 274 B fits, 275 B does not.
		{"8bit 274", 8 * Bit, 274, 4_281_250_000, nil},
		{"8bit 275", 8 * Bit, 275, 0, psched.ErrTicksOverflow},
		// 1 bit/s is 0 bytes/s.
		{"1bit", 1 * Bit, 1600, 0, psched.ErrZeroByteRate},
		{"7bit", 7 * Bit, 1600, 0, psched.ErrZeroByteRate},
		// a burst beyond 4 GiB is fine for tc >= 6.17 when the ticks fit:
		// 5 GiB at 100 Gbit = 0.4295 s = 6710886.4 ticks -> 6710887.
		{"100gbit 5GiB", 100 * Gbit, 5 * Gibibyte, 6_710_887, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BufferTicks(tt.rate, tt.burst)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("BufferTicks(%s, %s) error %v, want %v", tt.rate, tt.burst, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("BufferTicks(%s, %s) = %d, want %d", tt.rate, tt.burst, got, tt.want)
			}
		})
	}
}

func TestBurstFromTicks(t *testing.T) {
	tests := []struct {
		name  string
		rate  Rate
		ticks uint32
		want  Size
	}{
		// 20000 ticks = 1280000 ns at 1250000 B/s = 1600 B.
		{"10mbit", 10 * Mbit, 20000, 1600},
		// old tc's 0 ticks at 100 Gbit: max_size 0, the kernel rejects the TBF.
		{"100gbit 0 ticks", 100 * Gbit, 0, 0},
		// 100 Gbit, 23058432 ticks = 1475739648 ns: 1475739648*12.5e9 wraps
		// 2^64 by 1526290448384 -> 1526 B instead of 18.4 GB.
		{"100gbit wrap", 100 * Gbit, 23_058_432, 1526},
		// The kernel caps the buffer at 2^32-1 ns before t2l and max_size at
		// 2^32-1 B: 10 Gbit with all ticks -> 4294967295 ns -> 5.37e9 B -> cap.
		{"10gbit max ticks", 10 * Gbit, math.MaxUint32, math.MaxUint32},
		// 1 B/s, max ticks: 4294967295 ns -> 4 B.
		{"8bit max ticks", 8 * Bit, math.MaxUint32, 4},
		{"0 B/s", 1 * Bit, 20000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BurstFromTicks(tt.rate, tt.ticks); got != tt.want {
				t.Errorf("BurstFromTicks(%s, %d) = %d, want %d", tt.rate, tt.ticks, got, tt.want)
			}
		})
	}
}
