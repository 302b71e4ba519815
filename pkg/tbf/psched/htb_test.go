package psched

import (
	"math"
	"testing"
)

func TestHTBDefaultBurst(t *testing.T) {
	tests := []struct {
		name string
		rate uint64 // bytes/s
		want uint64
	}{
		// rate_bytes/1e9 + 1600 (integer division).
		{"10mbit", bps10Mbit, 1600},
		{"8gbit-8bit", 999_999_999, 1600}, // 999999999 B/s / 1e9 = 0
		{"8gbit", 1_000_000_000, 1601},    // 1e9 B/s
		{"20gbit", 2_500_000_000, 1602},   // 2.5e9 B/s: docs/kernel.md's "burst 0b" class
		{"100gbit", bps100Gbit, 1612},     // 12.5e9 B/s
		{"0", 0, 1600},
	}
	for _, tt := range tests {
		if got := HTBDefaultBurst(tt.rate); got != tt.want {
			t.Errorf("HTBDefaultBurst(%s) = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestHTBQuantum(t *testing.T) {
	tests := []struct {
		name string
		rate uint64 // bytes/s
		want uint32
	}{
		{"0", 0, 1000},
		{"64kbit", 8000, 1000},              // 8000 B/s / 10 = 800 -> 1000
		{"80kbit", 10_000, 1000},            // 10000 / 10 = 1000 exactly
		{"88kbit", 11_000, 1100},            // 11000 / 10
		{"10mbit", bps10Mbit, 125_000},      // 1250000 / 10
		{"16mbit", 2_000_000, 200_000},      // 2000000 / 10 = 200000 exactly
		{"100mbit", 12_500_000, 200_000},    // 1250000 -> 200000
		{"100gbit", bps100Gbit, 200_000},    // 1.25e9 -> 200000 (the kernel's INT_MAX cap is moot)
		{"8007bit", 1000, 1000},             // 1000 B/s (7 bit dropped) / 10 = 100 -> 1000
		{"12799992bit", 1_599_999, 159_999}, // 1599999 B/s / 10 = 159999.9 -> 159999
	}
	for _, tt := range tests {
		if got := HTBQuantum(tt.rate); got != tt.want {
			t.Errorf("HTBQuantum(%s) = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// MaxBurst fits the tick field and is the largest burst that does.
func TestMaxBurst(t *testing.T) {
	for _, rate := range []uint64{1, 125, 237, 1000, bps10Mbit, bps1Gbit} {
		m := MaxBurst(rate)
		if m == 0 || !XmitTimeFits(rate, m) || XmitTimeFits(rate, m+1) {
			t.Errorf("MaxBurst(%d B/s) = %d: fits %v, next fits %v", rate, m, XmitTimeFits(rate, m), XmitTimeFits(rate, m+1))
		}
	}
	if MaxBurst(1) != 274 {
		t.Errorf("MaxBurst(1 B/s) = %d, want 274", MaxBurst(1))
	}
	if MaxBurst(0) != 0 {
		t.Errorf("MaxBurst(0) = %d, want 0", MaxBurst(0))
	}
	if m := MaxBurst(math.MaxUint64); m != math.MaxUint64 {
		t.Errorf("MaxBurst(MaxUint64 B/s) = %d, want MaxUint64", m)
	}
}
