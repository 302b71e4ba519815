package psched

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// Rates used throughout the tests, in bytes/s.
const (
	bps10Mbit  = 1_250_000      // 10 Mbit/s
	bps1Gbit   = 125_000_000    // 1 Gbit/s
	bps10Gbit  = 1_250_000_000  // 10 Gbit/s
	bps2pow32  = 4_294_967_296  // 2^32 B/s = 34.359738368 Gbit/s, first rate needing RATE64
	bps34_4G   = 4_300_000_000  // 34.4 Gbit/s
	bps100Gbit = 12_500_000_000 // 100 Gbit/s
)

func TestNewRateConfigMultShift(t *testing.T) {
	tests := []struct {
		name  string
		rate  uint64
		mult  uint32
		shift uint8
	}{
		// rate 0: the kernel skips the loop, mult stays 1, shift 0.
		{"0 B/s", 0, 1, 0},
		// 1 B/s: factor 1e9 -> mult 1e9, factor 2e9 -> mult 2e9, both below
		// 2^31 = 2147483648; factor 4e9 -> mult 4e9 has bit 31: shift 2.
		{"1 B/s", 1, 4_000_000_000, 2},
		// 10 Mbit: need 1e9*2^k/1.25e6 >= 2^31, 2^k >= 2684354.56, k = 22:
		// mult = 4194304e9/1.25e6 = 3355443200 exactly.
		{"10mbit", bps10Mbit, 3_355_443_200, 22},
		// 10 Gbit: 2^k >= 2^31*1.25e9/1e9 = 2684354560, k = 32:
		// mult = 4294967296e9/1.25e9 = 3435973836.8 -> 3435973836.
		{"10gbit", bps10Gbit, 3_435_973_836, 32},
		// 2^32 B/s: at k = 33 factor 8.59e18 < 2^63 and mult = 2e9 < 2^31;
		// at k = 34 factor 1.718e19 has bit 63: mult = 1e9*2^34/2^32 = 4e9.
		{"2^32 B/s", bps2pow32, 4_000_000_000, 34},
		// 34.4 Gbit: k = 33 gives mult 1997659207 (< 2^31), k = 34 stops on
		// factor bit 63: mult = 17179869184e9/4.3e9 = 3995318414.88.
		{"34.4gbit", bps34_4G, 3_995_318_414, 34},
		// 100 Gbit: mult could reach 2^31 only with factor >= 2.7e19 > 2^64,
		// so factor bit 63 stops it at k = 34: 17179869184e9/12.5e9 =
		// 1374389534.72 -> 1374389534.
		{"100gbit", bps100Gbit, 1_374_389_534, 34},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRateConfig(tt.rate, 0, 0)
			if r.Mult != tt.mult || r.Shift != tt.shift {
				t.Errorf("NewRateConfig(%d) = mult %d shift %d, want mult %d shift %d", tt.rate, r.Mult, r.Shift, tt.mult, tt.shift)
			}
			if r.BytesPerSec != tt.rate || r.LinkLayer != LinkLayerEthernet {
				t.Errorf("NewRateConfig(%d) = %+v, want rate kept and Ethernet", tt.rate, r)
			}
		})
	}
}

