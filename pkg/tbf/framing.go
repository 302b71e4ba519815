package tbf

// Framing is a link's per-packet accounting, as the kernel's rate specs
// (struct tc_ratespec: overhead, mpu, linklayer) carry it for HTB's rate
// and ceil and TBF's rate and peak rate. The kernel charges every packet
// as Charged(len) bytes (psched_l2t_ns): PPPoE over VDSL adds 34 bytes per
// frame, ADSL sends 53-byte ATM cells of 48 payload bytes each.
//
// The zero value is plain Ethernet: no overhead, no minimum, no cells.
type Framing struct {
	// Overhead is added to every packet's length (the L2 frame without FCS).
	// The kernel's field is u16: a negative overhead does not fit it.
	Overhead uint16
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
	MaxOverhead = 256
	MaxMPU      = 256
)

// LinkLayer is the tc_ratespec.linklayer value of f: Ethernet or ATM.
func (f Framing) LinkLayer() LinkLayer {
	if f.ATM {
		return LinkLayerATM
	}
	return LinkLayerEthernet
}

// RateConfig returns the kernel's psched_ratecfg for a rate of bytesPerSec
// with this framing (NewRateConfig plus the link layer).
func (f Framing) RateConfig(bytesPerSec uint64) RateConfig {
	rc := NewRateConfig(bytesPerSec, int(f.Overhead), uint32(f.MPU))
	rc.LinkLayer = f.LinkLayer()
	return rc
}

// Charged is the number of bytes the kernel charges a packet of length
// bytes: length + Overhead, at least MPU, and for ATM ceil(len/48)*53.
func (f Framing) Charged(length int) int {
	l := length + int(f.Overhead)
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
