package kernel

import (
	"encoding/binary"
	"errors"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Netlink and tc constants (include/uapi/linux/rtnetlink.h, pkt_sched.h,
// pkt_cls.h, tc_act/tc_mirred.h) that this package encodes by hand.
const (
	rtmNewQdisc   = 36
	rtmDelQdisc   = 37
	rtmGetQdisc   = 38
	rtmNewTClass  = 40
	rtmDelTClass  = 41
	rtmGetTClass  = 42
	rtmNewTFilter = 44
	rtmDelTFilter = 45
	rtmGetTFilter = 46

	tcaKind          = 1
	tcaOptions       = 2
	tcaStats2        = 7
	tcaDumpInvisible = 10

	tcaStatsBasic     = 1
	tcaStatsRateEst   = 2
	tcaStatsQueue     = 3
	tcaStatsApp       = 4
	tcaStatsRateEst64 = 5
	tcaStatsPkt64     = 8

	tcaHTBParms      = 1
	tcaHTBInit       = 2
	tcaHTBDirectQlen = 5
	tcaHTBRate64     = 6
	tcaHTBCeil64     = 7

	tcaTBFParms   = 1
	tcaTBFRate64  = 4
	tcaTBFPrate64 = 5
	tcaTBFBurst   = 6
	tcaTBFPburst  = 7

	tcaFQCodelTarget   = 1
	tcaFQCodelLimit    = 2
	tcaFQCodelInterval = 3
	tcaFQCodelFlows    = 5
	tcaFQCodelQuantum  = 6

	tcaCakeDiffservMode = 3

	sfqQoptV1Len = 72 // sizeof(struct tc_sfq_qopt_v1)

	tcaStab       = 8
	tcaStabBase   = 1
	sizespecLen   = 24 // sizeof(struct tc_sizespec)
	sizespecOvOff = 4  // offset of tc_sizespec.overhead (s32)

	tcaU32Sel = 5
	tcaU32Act = 7

	tcaActKind    = 1
	tcaActOptions = 2

	tcaMirredParms = 2

	tcActStolen    = 4
	tcaEgressRedir = 1
	tcU32Terminal  = 1
	tcLinklayerEth = 1
	htbVersion     = 3
	ethPAll        = 0x0003
	nlaFNested     = 1 << 15
	nlaTypeMask    = ^uint16(3 << 14)
)

// tcmsgLen is sizeof(struct tcmsg).
const tcmsgLen = 20

// tcmsg is struct tcmsg: family, ifindex, handle, parent, info.
type tcmsg struct {
	Ifindex uint32
	Handle  uint32
	Parent  uint32
	Info    uint32
}

// appendTo appends the tcmsg in host byte order (family AF_UNSPEC).
func (m tcmsg) appendTo(b []byte) []byte {
	b = append(b, 0, 0, 0, 0) // family + padding
	b = binary.NativeEndian.AppendUint32(b, m.Ifindex)
	b = binary.NativeEndian.AppendUint32(b, m.Handle)
	b = binary.NativeEndian.AppendUint32(b, m.Parent)
	return binary.NativeEndian.AppendUint32(b, m.Info)
}

var errShort = errors.New("message too short")

// parseTcmsg splits a tc message into its tcmsg and its attributes.
func parseTcmsg(b []byte) (tcmsg, []byte, error) {
	if len(b) < tcmsgLen {
		return tcmsg{}, nil, errShort
	}
	ne := binary.NativeEndian
	return tcmsg{
		Ifindex: ne.Uint32(b[4:]), Handle: ne.Uint32(b[8:]),
		Parent: ne.Uint32(b[12:]), Info: ne.Uint32(b[16:]),
	}, b[tcmsgLen:], nil
}

// attrs is a netlink attribute encoder that appends to a byte slice.
type attrs struct{ b []byte }

func align4(n int) int { return (n + 3) &^ 3 }

func (a *attrs) pad() {
	for len(a.b)%4 != 0 {
		a.b = append(a.b, 0)
	}
}

// bytes appends an attribute with payload p.
func (a *attrs) bytes(typ uint16, p []byte) {
	a.b = binary.NativeEndian.AppendUint16(a.b, uint16(4+len(p)))
	a.b = binary.NativeEndian.AppendUint16(a.b, typ)
	a.b = append(a.b, p...)
	a.pad()
}

func (a *attrs) str(typ uint16, s string) {
	a.b = binary.NativeEndian.AppendUint16(a.b, uint16(4+len(s)+1))
	a.b = binary.NativeEndian.AppendUint16(a.b, typ)
	a.b = append(a.b, s...)
	a.b = append(a.b, 0)
	a.pad()
}

func (a *attrs) u32(typ uint16, v uint32) {
	a.bytes(typ, binary.NativeEndian.AppendUint32(nil, v))
}

func (a *attrs) u64(typ uint16, v uint64) {
	a.bytes(typ, binary.NativeEndian.AppendUint64(nil, v))
}

// nest appends a nested attribute whose payload fn writes.
func (a *attrs) nest(typ uint16, fn func()) {
	start := len(a.b)
	a.b = append(a.b, 0, 0, 0, 0)
	fn()
	binary.NativeEndian.PutUint16(a.b[start:], uint16(len(a.b)-start))
	binary.NativeEndian.PutUint16(a.b[start+2:], typ|nlaFNested)
}

// nestPlain is nest without the NLA_F_NESTED flag, as iproute2 writes the
// options of most qdiscs (the kernel parses them either way).
func (a *attrs) nestPlain(typ uint16, fn func()) {
	start := len(a.b)
	a.b = append(a.b, 0, 0, 0, 0)
	fn()
	binary.NativeEndian.PutUint16(a.b[start:], uint16(len(a.b)-start))
	binary.NativeEndian.PutUint16(a.b[start+2:], typ)
}

// eachAttr calls fn for every attribute in b (type without flag bits).
// It stops at the first malformed attribute and returns an error.
func eachAttr(b []byte, fn func(typ uint16, p []byte)) error {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			return errors.New("malformed netlink attribute")
		}
		fn(binary.NativeEndian.Uint16(b[2:])&nlaTypeMask, b[4:l])
		if align4(l) >= len(b) {
			return nil
		}
		b = b[align4(l):]
	}
	return nil
}

