package tcwire

// Sizes of the TCA_STATS2 payloads (linux/gen_stats.h, pkt_sched.h).
const (
	StatsBasicLen     = 12 // struct gnet_stats_basic: bytes u64, packets u32
	StatsQueueLen     = 20 // struct gnet_stats_queue
	StatsRateEstLen   = 8  // struct gnet_stats_rate_est: bps, pps u32
	StatsRateEst64Len = 16 // struct gnet_stats_rate_est64: bps, pps u64
	HTBXstatsLen      = 20 // struct tc_htb_xstats (TCA_STATS_APP of HTB)
)

// Offsets in gnet_stats_basic, gnet_stats_queue and tc_htb_xstats.
const (
	basicPacketsOff    = 8
	queueBacklogOff    = 4
	queueDropsOff      = 8
	queueOverlimitsOff = 16
	htbTokensOff       = 12
	htbCTokensOff      = 16
)

// StatsBasic is struct gnet_stats_basic.
type StatsBasic struct {
	Bytes   uint64
	Packets uint32
}

// ParseStatsBasic decodes TCA_STATS_BASIC; ok is false when it is short.
func ParseStatsBasic(b []byte) (s StatsBasic, ok bool) {
	if len(b) < StatsBasicLen {
		return s, false
	}
	return StatsBasic{Bytes: ne.Uint64(b), Packets: ne.Uint32(b[basicPacketsOff:])}, true
}

// StatsQueue is struct gnet_stats_queue without requeues.
type StatsQueue struct {
	Qlen, Backlog, Drops, Overlimits uint32
}

// ParseStatsQueue decodes TCA_STATS_QUEUE; ok is false when it is short.
func ParseStatsQueue(b []byte) (s StatsQueue, ok bool) {
	if len(b) < StatsQueueLen {
		return s, false
	}
	return StatsQueue{Qlen: ne.Uint32(b), Backlog: ne.Uint32(b[queueBacklogOff:]),
		Drops: ne.Uint32(b[queueDropsOff:]), Overlimits: ne.Uint32(b[queueOverlimitsOff:])}, true
}

// ParseRateEstBps decodes the bytes/s of TCA_STATS_RATE_EST (32-bit) or,
// with wide, TCA_STATS_RATE_EST64; ok is false when it is short.
func ParseRateEstBps(b []byte, wide bool) (bps uint64, ok bool) {
	switch {
	case wide && len(b) >= StatsRateEst64Len:
		return ne.Uint64(b), true
	case !wide && len(b) >= StatsRateEstLen:
		return uint64(ne.Uint32(b)), true
	}
	return 0, false
}

// HTBXstats is the part of struct tc_htb_xstats shaperd reads.
type HTBXstats struct{ Tokens, CTokens int32 }

// ParseHTBXstats decodes TCA_STATS_APP when it is exactly a
// tc_htb_xstats (other qdiscs' xstats have other sizes).
func ParseHTBXstats(b []byte) (x HTBXstats, ok bool) {
	if len(b) != HTBXstatsLen {
		return x, false
	}
	return HTBXstats{Tokens: int32(ne.Uint32(b[htbTokensOff:])), CTokens: int32(ne.Uint32(b[htbCTokensOff:]))}, true
}
