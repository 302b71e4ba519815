package bpfcls

import (
	"encoding/binary"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// Prio is the filter priority (tc "pref") of shaperd's cls_bpf filter;
// its handle is FilterHandle and its protocol ETH_P_ALL. It comes before
// the u32 classifier's priorities (100..103), which Ensure deletes when
// it finds them (a switch from classifier = "u32").
const (
	Prio         uint16 = 99
	FilterHandle uint32 = 1
)

// tcObject is one filter object from a dump under the classifier's qdisc.
type tcObject struct {
	msg         tcwire.Tcmsg
	prio, proto uint16
	kind        string
	// cls_bpf only
	progID  uint32
	name    string
	flags   uint32
	classID uint32
}

// parseFilter decodes an RTM_NEWTFILTER message of a dump. Options are
// decoded only for cls_bpf filters in Prio.
func parseFilter(data []byte) (tcObject, error) {
	m, attrs, err := tcwire.ParseTcmsg(data)
	if err != nil {
		return tcObject{}, err
	}
	o := tcObject{msg: m}
	o.prio, o.proto = tcwire.InfoPrioProto(m.Info)
	var options []byte
	if err := tcwire.EachAttr(attrs, func(typ uint16, p []byte) {
		switch typ {
		case tcwire.TCAKind:
			o.kind = tcwire.Kind(p)
		case tcwire.TCAOptions:
			options = p
		}
	}); err != nil {
		return o, err
	}
	if o.kind != "bpf" || o.prio != Prio || options == nil {
		return o, nil
	}
	u32v := func(p []byte) uint32 {
		if len(p) < 4 {
			return 0
		}
		return binary.NativeEndian.Uint32(p)
	}
	err = tcwire.EachAttr(options, func(typ uint16, p []byte) {
		switch typ {
		case tcwire.TCABPFID:
			o.progID = u32v(p)
		case tcwire.TCABPFName:
			o.name = tcwire.Kind(p)
		case tcwire.TCABPFFlags:
			o.flags = u32v(p)
		case tcwire.TCABPFClassID:
			o.classID = u32v(p)
		}
	})
	return o, err
}

// attachRequest is the RTM_NEWTFILTER request that creates or replaces
// shaperd's cls_bpf filter with program fd in classic mode.
func attachRequest(ifindex, parent uint32, fd int) netlink.Message {
	m := tcwire.Tcmsg{Ifindex: ifindex, Parent: parent, Handle: FilterHandle, Info: tcwire.FilterInfo(Prio, tcwire.EthPAll)}
	a := tcwire.Attrs{B: m.AppendTo(make([]byte, 0, 96))}
	a.String(tcwire.TCAKind, "bpf")
	a.Nest(tcwire.TCAOptions, func() {
		a.U32(tcwire.TCABPFFD, uint32(fd))
		a.String(tcwire.TCABPFName, ProgName)
		a.U32(tcwire.TCABPFFlags, 0) // classic mode: see the package documentation
	})
	return netlink.Message{
		Header: netlink.Header{Type: tcwire.RTMNewTFilter, Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Replace},
		Data:   a.B,
	}
}

// deleteRequest deletes the filters of priority prio and protocol proto
// (the whole priority) under the qdisc.
func deleteRequest(ifindex, parent uint32, prio, proto uint16) netlink.Message {
	m := tcwire.Tcmsg{Ifindex: ifindex, Parent: parent, Info: tcwire.FilterInfo(prio, proto)}
	a := tcwire.Attrs{B: m.AppendTo(nil)}
	return netlink.Message{
		Header: netlink.Header{Type: tcwire.RTMDelTFilter, Flags: netlink.Request | netlink.Acknowledge},
		Data:   a.B,
	}
}

// Attached reports whether the qdisc parent of device ifindex has a
// cls_bpf filter in shaperd's priority (Prio), i.e. whether the bpf
// classifier is in use there.
func Attached(conn *netlink.Conn, ifindex uint32, parent model.Handle) (bool, error) {
	c := NewConn(conn, ifindex, parent, Options{})
	if c.connErr != nil {
		return false, c.connErr
	}
	if err := c.dumpTC(); err != nil {
		return false, c.errorf(err, "dump filters")
	}
	return c.st.inPrio > 0 && c.st.bpfInPrio, nil
}
