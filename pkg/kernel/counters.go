package kernel

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// Counters reads what a stats refresh needs of device, and no more: its
// root qdisc (kind, handle, counters) and, under an HTB root, its classes
// with their counters (leaf qdiscs are not read: Leaf is nil). It skips
// what Dump reads besides (the qdiscs of every device, the u32 filters,
// the redirect), which is most of a dump's cost with many users. A missing
// device wraps ErrNoDevice; a root that is not shaperd's gives a tree
// without Root.
func (k *Kernel) Counters(device string) (model.Tree, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := model.Tree{Device: device}
	ifi, err := k.ifindex(device)
	if err != nil {
		return t, fmt.Errorf("counters: %w", err)
	}
	root, err := k.getRoot(ifi)
	if err != nil {
		return t, fmt.Errorf("counters of %s: %w", device, err)
	}
	if root == nil || !isShaperRoot(*root) {
		return t, nil
	}
	t.Root = &model.Qdisc{Kind: model.ShaperKind(root.kind), Handle: model.Handle(root.msg.Handle), Stats: root.stats}
	switch t.Root.Kind {
	case model.ShaperHTB:
		t.Classes, err = k.dumpClasses(ifi, device, nil)
	case model.ShaperMQ:
		// Every queue tree's classes, without dumping the queue qdiscs
		// themselves.
		t.Classes, err = k.dumpClassesOf(ifi, device, nil, 0, func(m uint16) bool { return model.QueueOf(model.MakeHandle(m, 0)) >= 0 })
	default:
		return t, nil
	}
	if err != nil {
		return t, err
	}
	for i := range t.Classes {
		t.Classes[i].Leaf = nil // not read (no leaves map)
	}
	t.Sort()
	return t, nil
}

// getRoot returns the device's root qdisc, or nil when it has none. One
// get of the root qdisc (tcm_parent TC_H_ROOT), not a dump of every qdisc
// of the device: with a leaf qdisc under each of 10,000 classes a dump
// would read them all. The kernel answers a qdisc get through its
// notification path: NLM_F_ECHO makes it unicast the answer to the asker
// (the TC group also sees it, with this socket's port id, so WatchTC
// leaves it out).
func (k *Kernel) getRoot(ifi uint32) (*object, error) {
	k.req.B = tcwire.Tcmsg{Ifindex: ifi, Parent: uint32(model.HandleRoot)}.AppendTo(k.req.B[:0])
	msgs, err := k.execute(tcwire.RTMGetQdisc, netlink.Echo, k.req.B)
	if err != nil {
		return nil, fmt.Errorf("root qdisc: %w", err)
	}
	var root *object
	for _, m := range msgs {
		if m.Header.Type != tcwire.RTMNewQdisc {
			continue
		}
		o, err := parseObject(m.Data)
		if err != nil {
			return nil, fmt.Errorf("root qdisc: %w", err)
		}
		if o.msg.Ifindex == ifi && o.msg.Parent == uint32(model.HandleRoot) {
			root = &o
		}
	}
	return root, nil
}

// QueueCounters returns the per-queue HTB qdiscs under shaperd's mq root of
// device, by queue, with their counters (Stats.Bytes: what each queue has
// sent): one dump of the device's qdiscs, which under mq are few (leaf
// qdiscs are not used there). A device whose root is not shaperd's mq
// gives none.
func (k *Kernel) QueueCounters(device string) ([]model.Qdisc, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ifi, err := k.ifindex(device)
	if err != nil {
		return nil, fmt.Errorf("queue counters: %w", err)
	}
	qs, err := k.dump(tcwire.RTMGetQdisc, tcwire.Tcmsg{Ifindex: ifi}, nil)
	if err != nil {
		return nil, fmt.Errorf("queue counters of %s: %w", device, err)
	}
	root := false
	for _, o := range qs {
		if o.msg.Ifindex == ifi && o.msg.Parent == uint32(model.HandleRoot) && isMQRoot(o) {
			root = true
		}
	}
	if !root {
		return nil, nil
	}
	out, err := queueQdiscs(qs, ifi)
	if err != nil {
		return nil, fmt.Errorf("queue counters of %s: %w", device, err)
	}
	return out, nil
}

// ClassCounters returns the HTB classes handles of device with their
// counters, in the order asked, one get per class (not a dump: under a tree
// of many users the policy loop reads a few aggregate classes every tick,
// e.g. each tier's class in each queue's tree). A class the kernel does not
// have is left out; leaf qdiscs are not read (Leaf is nil).
func (k *Kernel) ClassCounters(device string, handles []model.Handle) ([]model.Class, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ifi, err := k.ifindex(device)
	if err != nil {
		return nil, fmt.Errorf("class counters: %w", err)
	}
	out := make([]model.Class, 0, len(handles))
	for _, h := range handles {
		k.req.B = tcwire.Tcmsg{Ifindex: ifi, Handle: uint32(h)}.AppendTo(k.req.B[:0])
		msgs, err := k.execute(tcwire.RTMGetTClass, netlink.Echo, k.req.B)
		if isErrno(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("class counters of %s: class %s: %w", device, h, err)
		}
		for _, m := range msgs {
			if m.Header.Type != tcwire.RTMNewTClass {
				continue
			}
			o, err := parseObject(m.Data)
			if err != nil {
				return nil, fmt.Errorf("class counters of %s: class %s: %w", device, h, err)
			}
			if o.msg.Ifindex != ifi || o.msg.Handle != uint32(h) || o.kind != "htb" {
				continue
			}
			c, err := decodeHTBClass(o)
			if err != nil {
				return nil, fmt.Errorf("class counters of %s: %w", device, err)
			}
			c.Leaf = nil
			out = append(out, c)
		}
	}
	return out, nil
}

// TxQueues returns the number of transmit queues device has (what
// queues = "auto" uses).
func (k *Kernel) TxQueues(device string) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l, err := k.linkByName(device)
	if err != nil {
		return 0, err
	}
	return l.Attrs().NumTxQueues, nil
}

// XPSQueues returns the transmit queues of device that have an XPS CPU
// map (/sys/class/net/DEV/queues/tx-N/xps_cpus not all zero): XPS picks
// the queue before the steering program's choice is looked at, so users on
// such a device would be shaped in the wrong tree. The sysfs of the
// calling process's namespace is read (the daemon runs in the router's).
func XPSQueues(device string, queues int) ([]int, error) {
	var out []int
	for q := 0; q < queues; q++ {
		b, err := os.ReadFile(fmt.Sprintf("/sys/class/net/%s/queues/tx-%d/xps_cpus", device, q))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // a kernel without XPS, or fewer queues: nothing to override
			}
			return nil, fmt.Errorf("xps of %s tx-%d: %w", device, q, err)
		}
		if strings.Trim(strings.TrimSpace(string(b)), "0,") != "" {
			out = append(out, q)
		}
	}
	return out, nil
}
