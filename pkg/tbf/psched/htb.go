package psched

import (
	"math"
	"math/bits"
)

// HTBDefaultMTU is tc's default "mtu" for HTB classes (q_htb.c: 1600, "eth
// packet len"): the size its default burst adds to rate/HZ.
const HTBDefaultMTU = 1600

// HTBDefaultBurst is the burst in bytes tc gives an HTB class at
// bytesPerSec when none is given (q_htb.c): rate_bytes/HZ + mtu, integer
// division, with HZ (1e9 on this kernel) and mtu HTBDefaultMTU. So it is
// 1600 B for every rate below 8 Gbit/s and 1612 B at 100 Gbit/s: far too
// small for fast classes. tc applies the same rule to cburst with the ceil
// rate.
func HTBDefaultBurst(bytesPerSec uint64) uint64 {
	return bytesPerSec/HZ + HTBDefaultMTU
}

// MaxBurst is the largest burst in bytes whose buffer at bytesPerSec still
// fits the kernel's u32 tick field (XmitTimeFits), found from the closed
// form (2^32-2)*64*rate/1e9 and then adjusted for tc's float rounding. HTB
// keeps its buckets in that field, so no class can have a larger burst (or
// cburst). A rate of 0 bytes/s gives 0; a rate so high that no u64 burst
// overflows the field gives MaxUint64.
func MaxBurst(bytesPerSec uint64) uint64 {
	hi, lo := bits.Mul64(bytesPerSec, (math.MaxUint32-1)*TickNS)
	if hi >= NanosPerSecond {
		return math.MaxUint64
	}
	s, _ := bits.Div64(hi, lo, NanosPerSecond)
	for s > 0 && !XmitTimeFits(bytesPerSec, s) {
		s--
	}
	for XmitTimeFits(bytesPerSec, s+1) {
		s++
	}
	return s
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

// HTBQuantum is the DRR quantum in bytes that HTB would pick for a leaf
// class at bytesPerSec with the default r2q: rate_bytes/10 clamped to
// [1000, 200000] (htb_change_class). shaperd sends it explicitly so the
// kernel never warns; it is 1000 below 80 kbit/s and 200000 from 16 Mbit/s.
func HTBQuantum(bytesPerSec uint64) uint32 {
	q := bytesPerSec / HTBDefaultR2Q
	return uint32(min(max(q, HTBQuantumMin), HTBQuantumMax))
}
