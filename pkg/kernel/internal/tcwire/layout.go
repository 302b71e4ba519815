package tcwire

import "encoding/binary"

var ne = binary.NativeEndian

// RatespecLen is sizeof(struct tc_ratespec).
const RatespecLen = 12

// Offsets in struct tc_ratespec: cell_log u8, linklayer u8, overhead u16,
// cell_align s16, mpu u16, rate u32.
const (
	ratespecLinklayerOff = 1
	ratespecOverheadOff  = 2
	ratespecCellAlignOff = 4
	ratespecMPUOff       = 6
	ratespecRateOff      = 8
)

// Ratespec is struct tc_ratespec. shaperd sends cell_log and cell_align
// 0 (the kernel computes its own tables) and reads neither.
type Ratespec struct {
	Linklayer uint8
	Overhead  uint16
	MPU       uint16
	Rate      uint32 // bytes/s, saturated at 2^32-1 (see Rate32)
}

// AppendTo appends r.
func (r Ratespec) AppendTo(b []byte) []byte {
	b = append(b, make([]byte, RatespecLen)...)
	p := b[len(b)-RatespecLen:]
	p[ratespecLinklayerOff] = r.Linklayer
	ne.PutUint16(p[ratespecOverheadOff:], r.Overhead)
	ne.PutUint16(p[ratespecMPUOff:], r.MPU)
	ne.PutUint32(p[ratespecRateOff:], r.Rate)
	return b
}

// ParseRatespec decodes the first RatespecLen bytes of b.
func ParseRatespec(b []byte) Ratespec {
	return Ratespec{Linklayer: b[ratespecLinklayerOff], Overhead: ne.Uint16(b[ratespecOverheadOff:]),
		MPU: ne.Uint16(b[ratespecMPUOff:]), Rate: ne.Uint32(b[ratespecRateOff:])}
}

// Rate32 is the 32-bit rate field for a 64-bit rate: saturated, never 0 for
// a non-zero rate (HTB refuses a 0 rate.rate even with TCA_HTB_RATE64).
func Rate32(bps uint64) uint32 {
	if bps > 0xFFFFFFFF {
		return 0xFFFFFFFF
	}
	return uint32(bps)
}

// HTBOptLen is sizeof(struct tc_htb_opt).
const HTBOptLen = 44

// Offsets in struct tc_htb_opt: rate, ceil (tc_ratespec), buffer, cbuffer,
// quantum, level, prio (u32).
const (
	htbOptCeilOff    = 12
	htbOptBufferOff  = 24
	htbOptCBufferOff = 28
	htbOptQuantumOff = 32
	htbOptLevelOff   = 36
	htbOptPrioOff    = 40
)

// HTBOpt is struct tc_htb_opt (TCA_HTB_PARMS of a class).
type HTBOpt struct {
	Rate, Ceil               Ratespec
	Buffer, CBuffer, Quantum uint32 // buffers in ticks
	Level                    uint32 // the kernel's; sent as 0
	Prio                     uint32
}

// AppendTo appends o.
func (o HTBOpt) AppendTo(b []byte) []byte {
	b = o.Rate.AppendTo(b)
	b = o.Ceil.AppendTo(b)
	for _, v := range [...]uint32{o.Buffer, o.CBuffer, o.Quantum, o.Level, o.Prio} {
		b = ne.AppendUint32(b, v)
	}
	return b
}

// ParseHTBOpt decodes a TCA_HTB_PARMS payload; ok is false when it is
// shorter than HTBOptLen.
func ParseHTBOpt(b []byte) (o HTBOpt, ok bool) {
	if len(b) < HTBOptLen {
		return o, false
	}
	return HTBOpt{
		Rate: ParseRatespec(b), Ceil: ParseRatespec(b[htbOptCeilOff:]),
		Buffer: ne.Uint32(b[htbOptBufferOff:]), CBuffer: ne.Uint32(b[htbOptCBufferOff:]),
		Quantum: ne.Uint32(b[htbOptQuantumOff:]), Level: ne.Uint32(b[htbOptLevelOff:]),
		Prio: ne.Uint32(b[htbOptPrioOff:]),
	}, true
}

