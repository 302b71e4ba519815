package bpfcls

import (
	"fmt"
	"slices"
	"time"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
)

// tcState is the picture of the filters under the qdisc.
type tcState struct {
	// attached is the program id of shaperd's filter when it is exactly
	// right (the only object in Prio: cls_bpf, protocol all, handle
	// FilterHandle, name ProgName, classic mode); 0 otherwise.
	attached uint32
	// inPrio counts the objects in Prio; replaced lists the Replaces
	// priorities present (prio, proto).
	inPrio    int
	bpfInPrio bool
	replaced  [][2]uint16
	// foreign describes other tools' filters, one entry per kind,
	// priority and protocol (at most maxForeign), with foreignN objects
	// each.
	foreign  []string
	foreignN []int
	otherIdx map[otherKey]int
}

type otherKey struct {
	kind        string
	prio, proto uint16
}

// maxForeign bounds Foreign's list.
const maxForeign = 20

// noteOther records a filter object of another tool for Foreign, in the
// u32 classifier's words.
func (st *tcState) noteOther(o tcObject) {
	if st.otherIdx == nil {
		st.otherIdx = map[otherKey]int{}
	}
	k := otherKey{o.kind, o.prio, o.proto}
	i, ok := st.otherIdx[k]
	if !ok {
		if len(st.foreign) >= maxForeign {
			return
		}
		i = len(st.foreign)
		st.otherIdx[k] = i
		st.foreign = append(st.foreign, "")
		st.foreignN = append(st.foreignN, 0)
	}
	st.foreignN[i]++
	st.foreign[i] = fmt.Sprintf("%s filter pref %d protocol %#04x (%d objects)", o.kind, o.prio, o.proto, st.foreignN[i])
}

// dumpTC takes the picture of the qdisc's filters.
func (c *Classifier) dumpTC() error {
	c.st = nil
	m := tcwire.Tcmsg{Ifindex: c.ifindex, Parent: uint32(c.parent)}
	_ = c.conn.SetDeadline(time.Now().Add(RequestTimeout))
	defer func() { _ = c.conn.SetDeadline(time.Time{}) }()
	msgs, err := c.conn.Execute(netlink.Message{
		Header: netlink.Header{Type: tcwire.RTMGetTFilter, Flags: netlink.Request | netlink.Dump},
		Data:   m.AppendTo(nil),
	})
	if err != nil {
		return err
	}
	st := &tcState{}
	var right uint32
	for _, msg := range msgs {
		o, err := parseFilter(msg.Data)
		if err != nil {
			return fmt.Errorf("decode filter message: %w", err)
		}
		if o.msg.Ifindex != c.ifindex || o.msg.Parent != uint32(c.parent) {
			continue
		}
		switch {
		case o.prio == Prio:
			// The kernel dumps one message for the priority itself (no
			// handle, no options) and one per filter in it.
			if o.msg.Handle == 0 && o.kind == "bpf" {
				continue
			}
			st.inPrio++
			st.bpfInPrio = st.bpfInPrio || o.kind == "bpf"
			if o.kind == "bpf" && o.proto == tcwire.EthPAll && o.msg.Handle == FilterHandle && o.name == ProgName && o.flags&tcwire.TCABPFFlagActDirect == 0 {
				right = o.progID
			}
		case slices.Contains(c.opts.Replaces, o.prio):
			pp := [2]uint16{o.prio, o.proto}
			if !slices.Contains(st.replaced, pp) {
				st.replaced = append(st.replaced, pp)
			}
		default:
			if o.msg.Handle == 0 {
				continue // a priority's own message
			}
			st.noteOther(o)
		}
	}
	if st.inPrio == 1 {
		st.attached = right
	}
	c.st = st
	return nil
}
