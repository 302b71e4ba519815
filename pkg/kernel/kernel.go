package kernel

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	vnl "github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/kernel/steer"
)

// recvBufferSize is the userspace buffer for one received netlink
// datagram (see netlink.Config.MessageBufferSize).
const recvBufferSize = 64 << 10

// DefaultRequestTimeout is Options.RequestTimeout's default.
const DefaultRequestTimeout = 30 * time.Second

// Options configure Open.
type Options struct {
	// NetNS is the name of a network namespace (as `ip netns` knows it,
	// /run/netns/NAME); "" is the namespace of the calling process.
	NetNS string
	// RequestTimeout bounds each netlink exchange: one request and its
	// ack, one pipelined run of requests and their acks, or one whole
	// dump. A kernel that does not answer in time makes the call fail
	// with an error wrapping os.ErrDeadlineExceeded instead of hanging.
	// 0 is DefaultRequestTimeout.
	RequestTimeout time.Duration
	// BPFPinRoot is where the bpf classifier pins its maps and program
	// (bpfcls.DefaultPinRoot, /sys/fs/bpf/shaperd, when empty).
	BPFPinRoot string
	// Progress, when set, is called after each pipelined run of writes
	// that the kernel has answered, from the goroutine that called Apply:
	// a long first apply can tell the service manager it is alive.
	Progress func()
}

// Kernel is shaperd's connection to the kernel's traffic control in one
// network namespace: one rtnetlink socket for qdiscs, classes and filters
// and one vishvananda/netlink handle for links. Its methods are safe for
// concurrent use; requests are serialized.
type Kernel struct {
	mu   sync.Mutex
	ns   netns.NsHandle // -1 (netns.None) for the current namespace
	conn *netlink.Conn
	link *vnl.Handle
	req  tcwire.Attrs // reused request buffer (under mu)
	// filters holds the classifier of each device, by ifindex; clsKind
	// the kind chosen per device name (SetClassifier).
	filters    map[uint32]classifier
	clsKind    map[string]string
	bpfPinRoot string
	nsIno      uint64
	pinsPruned bool
	// queueFilters holds the classifiers (u32 or bpf, as for the root)
	// under the per-queue HTB qdiscs of devices with an mq root, by
	// ifindex and qdisc.
	queueFilters map[classifierKey]classifier
	// steerers holds the queue steering program and maps of each device
	// with per-queue trees under mq, by ifindex.
	steerers map[uint32]*steer.Steerer
	// classHint is the number of classes the last dump of a device (by
	// ifindex) returned, to size the next one.
	classHint map[uint32]int
	timeout   time.Duration
	progress  func()
	// takeover names the devices whose foreign root qdisc Apply may
	// replace (SetTakeover).
	takeover map[string]bool
	// leafKinds and leafErr cache LeafKinds's probe on a device of its
	// own, when no throwaway namespace could be made.
	leafKinds map[string]bool
	leafErr   error
}

// SetTakeover allows (or forbids, the default) Apply to replace a root
// qdisc on device that shaperd did not create: see IsForeignRoot.
func (k *Kernel) SetTakeover(device string, allow bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.takeover == nil {
		k.takeover = map[string]bool{}
	}
	k.takeover[device] = allow
}

// Open connects to the kernel in the namespace o names.
func Open(o Options) (*Kernel, error) {
	k := &Kernel{ns: netns.None(), filters: map[uint32]classifier{}, timeout: o.RequestTimeout, progress: o.Progress, bpfPinRoot: o.BPFPinRoot,
		queueFilters: map[classifierKey]classifier{}, steerers: map[uint32]*steer.Steerer{}}
	if k.timeout <= 0 {
		k.timeout = DefaultRequestTimeout
	}
	if o.NetNS != "" {
		ns, err := netns.GetFromName(o.NetNS)
		if err != nil {
			return nil, fmt.Errorf("open network namespace %s: %w", o.NetNS, err)
		}
		k.ns = ns
	}
	fail := func(err error) (*Kernel, error) {
		k.Close()
		return nil, err
	}
	// A fixed receive buffer spares the peek before every datagram (one
	// syscall instead of two per datagram of a dump); dump datagrams are at
	// most a few tens of kilobytes.
	conn, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: k.nsFD(), MessageBufferSize: recvBufferSize})
	if err != nil {
		return fail(fmt.Errorf("rtnetlink socket%s: %w", k.where(o.NetNS), err))
	}
	k.conn = conn
	// Errors then carry the kernel's extended-ack text; strict checking
	// makes dumps honour the ifindex/parent we ask for.
	if err := conn.SetOption(netlink.ExtendedAcknowledge, true); err != nil {
		return fail(fmt.Errorf("rtnetlink extended acks: %w", err))
	}
	_ = conn.SetOption(netlink.GetStrictCheck, true)
	_ = conn.SetReadBuffer(4 << 20)
	if k.link, err = vnl.NewHandleAt(k.ns); err != nil {
		return fail(fmt.Errorf("link netlink handle%s: %w", k.where(o.NetNS), err))
	}
	return k, nil
}