// HTBGlobLen is sizeof(struct tc_htb_glob).
const HTBGlobLen = 20

// htbGlobDefclsOff is the offset of tc_htb_glob.defcls (after version and
// rate2quantum); a dump is read up to it.
const htbGlobDefclsOff = 8

// HTBGlob is struct tc_htb_glob (TCA_HTB_INIT of the qdisc).
type HTBGlob struct {
	Version, Rate2Quantum, Defcls, Debug, DirectPkts uint32
}

// AppendTo appends g.
func (g HTBGlob) AppendTo(b []byte) []byte {
	for _, v := range [...]uint32{g.Version, g.Rate2Quantum, g.Defcls, g.Debug, g.DirectPkts} {
		b = ne.AppendUint32(b, v)
	}
	return b
}

// HTBGlobDefcls reads defcls from a TCA_HTB_INIT payload; ok is false when
// the payload does not reach it.
func HTBGlobDefcls(b []byte) (defcls uint32, ok bool) {
	if len(b) < htbGlobDefclsOff+4 {
		return 0, false
	}
	return ne.Uint32(b[htbGlobDefclsOff:]), true
}

// TBFQoptLen is sizeof(struct tc_tbf_qopt).
const TBFQoptLen = 36

// Offsets in struct tc_tbf_qopt: rate, peakrate (tc_ratespec), limit,
// buffer, mtu (u32).
const (
	tbfQoptPeakOff   = 12
	tbfQoptLimitOff  = 24
	tbfQoptBufferOff = 28
	tbfQoptMTUOff    = 32
)

// TBFQopt is struct tc_tbf_qopt (TCA_TBF_PARMS).
type TBFQopt struct {
	Rate, Peakrate     Ratespec
	Limit, Buffer, MTU uint32 // buffer and mtu in ticks
}

// AppendTo appends q.
func (q TBFQopt) AppendTo(b []byte) []byte {
	b = q.Rate.AppendTo(b)
	b = q.Peakrate.AppendTo(b)
	b = ne.AppendUint32(b, q.Limit)
	b = ne.AppendUint32(b, q.Buffer)
	return ne.AppendUint32(b, q.MTU)
}

// ParseTBFQopt decodes a TCA_TBF_PARMS payload; ok is false when it is
// shorter than TBFQoptLen.
func ParseTBFQopt(b []byte) (q TBFQopt, ok bool) {
	if len(b) < TBFQoptLen {
		return q, false
	}
	return TBFQopt{
		Rate: ParseRatespec(b), Peakrate: ParseRatespec(b[tbfQoptPeakOff:]),
		Limit: ne.Uint32(b[tbfQoptLimitOff:]), Buffer: ne.Uint32(b[tbfQoptBufferOff:]), MTU: ne.Uint32(b[tbfQoptMTUOff:]),
	}, true
}

// SizespecLen is sizeof(struct tc_sizespec): cell_log u8, size_log u8,
// cell_align s16, overhead s32, linklayer, mpu, mtu, tsize u32.
const SizespecLen = 24

// sizespecOverheadOff is the offset of tc_sizespec.overhead.
const sizespecOverheadOff = 4

// Sizespec is the part of struct tc_sizespec shaperd uses: the overhead of
// a size table without a table (tsize 0; every other field 0).
type Sizespec struct{ Overhead int32 }

// AppendTo appends s (SizespecLen bytes).
func (s Sizespec) AppendTo(b []byte) []byte {
	b = append(b, make([]byte, SizespecLen)...)
	ne.PutUint32(b[len(b)-SizespecLen+sizespecOverheadOff:], uint32(s.Overhead))
	return b
}

// ParseSizespec decodes a TCA_STAB_BASE payload; ok is false when it does
// not reach the overhead.
func ParseSizespec(b []byte) (s Sizespec, ok bool) {
	if len(b) < sizespecOverheadOff+4 {
		return s, false
	}
	return Sizespec{Overhead: int32(ne.Uint32(b[sizespecOverheadOff:]))}, true
}

