package psched

// Framing is a link's per-packet accounting, as the kernel's rate specs
// (struct tc_ratespec: overhead, mpu, linklayer) carry it for HTB's rate
// and ceil and TBF's rate and peak rate. The kernel charges every packet
// as Charged(len) bytes (psched_l2t_ns): PPPoE over VDSL adds 34 bytes per
// frame, ADSL sends 53-byte ATM cells of 48 payload bytes each.
//
// The zero value is plain Ethernet: no overhead, no minimum, no cells.
type Framing struct {
	// Overhead is added to every packet's length (the L2 frame without
	// FCS); it may be negative (bytes the link does not carry). The
	// kernel's rate spec holds it as u16, so a negative overhead is
	// applied by a size table on the root qdisc instead (SizeTableOverhead):
	// the packet length becomes len + Overhead, at least 1, before any
	// class sees it.
	Overhead int
	// MPU is the minimum packet unit: a packet is charged at least MPU
	// bytes (after the overhead is added).
	MPU uint16
	// ATM rounds the charged length up to whole 48-byte cells of 53 bytes.
	ATM bool
}

// Limits of the per-interface framing settings shaperd accepts (the
// kernel's u16 fields hold more; these are the plausible link overheads,
// as tc-cake(8) bounds them).
const (
	MinOverhead = -64
	MaxOverhead = 256
	MaxMPU      = 256
)

// RateSpec is the part of f that the kernel's rate specs carry: f with a
// negative overhead left to the size table (Overhead 0).
func (f Framing) RateSpec() Framing {
	f.Overhead = max(f.Overhead, 0)
	return f
}

// SizeTableOverhead is the overhead the root qdisc's size table adds
// (struct tc_sizespec.overhead, no table): f's overhead when negative,
// else 0 (no size table).
func (f Framing) SizeTableOverhead() int32 {
	return int32(min(f.Overhead, 0))
}

// QdiscLen is the packet length the classes see (qdisc_pkt_len): len
// adjusted by the size table, at least 1 (__qdisc_calculate_pkt_len).
func (f Framing) QdiscLen(length int) int {
	if o := f.SizeTableOverhead(); o != 0 {
		return max(length+int(o), 1)
	}
	return length
}

// L2T is the time in ns the kernel charges a packet of length bytes at
// bytesPerSec with this framing: the size table first, then the rate
// spec's overhead, mpu and cells (psched_l2t_ns).
func (f Framing) L2T(bytesPerSec uint64, length int) uint64 {
	return f.RateConfig(bytesPerSec).L2T(f.QdiscLen(length))
}

// LinkLayer is the tc_ratespec.linklayer value of f: Ethernet or ATM.
func (f Framing) LinkLayer() LinkLayer {
	if f.ATM {
		return LinkLayerATM
	}
	return LinkLayerEthernet
}

// RateConfig returns the kernel's psched_ratecfg for a rate of bytesPerSec
// with the rate-spec part of this framing (NewRateConfig plus the link
// layer; a negative overhead is the size table's, see L2T).
func (f Framing) RateConfig(bytesPerSec uint64) RateConfig {
	rc := NewRateConfig(bytesPerSec, f.RateSpec().Overhead, uint32(f.MPU))
	rc.LinkLayer = f.LinkLayer()
	return rc
}

// Charged is the number of bytes the kernel charges a packet of length
// bytes: length + Overhead (at least 1), at least MPU, and for ATM
// ceil(len/48)*53.
func (f Framing) Charged(length int) int {
	l := max(length+f.Overhead, 1)
	l = max(l, int(f.MPU))
	if f.ATM {
		l = (l + 47) / 48 * 53
	}
	return l
}

// Goodput is the share of a shaped rate left for packets of length bytes:
// length/Charged(length) (1 for the zero Framing).
func (f Framing) Goodput(length int) float64 {
	if length <= 0 {
		return 0
	}
	return float64(length) / float64(f.Charged(length))
}