// ratespec is struct tc_ratespec (12 bytes): cell_log u8, linklayer u8,
// overhead u16, cell_align s16, mpu u16, rate u32.
type ratespec struct {
	Linklayer uint8
	Overhead  uint16
	MPU       uint16
	Rate      uint32 // bytes/s, saturated at 2^32-1
}

// framedRatespec is the rate spec of a rate of bps bytes/s on a link with
// framing f (overhead, mpu, link layer Ethernet or ATM). A negative
// overhead is not the rate spec's (the root qdisc's size table carries
// it): it is sent as 0.
func framedRatespec(f tbf.Framing, bps uint64) ratespec {
	f = f.RateSpec()
	return ratespec{Linklayer: uint8(f.LinkLayer()), Overhead: uint16(f.Overhead), MPU: f.MPU, Rate: rate32(bps)}
}

// framing is the link framing a dumped rate spec carries.
func (r ratespec) framing() tbf.Framing {
	return tbf.Framing{Overhead: int(r.Overhead), MPU: r.MPU, ATM: r.Linklayer == uint8(tbf.LinkLayerATM)}
}

func (r ratespec) appendTo(b []byte) []byte {
	ne := binary.NativeEndian
	b = append(b, 0, r.Linklayer) // cell_log, linklayer
	b = ne.AppendUint16(b, r.Overhead)
	b = ne.AppendUint16(b, 0) // cell_align
	b = ne.AppendUint16(b, r.MPU)
	return ne.AppendUint32(b, r.Rate)
}

func parseRatespec(b []byte) ratespec {
	ne := binary.NativeEndian
	return ratespec{Linklayer: b[1], Overhead: ne.Uint16(b[2:]), MPU: ne.Uint16(b[6:]), Rate: ne.Uint32(b[8:])}
}

// rate32 is the 32-bit rate field for a 64-bit rate: saturated, never 0 for
// a non-zero rate (HTB refuses a 0 rate.rate even with TCA_HTB_RATE64).
func rate32(bps uint64) uint32 {
	if bps > 0xFFFFFFFF {
		return 0xFFFFFFFF
	}
	return uint32(bps)
}
