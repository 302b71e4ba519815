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
	// decodeErr: the options of a node in shaperd's priorities did not
	// decode (the node is foreign).
	decodeErr error
}

// parseObject decodes an RTM_NEWTFILTER message from a dump. Only u32
// objects in shaperd's priorities (trees) have their options decoded:
// filters of other kinds (bpf, matchall, flower, ...) and u32 filters of
// other tools in other priorities are returned with their kind, priority
// and handle alone, before anything in their options is looked at, since
// their attributes mean other things (cls_bpf's TCA_BPF_OPS_LEN, a u16, has
// the number of TCA_U32_LINK). Options of one of shaperd's nodes that do
// not decode set decodeErr (the node is then foreign, and Ensure deletes
// it); only a message whose header or top-level attributes are malformed
// is an error.
func parseObject(data []byte) (tcmsg, object, error) {
	m, err := parseTcmsg(data)
	if err != nil {
		return m, object{}, err
	}
	var o object
	o.prio, o.proto = infoPrioProto(m.info)
	o.handle = m.handle
	var options []byte
	err = eachAttr(data[tcmsgLen:], func(typ uint16, p []byte) {
		switch typ {
		case tcaKind:
			if k := bytes.TrimRight(p, "\x00"); string(k) == "u32" {
				o.kind = "u32" // no string per node
			} else {
				o.kind = string(k)
			}
		case tcaOptions:
			options = p
		}
	})
	if err != nil {
		return m, o, err
	}
	if o.kind != "u32" || treeOfPrio(o.prio, o.proto) < 0 || options == nil {
		return m, o, nil
	}
	// Attributes are walked in place (no decoder and slice per message:
	// a dump with 10,000 users has tens of thousands of them).
	u32v := func(p []byte) uint32 {
		if len(p) != 4 {
			if o.decodeErr == nil {
				o.decodeErr = fmt.Errorf("u32 attribute of %d bytes, want 4", len(p))
			}
			return 0
		}
		return binary.NativeEndian.Uint32(p)
	}
	if e := eachAttr(options, func(typ uint16, p []byte) {
		switch typ {
		case tcaU32ClassID:
			o.classID = u32v(p)
		case tcaU32Hash:
			o.hash = u32v(p)
		case tcaU32Link:
			o.link = u32v(p)
		case tcaU32Divisor:
			o.divisor = u32v(p)
			o.isTable = true
		case tcaU32Sel:
			o.sel, o.selErr = parseSelector(p)
			o.hasSel = true
		case tcaU32Flags:
			o.flags = u32v(p)
		}
	}); e != nil && o.decodeErr == nil {
		o.decodeErr = e
	}
	return m, o, nil
}

// eachAttr calls fn for every netlink attribute in b (type without the
// nested/byte-order flag bits); a malformed attribute is an error.
func eachAttr(b []byte, fn func(typ uint16, p []byte)) error {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			return fmt.Errorf("malformed netlink attribute (length %d of %d bytes)", l, len(b))
		}
		fn(binary.NativeEndian.Uint16(b[2:])&0x3fff, b[4:l])
		if n := (l + 3) &^ 3; n < len(b) {
			b = b[n:]
		} else {
			return nil
		}
	}
	return nil
}
