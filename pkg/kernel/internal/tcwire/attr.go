package tcwire

import (
	"encoding/binary"
	"fmt"
)

// Attribute types (linux/rtnetlink.h, pkt_sched.h, pkt_cls.h,
// tc_act/tc_mirred.h, gen_stats.h).
const (
	// struct tcmsg attributes (TCA_*).
	TCAKind          = 1
	TCAOptions       = 2
	TCAStats2        = 7
	TCAStab          = 8
	TCADumpInvisible = 10

	// TCA_STATS2 nested attributes (TCA_STATS_*).
	TCAStatsBasic     = 1
	TCAStatsRateEst   = 2
	TCAStatsQueue     = 3
	TCAStatsApp       = 4
	TCAStatsRateEst64 = 5
	TCAStatsPkt64     = 8

	// TCA_STAB nested attributes.
	TCAStabBase = 1

	// HTB options (TCA_HTB_*).
	TCAHTBParms      = 1
	TCAHTBInit       = 2
	TCAHTBDirectQlen = 5
	TCAHTBRate64     = 6
	TCAHTBCeil64     = 7

	// TBF options (TCA_TBF_*).
	TCATBFParms   = 1
	TCATBFRate64  = 4
	TCATBFPrate64 = 5
	TCATBFBurst   = 6
	TCATBFPburst  = 7

	// fq_codel options (TCA_FQ_CODEL_*).
	TCAFQCodelTarget   = 1
	TCAFQCodelLimit    = 2
	TCAFQCodelInterval = 3
	TCAFQCodelFlows    = 5
	TCAFQCodelQuantum  = 6

	// cake options (TCA_CAKE_*).
	TCACakeDiffservMode = 3

	// u32 options (TCA_U32_*).
	TCAU32ClassID = 1
	TCAU32Hash    = 2
	TCAU32Link    = 3
	TCAU32Divisor = 4
	TCAU32Sel     = 5
	TCAU32Act     = 7
	TCAU32Flags   = 11

	// Action attributes (TCA_ACT_*) and mirred's (TCA_MIRRED_*).
	TCAActKind     = 1
	TCAActOptions  = 2
	TCAMirredParms = 2
)

// Values carried in attributes.
const (
	TCActStolen    = 4      // TC_ACT_STOLEN
	TCAEgressRedir = 1      // TCA_EGRESS_REDIR (tc_mirred.eaction)
	TCLinklayerEth = 1      // TC_LINKLAYER_ETHERNET
	HTBVersion     = 3      // TC_HTB_PROTOVER
	EthPAll        = 0x0003 // ETH_P_ALL

	// NLAFNested is NLA_F_NESTED; attribute types are read without it
	// and NLA_F_NET_BYTEORDER (nlaTypeMask).
	NLAFNested  = 1 << 15
	nlaTypeMask = ^uint16(3 << 14)
	nlaHdrLen   = 4
)

// Attrs is a netlink attribute encoder that appends to B (which may
// start with a tcmsg and be reused between requests).
type Attrs struct{ B []byte }

func align4(n int) int { return (n + 3) &^ 3 }

func (a *Attrs) pad() {
	for len(a.B)%4 != 0 {
		a.B = append(a.B, 0)
	}
}

// Bytes appends an attribute with payload p.
func (a *Attrs) Bytes(typ uint16, p []byte) {
	a.B = binary.NativeEndian.AppendUint16(a.B, uint16(nlaHdrLen+len(p)))
	a.B = binary.NativeEndian.AppendUint16(a.B, typ)
	a.B = append(a.B, p...)
	a.pad()
}

// String appends a NUL-terminated string attribute.
func (a *Attrs) String(typ uint16, s string) {
	a.B = binary.NativeEndian.AppendUint16(a.B, uint16(nlaHdrLen+len(s)+1))
	a.B = binary.NativeEndian.AppendUint16(a.B, typ)
	a.B = append(a.B, s...)
	a.B = append(a.B, 0)
	a.pad()
}

// U32 appends a u32 attribute (host order).
func (a *Attrs) U32(typ uint16, v uint32) {
	a.Bytes(typ, binary.NativeEndian.AppendUint32(nil, v))
}

// U64 appends a u64 attribute (host order).
func (a *Attrs) U64(typ uint16, v uint64) {
	a.Bytes(typ, binary.NativeEndian.AppendUint64(nil, v))
}

// Nest appends a nested attribute (with NLA_F_NESTED) whose payload fn
// writes.
func (a *Attrs) Nest(typ uint16, fn func()) { a.nest(typ|NLAFNested, fn) }

// NestPlain is Nest without the NLA_F_NESTED flag, as iproute2 writes the
// options of most qdiscs (the kernel parses them either way).
func (a *Attrs) NestPlain(typ uint16, fn func()) { a.nest(typ, fn) }

func (a *Attrs) nest(typ uint16, fn func()) {
	start := len(a.B)
	a.B = append(a.B, 0, 0, 0, 0)
	fn()
	binary.NativeEndian.PutUint16(a.B[start:], uint16(len(a.B)-start))
	binary.NativeEndian.PutUint16(a.B[start+2:], typ)
}

// EachAttr calls fn for every attribute in b (type without the nested and
// byte-order flag bits), in place. It stops at the first malformed
// attribute and returns an error.
func EachAttr(b []byte, fn func(typ uint16, p []byte)) error {
	for len(b) >= nlaHdrLen {
		l := int(binary.NativeEndian.Uint16(b))
		if l < nlaHdrLen || l > len(b) {
			return fmt.Errorf("malformed netlink attribute (length %d of %d bytes)", l, len(b))
		}
		fn(binary.NativeEndian.Uint16(b[2:])&nlaTypeMask, b[nlaHdrLen:l])
		if align4(l) >= len(b) {
			return nil
		}
		b = b[align4(l):]
	}
	return nil
}

// Kind is a TCA_KIND (or TCA_ACT_KIND) payload as a string: up to the
// first NUL, and without a new string for the kinds a dump is made of.
func Kind(p []byte) string {
	for i, c := range p {
		if c == 0 {
			p = p[:i]
			break
		}
	}
	for _, k := range commonKinds {
		if string(p) == k {
			return k
		}
	}
	return string(p)
}

var commonKinds = [...]string{"htb", "u32", "pfifo", "bfifo", "tbf", "ingress", "mirred"}
