package u32

import (
	"encoding/binary"
	"slices"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
)

// fakeKernel is an in-memory cls_u32 for unit and fuzz tests: it keeps
// u32 objects (priority headers, hash tables, key nodes) and answers
// RTM_NEWTFILTER/DELTFILTER/GETTFILTER like the kernel does for the
// requests this package sends, closely enough to check what Ensure, Add
// and Delete leave behind. It does not model hidden tables of deleted
// priorities (see ensurePrios): deleting a priority deletes its tables.
type fakeKernel struct {
	objs []object // in dump order
	// reqs logs every write: "NEW 800:0:1", "DEL 800:0:1", "NEWPRIO 100".
	reqs []string
	// extra are raw messages a dump returns after the objects (foreign
	// filters of other kinds, as the kernel encodes them).
	extra [][]byte
	// nextRoot is the next automatic root table id.
	nextRoot uint16
}

func newFakeKernel(objs []object) *fakeKernel {
	f := &fakeKernel{objs: slices.Clone(objs), nextRoot: 0x800}
	for _, o := range objs {
		if htidOf(o.handle) >= f.nextRoot && htidOf(o.handle) < 0x900 {
			f.nextRoot = htidOf(o.handle) + 1
		}
	}
	return f
}

// conn is a netlink.Conn talking to f.
func (f *fakeKernel) conn() *netlink.Conn { return nltest.Dial(f.serve) }

func (f *fakeKernel) find(prio, proto uint16, handle uint32) int {
	return slices.IndexFunc(f.objs, func(o object) bool { return o.prio == prio && o.proto == proto && o.handle == handle })
}

func (f *fakeKernel) hasPrio(prio, proto uint16) bool { return f.find(prio, proto, 0) >= 0 }

func (f *fakeKernel) hasTable(prio, proto uint16, htid uint16) bool {
	i := f.find(prio, proto, handleOf(htid, 0, 0))
	return i >= 0
}

func (f *fakeKernel) serve(reqs []netlink.Message) ([]netlink.Message, error) {
	if len(reqs) != 1 {
		return nil, unix.EINVAL
	}
	req := reqs[0]
	m, o, err := parseObject(req.Data)
	if err != nil {
		return nltest.Error(int(unix.EINVAL), reqs)
	}
	switch req.Header.Type {
	case tcwire.RTMGetTFilter:
		return f.dump(req, m)
	case tcwire.RTMNewTFilter:
		return nltest.Error(int(f.newObject(req.Header.Flags, o)), reqs)
	case tcwire.RTMDelTFilter:
		return nltest.Error(int(f.delObject(o)), reqs)
	}
	return nltest.Error(int(unix.EOPNOTSUPP), reqs)
}

func (f *fakeKernel) dump(req netlink.Message, m tcwire.Tcmsg) ([]netlink.Message, error) {
	var out []netlink.Message
	hdr := netlink.Header{Type: tcwire.RTMNewTFilter, Flags: netlink.Multi, Sequence: req.Header.Sequence, PID: req.Header.PID}
	for _, o := range f.objs {
		out = append(out, netlink.Message{Header: hdr, Data: encodeObject(m, o)})
	}
	for _, raw := range f.extra {
		out = append(out, netlink.Message{Header: hdr, Data: raw})
	}
	done := hdr
	done.Type = netlink.Done
	return append(out, netlink.Message{Header: done, Data: make([]byte, 4)}), nil
}

// encodeObject is the RTM_NEWTFILTER body the kernel dumps for o.
func encodeObject(m tcwire.Tcmsg, o object) []byte {
	var opts *u32Opts
	if o.handle != 0 {
		opts = &u32Opts{classID: o.classID, hash: o.hash, link: o.link, flags: o.flags}
		if o.isTable {
			opts.divisor = o.divisor
		}
		if o.hasSel {
			s := o.sel
			opts.sel = &s
		}
	}
	msg := filterRequest(tcwire.RTMNewTFilter, 0, tcwire.Tcmsg{Ifindex: m.Ifindex, Handle: o.handle, Parent: m.Parent, Info: tcwire.FilterInfo(o.prio, o.proto)}, opts)
	return msg.Data
}