// TestNewRateConfigStopRule checks the loop's result against its definition
// in exact big-integer arithmetic for many rates: mult = floor(1e9*2^shift /
// rate), the stop condition holds at shift and did not hold at shift-1.
func TestNewRateConfigStopRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rates := []uint64{1, 2, 3, 7, 8, 999, 1000, 1e6, 1e9, 1e9 + 1, 1 << 31, 1 << 32, 1<<32 - 1, 1 << 40, 1<<63 + 12345, math.MaxUint64}
	for range 2000 {
		rates = append(rates, rng.Uint64()>>rng.IntN(64))
	}
	stops := func(rate uint64, shift uint8) (mult *big.Int, stop bool) {
		factor := new(big.Int).Lsh(big.NewInt(NanosPerSecond), uint(shift))
		mult = new(big.Int).Quo(factor, new(big.Int).SetUint64(rate))
		return mult, mult.Bit(31) == 1 || factor.Bit(63) == 1
	}
	for _, rate := range rates {
		if rate == 0 {
			continue
		}
		r := NewRateConfig(rate, 0, 0)
		mult, stop := stops(rate, r.Shift)
		if !mult.IsUint64() || mult.Uint64() != uint64(r.Mult) || !stop {
			t.Fatalf("rate %d: mult %d shift %d, want mult %v and the stop rule to hold", rate, r.Mult, r.Shift, mult)
		}
		if r.Shift > 0 {
			if _, stopBefore := stops(rate, r.Shift-1); stopBefore {
				t.Fatalf("rate %d: loop should have stopped at shift %d", rate, r.Shift-1)
			}
		}
	}
}

// refL2T is psched_l2t_ns for Ethernet computed with big integers.
func refL2T(r RateConfig, length uint32) uint64 {
	l := uint64(length) + uint64(r.Overhead)
	l = uint64(uint32(l)) // the kernel's unsigned int
	l = max(l, uint64(r.MPU))
	p := new(big.Int).Mul(new(big.Int).SetUint64(l), new(big.Int).SetUint64(uint64(r.Mult)))
	return p.Rsh(p, uint(r.Shift)).Uint64()
}

func TestL2T(t *testing.T) {
	tests := []struct {
		name     string
		rate     uint64
		overhead int
		mpu      uint32
		length   int
		want     uint64
	}{
		// docs/kernel.md: 1500*3435973836 >> 32 = 5153960754000/4294967296 = 1199.99... -> 1199 (exact 1200).
		{"10gbit 1500", bps10Gbit, 0, 0, 1500, 1199},
		// 10 Mbit: mult/2^22 = 800 exactly, so l2t = 800 ns per byte.
		{"10mbit 1500", bps10Mbit, 0, 0, 1500, 1_200_000},
		{"10mbit 1600", bps10Mbit, 0, 0, 1600, 1_280_000},
		{"10mbit 64", bps10Mbit, 0, 0, 64, 51_200},
		// 64 KiB GSO packet: 65536*800 = 52428800. (65536*3355443200 needs
		// 48 bits: naive 32-bit code wraps here.)
		{"10mbit 64KiB", bps10Mbit, 0, 0, 65536, 52_428_800},
		// overhead 24 and mpu 64: 20+24 = 44 < 64 -> 64*800; 1500+24 = 1524*800.
		{"10mbit mpu", bps10Mbit, 24, 64, 20, 51_200},
		{"10mbit overhead", bps10Mbit, 24, 64, 1500, 1_219_200},
		// 1 B/s: 4e9 >> 2 = 1e9 ns per byte; 64 KiB -> 65536 s.
		{"1 B/s 1", 1, 0, 0, 1, 1_000_000_000},
		{"1 B/s 64KiB", 1, 0, 0, 65536, 65_536_000_000_000},
		// rate 0: mult 1, shift 0, 1 ns per byte (behaves like 1 GB/s).
		{"0 B/s 1500", 0, 0, 0, 1500, 1500},
		// 2^32 B/s: 1500*4e9 >> 34 = 6e12/17179869184 = 349.24 -> 349.
		{"2^32 1500", bps2pow32, 0, 0, 1500, 349},
		// 34.4 Gbit: 1500*3995318414 >> 34 = 5992977621000/17179869184 = 348.83 -> 348.
		{"34.4gbit 1500", bps34_4G, 0, 0, 1500, 348},
		// 100 Gbit: 1500*1374389534 >> 34 = 119.99999 -> 119 (exact 120).
		{"100gbit 1500", bps100Gbit, 0, 0, 1500, 119},
		// 64*1374389534 >> 34 = 87960930176/17179869184 = 5.12 -> 5.
		{"100gbit 64", bps100Gbit, 0, 0, 64, 5},
		// 65536*1374389534 >> 34 = 5242.8799 -> 5242 (exact 5242.88).
		{"100gbit 64KiB", bps100Gbit, 0, 0, 65536, 5242},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRateConfig(tt.rate, tt.overhead, tt.mpu)
			got := r.L2T(tt.length)
			if got != tt.want {
				t.Errorf("L2T(%d) at %d B/s = %d, want %d", tt.length, tt.rate, got, tt.want)
			}
			if ref := refL2T(r, uint32(tt.length)); got != ref {
				t.Errorf("L2T(%d) = %d, big-integer reference %d", tt.length, got, ref)
			}
		})
	}
}

