package u32

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
)

// Handle parts: htid(12 bits):bucket(8 bits):node(12 bits).
func handleOf(htid uint16, bucket uint8, node uint16) uint32 {
	return uint32(htid)<<20 | uint32(bucket)<<12 | uint32(node)
}
func htidOf(h uint32) uint16   { return uint16(h >> 20) }
func bucketOf(h uint32) uint8  { return uint8(h >> 12) }
func nodeIDOf(h uint32) uint16 { return uint16(h & 0xfff) }

// u32Opts are the TCA_OPTIONS of a u32 filter; zero fields are left out.
type u32Opts struct {
	classID uint32
	hash    uint32
	link    uint32
	divisor uint32
	sel     *tcwire.U32Sel
	flags   uint32
}

// filterRequest builds an RTM_*TFILTER request for a u32 object.
func filterRequest(typ netlink.HeaderType, flags netlink.HeaderFlags, m tcwire.Tcmsg, o *u32Opts) netlink.Message {
	a := tcwire.Attrs{B: m.AppendTo(make([]byte, 0, 128))}
	a.String(tcwire.TCAKind, "u32")
	if o != nil {
		a.Nest(tcwire.TCAOptions, func() {
			for _, v := range [...]struct {
				typ uint16
				v   uint32
			}{{tcwire.TCAU32ClassID, o.classID}, {tcwire.TCAU32Hash, o.hash}, {tcwire.TCAU32Link, o.link}, {tcwire.TCAU32Divisor, o.divisor}} {
				if v.v != 0 {
					a.U32(v.typ, v.v)
				}
			}
			if o.sel != nil {
				a.Bytes(tcwire.TCAU32Sel, o.sel.Marshal())
			}
			if o.flags != 0 {
				a.U32(tcwire.TCAU32Flags, o.flags)
			}
		})
	}
	return netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | flags},
		Data:   a.B,
	}
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
	sel         tcwire.U32Sel
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
func parseObject(data []byte) (tcwire.Tcmsg, object, error) {
	m, attrs, err := tcwire.ParseTcmsg(data)
	if err != nil {
		return m, object{}, err
	}
	var o object
	o.prio, o.proto = tcwire.InfoPrioProto(m.Info)
	o.handle = m.Handle
	var options []byte
	err = tcwire.EachAttr(attrs, func(typ uint16, p []byte) {
		switch typ {
		case tcwire.TCAKind:
			o.kind = tcwire.Kind(p)
		case tcwire.TCAOptions:
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
	if e := tcwire.EachAttr(options, func(typ uint16, p []byte) {
		switch typ {
		case tcwire.TCAU32ClassID:
			o.classID = u32v(p)
		case tcwire.TCAU32Hash:
			o.hash = u32v(p)
		case tcwire.TCAU32Link:
			o.link = u32v(p)
		case tcwire.TCAU32Divisor:
			o.divisor = u32v(p)
			o.isTable = true
		case tcwire.TCAU32Sel:
			o.sel, o.selErr = tcwire.ParseU32Sel(p)
			o.hasSel = true
		case tcwire.TCAU32Flags:
			o.flags = u32v(p)
		}
	}); e != nil && o.decodeErr == nil {
		o.decodeErr = e
	}
	return m, o, nil
}
