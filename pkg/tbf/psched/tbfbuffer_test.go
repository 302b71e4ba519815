package psched

import (
	"math"
	"testing"
)

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