func (f *fakeKernel) newObject(flags netlink.HeaderFlags, o object) unix.Errno {
	if !f.hasPrio(o.prio, o.proto) {
		if flags&netlink.Create == 0 {
			return unix.ENOENT
		}
		f.objs = append(f.objs, object{prio: o.prio, proto: o.proto, kind: "u32"},
			object{prio: o.prio, proto: o.proto, kind: "u32", handle: handleOf(f.nextRoot, 0, 0), isTable: true, divisor: 1})
		f.nextRoot++
		f.reqs = append(f.reqs, "NEWPRIO "+hexs(uint32(o.prio)))
		if o.handle == 0 {
			return 0
		}
	}
	if o.handle == 0 {
		return unix.EEXIST
	}
	htid := htidOf(o.handle)
	if nodeIDOf(o.handle) != 0 && !f.hasTable(o.prio, o.proto, htid) {
		return unix.EINVAL // "Specified hash table not found"
	}
	if o.link != 0 && !f.hasTable(o.prio, o.proto, htidOf(o.link)) {
		return unix.EINVAL // "Link hash table not found"
	}
	i := f.find(o.prio, o.proto, o.handle)
	if i >= 0 {
		if flags&netlink.Excl != 0 {
			return unix.EEXIST
		}
		if o.classID != 0 {
			f.objs[i].classID = o.classID
		}
		if o.link != 0 {
			f.objs[i].link = o.link
		}
		f.reqs = append(f.reqs, "CHANGE "+hexs(o.handle))
		return 0
	}
	if flags&netlink.Create == 0 {
		return unix.ENOENT
	}
	if nodeIDOf(o.handle) == 0 {
		o.isTable = true
	} else {
		o.flags |= 8 // not_in_hw, as the kernel reports
		if o.hash == tcwire.U32RootHTID {
			o.hash = 0
		}
	}
	f.objs = append(f.objs, o)
	f.reqs = append(f.reqs, "NEW "+hexs(o.handle))
	return 0
}

func (f *fakeKernel) delObject(o object) unix.Errno {
	if o.handle == 0 {
		if !f.hasPrio(o.prio, o.proto) {
			return unix.ENOENT
		}
		f.objs = slices.DeleteFunc(f.objs, func(x object) bool { return x.prio == o.prio && x.proto == o.proto })
		f.reqs = append(f.reqs, "DELPRIO "+hexs(uint32(o.prio)))
		return 0
	}
	f.reqs = append(f.reqs, "DEL "+hexs(o.handle))
	i := f.find(o.prio, o.proto, o.handle)
	if i < 0 {
		return unix.ENOENT
	}
	if nodeIDOf(o.handle) != 0 {
		f.objs = slices.Delete(f.objs, i, i+1)
		return 0
	}
	htid := htidOf(o.handle)
	f.objs = slices.DeleteFunc(f.objs, func(x object) bool {
		return x.prio == o.prio && x.proto == o.proto && htidOf(x.handle) == htid
	})
	return 0
}

func hexs(v uint32) string {
	const digits = "0123456789abcdef"
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v >>= 4 {
		b = append([]byte{digits[v&0xf]}, b...)
	}
	return string(b)
}

// rawFilter is an RTM_NEWTFILTER body for a filter of another kind, with
// opts as its raw TCA_OPTIONS payload.
func rawFilter(prio, proto uint16, handle uint32, kind string, opts []byte) []byte {
	b := tcwire.Tcmsg{Ifindex: 1, Handle: handle, Parent: 0x10000, Info: tcwire.FilterInfo(prio, proto)}.AppendTo(nil)
	attr := func(typ uint16, p []byte) {
		l := 4 + len(p)
		b = binary.NativeEndian.AppendUint16(b, uint16(l))
		b = binary.NativeEndian.AppendUint16(b, typ)
		b = append(b, p...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	attr(tcwire.TCAKind, append([]byte(kind), 0))
	attr(tcwire.TCAOptions|0x8000, opts)
	return b
}
