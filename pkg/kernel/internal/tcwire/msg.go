// Package tcwire is shaperd's one netlink codec for traffic control: the
// rtnetlink tc message header (struct tcmsg), the attribute encoder and
// walker, the constants of include/uapi/linux/rtnetlink.h, pkt_sched.h,
// pkt_cls.h and tc_act/tc_mirred.h that shaperd uses, and the C structures
// carried in attributes (tc_ratespec, tc_htb_opt, tc_htb_glob,
// tc_tbf_qopt, tc_sizespec, tc_fifo_qopt, tc_sfq_qopt, tc_mirred,
// tc_u32_sel, gnet_stats_*), each with its field offsets named and pinned
// by a byte-layout test (layout_test.go).
//
// Both pkg/kernel (qdiscs, classes, the IFB redirect) and pkg/kernel/u32
// (the u32 classifier) encode and decode through it. Decoders walk
// attributes in place, without a decoder or a slice per message, because
// a dump of 10,000 users has tens of thousands of objects.
package tcwire

import (
	"encoding/binary"
	"fmt"
)

// rtnetlink message types (linux/rtnetlink.h).
const (
	RTMNewQdisc   = 36
	RTMDelQdisc   = 37
	RTMGetQdisc   = 38
	RTMNewTClass  = 40
	RTMDelTClass  = 41
	RTMGetTClass  = 42
	RTMNewTFilter = 44
	RTMDelTFilter = 45
	RTMGetTFilter = 46
)

// TcmsgLen is sizeof(struct tcmsg).
const TcmsgLen = 20

// Offsets of the fields of struct tcmsg: family u8 and three pad bytes,
// then ifindex, handle, parent, info (host order).
const (
	tcmsgIfindexOff = 4
	tcmsgHandleOff  = 8
	tcmsgParentOff  = 12
	tcmsgInfoOff    = 16
)

// Tcmsg is struct tcmsg (family AF_UNSPEC). For a filter, Info is
// priority<<16 | protocol in network order (FilterInfo).
type Tcmsg struct {
	Ifindex uint32
	Handle  uint32
	Parent  uint32
	Info    uint32
}

// AppendTo appends m in host byte order.
func (m Tcmsg) AppendTo(b []byte) []byte {
	b = append(b, make([]byte, TcmsgLen)...)
	m.put(b[len(b)-TcmsgLen:])
	return b
}

func (m Tcmsg) put(b []byte) {
	ne := binary.NativeEndian
	ne.PutUint32(b[tcmsgIfindexOff:], m.Ifindex)
	ne.PutUint32(b[tcmsgHandleOff:], m.Handle)
	ne.PutUint32(b[tcmsgParentOff:], m.Parent)
	ne.PutUint32(b[tcmsgInfoOff:], m.Info)
}

// ParseTcmsg splits a tc message body into its tcmsg and its attributes.
func ParseTcmsg(b []byte) (Tcmsg, []byte, error) {
	if len(b) < TcmsgLen {
		return Tcmsg{}, nil, fmt.Errorf("tcmsg of %d bytes, want %d", len(b), TcmsgLen)
	}
	ne := binary.NativeEndian
	return Tcmsg{
		Ifindex: ne.Uint32(b[tcmsgIfindexOff:]), Handle: ne.Uint32(b[tcmsgHandleOff:]),
		Parent: ne.Uint32(b[tcmsgParentOff:]), Info: ne.Uint32(b[tcmsgInfoOff:]),
	}, b[TcmsgLen:], nil
}

// FilterInfo is tcm_info for a filter: priority and protocol (host order
// here, network order on the wire).
func FilterInfo(prio, proto uint16) uint32 {
	var p [2]byte
	binary.BigEndian.PutUint16(p[:], proto)
	return uint32(prio)<<16 | uint32(binary.NativeEndian.Uint16(p[:]))
}

// InfoPrioProto splits a filter's tcm_info into priority and protocol
// (host order).
func InfoPrioProto(info uint32) (prio, proto uint16) {
	var p [2]byte
	binary.NativeEndian.PutUint16(p[:], uint16(info))
	return uint16(info >> 16), binary.BigEndian.Uint16(p[:])
}
