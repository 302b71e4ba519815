package tcwire

// cls_bpf options (TCA_BPF_*, linux/pkt_cls.h).
const (
	TCABPFClassID = 3
	TCABPFFD      = 6
	TCABPFName    = 7
	TCABPFFlags   = 8
	TCABPFTag     = 10
	TCABPFID      = 11

	// TCABPFFlagActDirect is TCA_BPF_FLAG_ACT_DIRECT: the program's
	// return value is a TC_ACT_* verdict (direct-action mode) instead of
	// a class id (classic mode).
	TCABPFFlagActDirect = 1
)