// TestL2TNeverOverestimates: mult is rounded down, so l2t never exceeds
// the exact len*1e9/rate, and it is within 1 ns + 2^-30 relative of it.
func TestL2TNeverOverestimates(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		rate := rng.Uint64N(1<<40) + 1
		length := uint32(rng.IntN(65536) + 1)
		r := NewRateConfig(rate, 0, 0)
		got := r.L2T(int(length))
		exact := new(big.Int).Mul(big.NewInt(int64(length)), big.NewInt(NanosPerSecond))
		exact.Quo(exact, new(big.Int).SetUint64(rate))
		if !exact.IsUint64() || got > exact.Uint64() {
			t.Fatalf("rate %d len %d: L2T %d > exact %v", rate, length, got, exact)
		}
		if diff := exact.Uint64() - got; diff > 1+exact.Uint64()>>30 {
			t.Fatalf("rate %d len %d: L2T %d too far below exact %v", rate, length, got, exact)
		}
	}
}

func TestL2TATM(t *testing.T) {
	r := NewRateConfig(bps10Mbit, 0, 0)
	r.LinkLayer = LinkLayerATM
	// 100 B -> ceil(100/48) = 3 cells -> 159 B on the wire -> 159*800 ns.
	if got := r.L2T(100); got != 127_200 {
		t.Errorf("ATM L2T(100) = %d, want 127200", got)
	}
	// 96 B is exactly 2 cells -> 106 B -> 84800 ns.
	if got := r.L2T(96); got != 84_800 {
		t.Errorf("ATM L2T(96) = %d, want 84800", got)
	}
	// t2l: 127200 ns -> 159 B -> 159/53*48 = 144 B.
	if got := r.T2L(127_200); got != 144 {
		t.Errorf("ATM T2L(127200) = %d, want 144", got)
	}
}

// refT2L is psched_ns_t2l for Ethernet with the u64 wrap, in big integers.
func refT2L(rate uint64, overhead uint16, ns uint64) uint64 {
	p := new(big.Int).Mul(new(big.Int).SetUint64(ns), new(big.Int).SetUint64(rate))
	p.Mod(p, new(big.Int).Lsh(big.NewInt(1), 64)) // the kernel's u64 product
	l := p.Quo(p, big.NewInt(NanosPerSecond)).Uint64()
	if l > uint64(overhead) {
		return l - uint64(overhead)
	}
	return 0
}

