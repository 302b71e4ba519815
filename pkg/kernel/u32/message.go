package u32

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
)

// rtnetlink message types and attributes used here (linux/rtnetlink.h,
// linux/pkt_cls.h).
const (
	rtmNewTFilter = 44
	rtmDelTFilter = 45
	rtmGetTFilter = 46

	tcaKind    = 1
	tcaOptions = 2

	tcaU32ClassID = 1
	tcaU32Hash    = 2
	tcaU32Link    = 3
	tcaU32Divisor = 4
	tcaU32Sel     = 5
	tcaU32Flags   = 11

	tcmsgLen = 20
)

// userFlags are the TCA_U32_FLAGS bits a request sets (skip_hw, skip_sw);
// the kernel adds in_hw/not_in_hw on its own.
const userFlags uint32 = 1 | 2

// rootHTID is TC_U32_ROOT: "the root table of this priority" in TCA_U32_HASH.
const rootHTID uint32 = 0xFFF00000

// Handle parts: htid(12 bits):bucket(8 bits):node(12 bits).
func handleOf(htid uint16, bucket uint8, node uint16) uint32 {
	return uint32(htid)<<20 | uint32(bucket)<<12 | uint32(node)
}
func htidOf(h uint32) uint16   { return uint16(h >> 20) }
func bucketOf(h uint32) uint8  { return uint8(h >> 12) }
func nodeIDOf(h uint32) uint16 { return uint16(h & 0xfff) }

// tcmsg is struct tcmsg.
type tcmsg struct {
	ifindex uint32
	handle  uint32
	parent  uint32
	info    uint32 // prio<<16 | protocol in network order
}

// filterInfo is tcm_info for a filter: priority and protocol.
func filterInfo(prio, proto uint16) uint32 {
	var p [2]byte
	binary.BigEndian.PutUint16(p[:], proto)
	return uint32(prio)<<16 | uint32(binary.NativeEndian.Uint16(p[:]))
}

// infoPrioProto splits tcm_info into priority and protocol (host order).
func infoPrioProto(info uint32) (prio, proto uint16) {
	var p [2]byte
	binary.NativeEndian.PutUint16(p[:], uint16(info))
	return uint16(info >> 16), binary.BigEndian.Uint16(p[:])
}

func (m tcmsg) marshal() []byte {
	b := make([]byte, tcmsgLen) // family AF_UNSPEC, padding zero
	ne := binary.NativeEndian
	ne.PutUint32(b[4:], m.ifindex)
	ne.PutUint32(b[8:], m.handle)
	ne.PutUint32(b[12:], m.parent)
	ne.PutUint32(b[16:], m.info)
	return b
}

func parseTcmsg(b []byte) (tcmsg, error) {
	if len(b) < tcmsgLen {
		return tcmsg{}, fmt.Errorf("tcmsg of %d bytes, want %d", len(b), tcmsgLen)
	}
	ne := binary.NativeEndian
	return tcmsg{ifindex: ne.Uint32(b[4:]), handle: ne.Uint32(b[8:]), parent: ne.Uint32(b[12:]), info: ne.Uint32(b[16:])}, nil
}

// u32Opts are the TCA_OPTIONS of a u32 filter; zero fields are left out.
type u32Opts struct {
	classID uint32
	hash    uint32
	link    uint32
	divisor uint32
	sel     *selector
	flags   uint32
}

// filterRequest builds an RTM_*TFILTER request for a u32 object.
func filterRequest(typ netlink.HeaderType, flags netlink.HeaderFlags, m tcmsg, o *u32Opts) (netlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(tcaKind, "u32")
	if o != nil {
		ae.Nested(tcaOptions, func(nae *netlink.AttributeEncoder) error {
			if o.classID != 0 {
				nae.Uint32(tcaU32ClassID, o.classID)
			}
			if o.hash != 0 {
				nae.Uint32(tcaU32Hash, o.hash)
			}
			if o.link != 0 {
				nae.Uint32(tcaU32Link, o.link)
			}
			if o.divisor != 0 {
				nae.Uint32(tcaU32Divisor, o.divisor)
			}
			if o.sel != nil {
				nae.Bytes(tcaU32Sel, o.sel.marshal())
			}
			if o.flags != 0 {
				nae.Uint32(tcaU32Flags, o.flags)
			}
			return nil
		})
	}
	attrs, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, err
	}
	return netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | flags},
		Data:   append(m.marshal(), attrs...),
	}, nil
}

// object is one u32 filter object from a dump: a hash table (isTable) or a
// key node.
type object struct {
	prio, proto uint16
	handle      uint32
	kind        string
	isTable     bool
	divisor     uint32
	hash        uint32
	link        uint32
	classID     uint32
	flags       uint32
	sel         selector
	hasSel      bool
	selErr      error
}

// parseObject decodes an RTM_NEWTFILTER message from a dump.
func parseObject(data []byte) (tcmsg, object, error) {
	m, err := parseTcmsg(data)
	if err != nil {
		return m, object{}, err
	}
	var o object
	o.prio, o.proto = infoPrioProto(m.info)
	o.handle = m.handle
	ad, err := netlink.NewAttributeDecoder(data[tcmsgLen:])
	if err != nil {
		return m, o, err
	}
	for ad.Next() {
		switch ad.Type() {
		case tcaKind:
			if b := ad.Bytes(); string(bytes.TrimRight(b, "\x00")) == "u32" {
				o.kind = "u32" // no string per node
			} else {
				o.kind = string(bytes.TrimRight(b, "\x00"))
			}
		case tcaOptions:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					switch nad.Type() {
					case tcaU32ClassID:
						o.classID = nad.Uint32()
					case tcaU32Hash:
						o.hash = nad.Uint32()
					case tcaU32Link:
						o.link = nad.Uint32()
					case tcaU32Divisor:
						o.divisor = nad.Uint32()
						o.isTable = true
					case tcaU32Sel:
						o.sel, o.selErr = parseSelector(nad.Bytes())
						o.hasSel = true
					case tcaU32Flags:
						o.flags = nad.Uint32()
					}
				}
				return nil
			})
		}
	}
	return m, o, ad.Err()
}
