package kernel

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// rootQdisc returns the device's root qdisc, or nil when it has none that
// the dump shows.
func (k *Kernel) rootQdisc(ifi uint32) (*object, error) {
	qs, err := k.dump(tcwire.RTMGetQdisc, tcwire.Tcmsg{Ifindex: ifi}, nil)
	if err != nil {
		return nil, err
	}
	for i := range qs {
		if qs[i].msg.Ifindex == ifi && qs[i].msg.Parent == uint32(model.HandleRoot) {
			return &qs[i], nil
		}
	}
	return nil, nil
}

// IsForeignRoot reports whether a root qdisc of kind with handle was made
// by another tool: it is neither shaperd's (htb or tbf with handle 1:) nor
// one of the kernel's defaults, which have handle 0: (pfifo_fast,
// noqueue, mq, or whatever net.core.default_qdisc names). A qdisc added
// with tc always has a handle (tc picks 8001: and up when none is given).
// A pfifo_fast or noqueue root is never foreign, whatever its handle: it
// holds nothing anyone would lose.
func IsForeignRoot(kind string, handle model.Handle) bool {
	if handle == 0 || kind == "pfifo_fast" || kind == "noqueue" {
		return false
	}
	if handle == model.MQHandle && kind == string(model.ShaperMQ) {
		return false
	}
	return !(handle == model.RootQdisc && (kind == string(model.ShaperHTB) || kind == string(model.ShaperTBF)))
}

// isShaperRoot reports whether a root qdisc is shaperd's: htb or tbf with
// handle 1:, or mq with handle 7fff: (per-queue trees).
func isShaperRoot(o object) bool {
	return o.msg.Handle == uint32(model.RootQdisc) && (o.kind == string(model.ShaperHTB) || o.kind == string(model.ShaperTBF)) ||
		isMQRoot(o)
}

// isMQRoot reports whether a root qdisc is shaperd's mq.
func isMQRoot(o object) bool {
	return o.msg.Handle == uint32(model.MQHandle) && o.kind == string(model.ShaperMQ)
}

// queueQdiscs returns the per-queue HTB qdiscs under the mq root of device
// ifi in qs, by queue: an htb with handle model.QueueHandle(q) under mq's
// class q+1.
func queueQdiscs(qs []object, ifi uint32) ([]model.Qdisc, error) {
	var out []model.Qdisc
	for _, o := range qs {
		h, p := model.Handle(o.msg.Handle), model.Handle(o.msg.Parent)
		if o.msg.Ifindex != ifi || o.kind != string(model.ShaperHTB) || p.Major() != model.MQHandle.Major() ||
			p.Minor() == 0 || int(p.Minor()) > model.MaxQueues || h != model.QueueHandle(int(p.Minor())-1) {
			continue
		}
		q := model.Qdisc{Kind: model.ShaperHTB, Handle: h, Parent: p, Stats: o.stats, SizeOverhead: o.stabOverhead}
		var err error
		if q.DefaultMinor, err = decodeHTBQdisc(o); err != nil {
			return nil, fmt.Errorf("queue qdisc %s: %w", h, err)
		}
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b model.Qdisc) int { return cmp.Compare(a.Handle, b.Handle) })
	return out, nil
}