func TestT2L(t *testing.T) {
	tests := []struct {
		name      string
		rate      uint64
		overhead  int
		ns        uint64
		want      uint64
		wantExact uint64
		wraps     bool
	}{
		// 1280000 ns at 10 Mbit = 1600 B (the 20000-tick HTB/TBF buffer).
		{"10mbit buffer", bps10Mbit, 0, 1_280_000, 1600, 1600, false},
		// with overhead 24 the kernel subtracts it: 1576.
		{"10mbit overhead", bps10Mbit, 24, 1_280_000, 1576, 1576, false},
		// 10 ns at 10 Mbit = 0.0125 B -> 0, and 0 <= overhead -> 0.
		{"tiny", bps10Mbit, 24, 10, 0, 0, false},
		{"rate 0", 0, 0, 1_000_000_000, 0, 0, false},
		// 100 Gbit for 1 s: 1e9*12.5e9 = 1.25e19 < 2^64: 12.5e9 B.
		{"100gbit 1s", bps100Gbit, 0, 1_000_000_000, 12_500_000_000, 12_500_000_000, false},
		// 100 Gbit for 2 s: 2.5e19 - 2^64 = 6553255926290448384 -> /1e9 =
		// 6553255926 instead of 25e9.
		{"100gbit 2s wraps", bps100Gbit, 0, 2_000_000_000, 6_553_255_926, 25_000_000_000, true},
		// first wrapping ns at 100 Gbit: ceil(2^64/12.5e9) = 1475739526:
		// 1475739526*12.5e9 - 2^64 = 1290448384 -> 1 B.
		{"100gbit first wrap", bps100Gbit, 0, 1_475_739_526, 1, 18_446_744_075, true},
		{"100gbit last exact", bps100Gbit, 0, 1_475_739_525, 18_446_744_062, 18_446_744_062, false},
		// 2^32 B/s for 4294967295 ns (the u32 cap of TBF's buffer):
		// 2^32*(2^32-1) < 2^64, no wrap: 18446744069414584320/1e9 = 18446744069.
		{"2^32 u32 buffer", bps2pow32, 0, math.MaxUint32, 18_446_744_069, 18_446_744_069, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRateConfig(tt.rate, tt.overhead, 0)
			if got := r.T2L(tt.ns); got != tt.want {
				t.Errorf("T2L(%d) = %d, want %d", tt.ns, got, tt.want)
			}
			if ref := refT2L(tt.rate, uint16(tt.overhead), tt.ns); ref != tt.want {
				t.Errorf("big-integer reference T2L(%d) = %d, table says %d", tt.ns, ref, tt.want)
			}
			if got := r.T2LExact(tt.ns); got != tt.wantExact {
				t.Errorf("T2LExact(%d) = %d, want %d", tt.ns, got, tt.wantExact)
			}
			if got := r.T2LWraps(tt.ns); got != tt.wraps {
				t.Errorf("T2LWraps(%d) = %v, want %v", tt.ns, got, tt.wraps)
			}
		})
	}
}

func TestT2LRandomAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		rate, ns := rng.Uint64()>>rng.IntN(64), rng.Uint64()>>rng.IntN(64)
		overhead := uint16(rng.IntN(100))
		r := NewRateConfig(rate, int(overhead), 0)
		if got, want := r.T2L(ns), refT2L(rate, overhead, ns); got != want {
			t.Fatalf("T2L(%d) at %d B/s = %d, want %d", ns, rate, got, want)
		}
	}
}

func TestOverheadMPUFields(t *testing.T) {
	// The kernel fields are u16: -4 arrives as 65532, as in the netlink message.
	if r := NewRateConfig(bps10Mbit, -4, 70000); r.Overhead != 65532 || r.MPU != 70000-65536 {
		t.Errorf("NewRateConfig(-4, 70000) = overhead %d mpu %d, want 65532 and 4464", r.Overhead, r.MPU)
	}
	tests := []struct {
		overhead int
		mpu      uint32
		ok       bool
	}{
		{0, 0, true}, {24, 64, true}, {65535, 65535, true},
		{-1, 0, false}, {65536, 0, false}, {0, 65536, false},
	}
	for _, tt := range tests {
		if got := ValidOverheadMPU(tt.overhead, tt.mpu); got != tt.ok {
			t.Errorf("ValidOverheadMPU(%d, %d) = %v, want %v", tt.overhead, tt.mpu, got, tt.ok)
		}
	}
}

func TestRate32(t *testing.T) {
	tests := []struct {
		rate uint64
		want uint32
	}{
		{0, 0}, {bps10Gbit, bps10Gbit}, {bps2pow32 - 1, math.MaxUint32},
		{bps2pow32, math.MaxUint32}, {bps100Gbit, math.MaxUint32},
	}
	for _, tt := range tests {
		if got := NewRateConfig(tt.rate, 0, 0).Rate32(); got != tt.want {
			t.Errorf("Rate32(%d) = %d, want %d", tt.rate, got, tt.want)
		}
	}
}