// nsFD is the namespace for mdlayher/netlink's Config.NetNS: 0 means the
// calling thread's namespace, any other value is an fd to enter. netns.None()
// is -1, which netlink would hand to setns(2) (EBADF), so the process's own
// namespace must be passed as 0.
func (k *Kernel) nsFD() int {
	if !k.ns.IsOpen() {
		return 0
	}
	return int(k.ns)
}

// deadline bounds the next exchange on the rtnetlink socket (see
// Options.RequestTimeout) and returns the function that clears the
// deadline again once the exchange is over (the u32 classifier shares the
// socket).
func (k *Kernel) deadline() func() {
	_ = k.conn.SetDeadline(time.Now().Add(k.timeout))
	return func() { _ = k.conn.SetDeadline(time.Time{}) }
}

func (k *Kernel) where(name string) string {
	if name == "" {
		return ""
	}
	return " in netns " + name
}

// Close releases the sockets and the namespace handle.
func (k *Kernel) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for ifi := range k.filters {
		k.forgetClassifier(ifi)
	}
	k.queueFilters = map[classifierKey]classifier{}
	for ifi, s := range k.steerers {
		errs = append(errs, s.Close()) // the attached program keeps steering
		delete(k.steerers, ifi)
	}
	if k.conn != nil {
		errs = append(errs, k.conn.Close())
		k.conn = nil
	}
	if k.link != nil {
		k.link.Close()
		k.link = nil
	}
	if k.ns.IsOpen() {
		errs = append(errs, k.ns.Close())
		k.ns = netns.None()
	}
	return errors.Join(errs...)
}

// linkByName returns the named link; a missing one is ErrNoDevice.
func (k *Kernel) linkByName(dev string) (vnl.Link, error) {
	l, err := k.link.LinkByName(dev)
	if err != nil {
		var nf vnl.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("device %s: %w", dev, ErrNoDevice)
		}
		return nil, fmt.Errorf("device %s: %w", dev, err)
	}
	return l, nil
}

// ifindex returns the index of the named link.
func (k *Kernel) ifindex(dev string) (uint32, error) {
	l, err := k.linkByName(dev)
	if err != nil {
		return 0, err
	}
	return uint32(l.Attrs().Index), nil
}

// execute sends one request and waits for its ack (or the dump). The
// request body is the tcmsg followed by the attributes in a.
func (k *Kernel) execute(typ netlink.HeaderType, flags netlink.HeaderFlags, body []byte) ([]netlink.Message, error) {
	defer k.deadline()()
	return k.conn.Execute(netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | flags},
		Data:   body,
	})
}

// write sends a create/change/delete request built by fn (after the tcmsg m)
// and waits for the kernel's ack.
func (k *Kernel) write(typ netlink.HeaderType, flags netlink.HeaderFlags, m tcwire.Tcmsg, fn func(a *tcwire.Attrs) error) error {
	k.req.B = m.AppendTo(k.req.B[:0])
	if fn != nil {
		if err := fn(&k.req); err != nil {
			return err
		}
	}
	_, err := k.execute(typ, flags|netlink.Acknowledge, k.req.B)
	return err
}

// dump runs a dump request (tcmsg m plus optional attributes) and decodes
// every answer.
func (k *Kernel) dump(typ netlink.HeaderType, m tcwire.Tcmsg, fn func(a *tcwire.Attrs)) ([]object, error) {
	var out []object
	err := k.dumpEach(typ, m, fn, func(o object) error {
		out = append(out, o)
		return nil
	})
	return out, err
}

// dumpEach runs a dump request and hands each answer to each as it is
// received, without collecting the messages first (a dump of 10,000
// classes is megabytes of them). The objects' options point into the
// received datagrams; each may keep them. An error from each stops the
// dump (the rest of the answer is discarded) and is returned.
func (k *Kernel) dumpEach(typ netlink.HeaderType, m tcwire.Tcmsg, fn func(a *tcwire.Attrs), each func(object) error) error {
	k.req.B = m.AppendTo(k.req.B[:0])
	if fn != nil {
		fn(&k.req)
	}
	defer k.deadline()()
	req, err := k.conn.Send(netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Dump},
		Data:   k.req.B,
	})
	if err != nil {
		return err
	}
	for msg, err := range k.conn.ReceiveIter() {
		if err != nil {
			return err
		}
		if msg.Header.Sequence != req.Header.Sequence {
			return fmt.Errorf("netlink dump: answer with sequence %d to request %d", msg.Header.Sequence, req.Header.Sequence)
		}
		o, err := parseObject(msg.Data)
		if err != nil {
			return err
		}
		if err := each(o); err != nil {
			return err
		}
	}
	return nil
}