// Dump returns the actual tree on device with counters.
//
// Root is nil when the device's root qdisc is not shaperd's (htb or tbf
// with handle 1:); Classes and Filters are then empty. For an HTB root:
// every class with Rate/Ceil (64-bit when the kernel sends them), Buffer and
// CBuffer ticks, Quantum, Prio, Burst/CBurst reconstructed from the ticks,
// Stats (bytes, packets, drops, overlimits, backlog, qlen, tokens, ctokens)
// and Leaf: nil when the class has the kernel's default pfifo (handle 0),
// else the visible qdisc under it (kind; limit for pfifo/bfifo). Labels are
// left empty (the daemon knows which minor serves whom). Filters come from
// the device's classifier, u32 or bpf (Damaged where its objects are
// broken).
//
// When device is an IFB device, Redirect is set if some interface's ingress
// qdisc holds a match-all u32 filter with a mirred egress redirect to it,
// and the IFB is up: a redirect to a down IFB drops every arriving packet,
// so it is reported missing and Apply of the redirect sets the IFB up again.
//
// A missing device gives Tree{Device: device} and an error wrapping
// ErrNoDevice.
func (k *Kernel) Dump(device string) (model.Tree, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := model.Tree{Device: device}
	link, err := k.linkByName(device)
	if err != nil {
		return t, fmt.Errorf("dump: %w", err)
	}
	ifi := uint32(link.Attrs().Index)
	// The kernel answers with the qdiscs of all devices: this device's
	// are kept, and the ingress qdiscs of the others, which are needed to
	// find a redirect to an IFB (not the other devices' leaf qdiscs: tens
	// of thousands with per-user trees in both directions).
	var qs []object
	err = k.dumpEach(tcwire.RTMGetQdisc, tcwire.Tcmsg{}, nil, func(o object) error {
		if o.msg.Ifindex == ifi || o.kind == "ingress" || o.kind == "clsact" {
			qs = append(qs, o)
		}
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("dump qdiscs of %s: %w", device, err)
	}
	leaves := map[uint32]object{} // by handle, on this device
	var root *object
	for i := range qs {
		q := qs[i]
		if q.msg.Ifindex != ifi {
			continue
		}
		switch {
		case q.msg.Parent == uint32(model.HandleRoot):
			root = &qs[i]
		case q.msg.Handle != 0:
			leaves[q.msg.Handle] = q
		}
	}
	if link.Type() == "ifb" && link.Attrs().Flags&unix.IFF_UP != 0 {
		if t.Redirect, err = k.findRedirect(qs, ifi, device); err != nil {
			return t, err
		}
	}
	if root != nil && IsForeignRoot(root.kind, model.Handle(root.msg.Handle)) {
		t.Foreign = append(t.Foreign, fmt.Sprintf("root qdisc %s %s", root.kind, model.Handle(root.msg.Handle)))
	}
	if root == nil || !isShaperRoot(*root) {
		return t, nil
	}
	rq := &model.Qdisc{Kind: model.ShaperKind(root.kind), Handle: model.Handle(root.msg.Handle), Stats: root.stats,
		SizeOverhead: root.stabOverhead}
	switch rq.Kind {
	case model.ShaperMQ:
		t.Root = rq
		if err := k.dumpQueues(&t, ifi, qs, leaves); err != nil {
			return t, err
		}
		t.Sort()
		return t, nil
	case model.ShaperHTB:
		if rq.DefaultMinor, err = decodeHTBQdisc(*root); err != nil {
			return t, fmt.Errorf("dump %s: root qdisc: %w", device, err)
		}
	case model.ShaperTBF:
		if rq.TBF, err = decodeTBF(*root); err != nil {
			return t, fmt.Errorf("dump %s: root qdisc: %w", device, err)
		}
		t.Root = rq
		return t, nil
	}
	t.Root = rq
	if t.Classes, err = k.dumpClasses(ifi, device, leaves); err != nil {
		return t, err
	}
	if k.clsKind[device] == "" {
		// Not chosen here: look again at what is installed (another
		// process may have switched classifiers since the last Dump).
		k.forgetClassifier(ifi)
	}
	cls := k.classifierFor(ifi, device)
	t.Filters, err = cls.Dump()
	if err == nil {
		t.Foreign = append(t.Foreign, cls.Foreign()...)
	}
	// The classifier's picture of the kernel (every u32 node, ~1 KB per
	// user) is only needed to write filters, which few applies do: forget
	// it rather than keep it between reconciles; a write dumps it again.
	_ = cls.Close()
	if err != nil {
		return t, fmt.Errorf("dump filters of %s: %w", device, err)
	}
	t.Sort()
	return t, nil
}

// dumpQueues fills t's Queues, Classes and Filters from the per-queue trees
// under an mq root, and checks the steering maps against the filters: a
// filter whose steering entry is missing or points elsewhere is Damaged (its
// re-creation rewrites the entry), entries without a filter are removed. A
// new process adopts the steering maps (steererFor: pinned, or those of the
// attached program) and checks them the same way; only when there is
// nothing to adopt does it fill new maps from the filters (syncSteering).
func (k *Kernel) dumpQueues(t *model.Tree, ifi uint32, qs []object, leaves map[uint32]object) error {
	var err error
	if t.Queues, err = queueQdiscs(qs, ifi); err != nil {
		return fmt.Errorf("dump %s: %w", t.Device, err)
	}
	majors := map[uint16]bool{}
	for _, q := range t.Queues {
		majors[q.Handle.Major()] = true
	}
	if t.Classes, err = k.dumpClassesOf(ifi, t.Device, leaves, 0, func(m uint16) bool { return majors[m] }); err != nil {
		return err
	}
	if k.clsKind[t.Device] == "" {
		// Not chosen here: look again at what is installed (another
		// process may have switched classifiers since the last Dump).
		k.forgetQueueClassifiers(ifi)
	}
	for _, q := range t.Queues {
		cls := k.classifierUnder(ifi, t.Device, q.Handle)
		fs, err := cls.Dump()
		if err == nil {
			t.Foreign = append(t.Foreign, cls.Foreign()...)
		}
		_ = cls.Close()
		if err != nil {
			return fmt.Errorf("dump filters of %s queue qdisc %s: %w", t.Device, q.Handle, err)
		}
		t.Filters = append(t.Filters, fs...)
	}
	if _, ok := k.steerers[ifi]; !ok && len(t.Filters) == 0 {
		return nil // nothing to steer: no program is loaded for it
	}
	s, created, err := k.steererFor(ifi, len(t.Filters) > 0 && t.Filters[0].Match == model.MatchSrc)
	if err != nil {
		return fmt.Errorf("dump steering of %s: %w", t.Device, err)
	}
	if created {
		// Nothing to adopt (no pins, no attached program of ours): fill
		// the new maps from the filters.
		if _, err := k.syncSteering(ifi, t.Device, t.Filters); err != nil {
			return err
		}
		return nil
	}
	have, err := s.List()
	if err != nil {
		return fmt.Errorf("dump steering of %s: %w", t.Device, err)
	}
	seen := make(map[netip.Prefix]bool, len(t.Filters))
	for i := range t.Filters {
		f := &t.Filters[i]
		seen[f.Prefix] = true
		if q, ok := have[f.Prefix]; !ok || int(q) != model.QueueOf(f.ClassID) {
			f.Damaged = true
		}
	}
	for p := range have {
		if !seen[p] {
			if err := s.Delete(p); err != nil {
				return fmt.Errorf("dump steering of %s: %w", t.Device, err)
			}
		}
	}
	return nil
}

// dumpClasses returns the HTB classes of qdisc 1: on the device.
func (k *Kernel) dumpClasses(ifi uint32, device string, leaves map[uint32]object) ([]model.Class, error) {
	return k.dumpClassesOf(ifi, device, leaves, model.RootQdisc, func(m uint16) bool { return m == model.RootQdisc.Major() })
}

// dumpClassesOf returns the HTB classes on the device whose handle's major
// passes keep, asking for the classes of qdisc parent (0: every qdisc).
func (k *Kernel) dumpClassesOf(ifi uint32, device string, leaves map[uint32]object, parent model.Handle, keep func(uint16) bool) ([]model.Class, error) {
	classes := make([]model.Class, 0, k.classHint[ifi]) // the last dump's count
	err := k.dumpEach(tcwire.RTMGetTClass, tcwire.Tcmsg{Ifindex: ifi, Parent: uint32(parent)}, nil, func(o object) error {
		if o.msg.Ifindex != ifi || o.kind != "htb" || !keep(model.Handle(o.msg.Handle).Major()) {
			return nil
		}
		c, err := decodeHTBClass(o)
		if err != nil {
			return fmt.Errorf("dump %s: %w", device, err)
		}
		if lh := o.msg.Info; lh != 0 { // tcm_info of a leaf class is its qdisc's handle
			if l, ok := leaves[lh]; ok {
				c.Leaf = decodeLeaf(l)
			} else {
				c.Leaf = &model.LeafQdisc{Kind: "unknown"}
			}
		}
		classes = append(classes, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dump classes of %s: %w", device, err)
	}
	if k.classHint == nil {
		k.classHint = map[uint32]int{}
	}
	k.classHint[ifi] = len(classes)
	return classes, nil
}

// findRedirect looks through the ingress and clsact qdiscs in qs for
// shaperd's redirect to the IFB with index ifb.
func (k *Kernel) findRedirect(qs []object, ifb uint32, name string) (*model.Redirect, error) {
	for _, q := range qs {
		if (q.kind != "ingress" && q.kind != "clsact") || q.msg.Parent != uint32(model.HandleIngress) || q.msg.Ifindex == ifb {
			continue
		}
		fs, err := k.dump(tcwire.RTMGetTFilter, tcwire.Tcmsg{Ifindex: q.msg.Ifindex, Parent: ingressHook}, nil)
		if err != nil {
			return nil, fmt.Errorf("dump ingress filters of ifindex %d: %w", q.msg.Ifindex, err)
		}
		for _, f := range fs {
			if prio, _ := tcwire.InfoPrioProto(f.msg.Info); prio != RedirectPref {
				continue
			}
			if to, ok := decodeRedirect(f); ok && to == ifb {
				l, err := k.link.LinkByIndex(int(q.msg.Ifindex))
				if err != nil {
					return nil, fmt.Errorf("redirect to %s: ifindex %d: %w", name, q.msg.Ifindex, err)
				}
				return &model.Redirect{Interface: l.Attrs().Name, IFB: name}, nil
			}
		}
	}
	return nil, nil
}
