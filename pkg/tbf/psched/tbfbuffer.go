package psched

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