// FifoQoptLen is sizeof(struct tc_fifo_qopt): limit u32 (packets for
// pfifo, bytes for bfifo), the whole TCA_OPTIONS of pfifo and bfifo.
const FifoQoptLen = 4

// SFQQoptLen is sizeof(struct tc_sfq_qopt); SFQQoptV1Len is
// sizeof(struct tc_sfq_qopt_v1), which starts with it.
const (
	SFQQoptLen   = 20
	SFQQoptV1Len = 72
)

// Offsets in struct tc_sfq_qopt: quantum, perturb_period, limit, divisor,
// flows (u32).
const (
	sfqQuantumOff = 0
	sfqPerturbOff = 4
	sfqLimitOff   = 8
	sfqDivisorOff = 12
	sfqFlowsOff   = 16
)

// SFQQopt is struct tc_sfq_qopt (the v0 part of tc_sfq_qopt_v1).
type SFQQopt struct {
	Quantum, PerturbPeriod, Limit, Divisor, Flows uint32
}

// AppendV1To appends q as a struct tc_sfq_qopt_v1 whose other fields
// (depth, headdrop, RED) are 0: the kernel's defaults.
func (q SFQQopt) AppendV1To(b []byte) []byte {
	b = append(b, make([]byte, SFQQoptV1Len)...)
	p := b[len(b)-SFQQoptV1Len:]
	ne.PutUint32(p[sfqQuantumOff:], q.Quantum)
	ne.PutUint32(p[sfqPerturbOff:], q.PerturbPeriod)
	ne.PutUint32(p[sfqLimitOff:], q.Limit)
	ne.PutUint32(p[sfqDivisorOff:], q.Divisor)
	ne.PutUint32(p[sfqFlowsOff:], q.Flows)
	return b
}

// ParseSFQQopt decodes sfq's TCA_OPTIONS; ok is false when it is shorter
// than SFQQoptLen.
func ParseSFQQopt(b []byte) (q SFQQopt, ok bool) {
	if len(b) < SFQQoptLen {
		return q, false
	}
	return SFQQopt{
		Quantum: ne.Uint32(b[sfqQuantumOff:]), PerturbPeriod: ne.Uint32(b[sfqPerturbOff:]),
		Limit: ne.Uint32(b[sfqLimitOff:]), Divisor: ne.Uint32(b[sfqDivisorOff:]), Flows: ne.Uint32(b[sfqFlowsOff:]),
	}, true
}

// MirredLen is sizeof(struct tc_mirred): tc_gen (index, capab, action,
// refcnt, bindcnt), eaction, ifindex.
const MirredLen = 28

const (
	mirredActionOff  = 8
	mirredEactionOff = 20
	mirredIfindexOff = 24
)

// Mirred is the part of struct tc_mirred shaperd sets (index, capab,
// refcnt and bindcnt are 0: the kernel's).
type Mirred struct {
	Action  uint32 // TC_ACT_*
	Eaction uint32 // TCA_EGRESS_REDIR, ...
	Ifindex uint32
}

// AppendTo appends m (MirredLen bytes).
func (m Mirred) AppendTo(b []byte) []byte {
	b = append(b, make([]byte, MirredLen)...)
	p := b[len(b)-MirredLen:]
	ne.PutUint32(p[mirredActionOff:], m.Action)
	ne.PutUint32(p[mirredEactionOff:], m.Eaction)
	ne.PutUint32(p[mirredIfindexOff:], m.Ifindex)
	return b
}

// ParseMirred decodes a TCA_MIRRED_PARMS payload; ok is false when it is
// shorter than MirredLen.
func ParseMirred(b []byte) (m Mirred, ok bool) {
	if len(b) < MirredLen {
		return m, false
	}
	return Mirred{Action: ne.Uint32(b[mirredActionOff:]), Eaction: ne.Uint32(b[mirredEactionOff:]), Ifindex: ne.Uint32(b[mirredIfindexOff:])}, true
}
