package kernel

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/mdlayher/netlink"
	vnl "github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// LeafKinds are the leaf qdisc kinds shaperd probes for.
var LeafKinds = []string{model.LeafFQCodel, model.LeafCake, model.LeafSFQ, model.LeafBfifo, model.LeafPfifo}

// ProbeQdiscKinds reports which of kinds the running kernel can create,
// without touching any real interface: it makes a throwaway network
// namespace (unshare on a locked thread, which then returns to its own
// namespace), installs each kind as the root qdisc of that namespace's
// loopback device and removes the namespace again (closing its only
// handle). A kind the kernel answers "Specified qdisc kind is unknown"
// (ENOENT, after trying to load its module) is false; any other refusal
// is an error naming the kind. Needs CAP_SYS_ADMIN and CAP_NET_ADMIN.
func ProbeQdiscKinds(kinds []string) (map[string]bool, error) {
	ns, err := throwawayNetns()
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	conn, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: int(ns)})
	if err != nil {
		return nil, fmt.Errorf("probe qdisc kinds: rtnetlink socket in a throwaway namespace: %w", err)
	}
	defer conn.Close()
	_ = conn.SetOption(netlink.ExtendedAcknowledge, true)
	const loIndex = 1 // the loopback device of a new namespace
	return probeKinds(conn, loIndex, "the loopback of a throwaway namespace", kinds)
}

// probeKinds installs each kind as the root qdisc of device ifindex (and
// removes it again) and reports which the kernel knows (see
// ProbeQdiscKinds).
func probeKinds(conn *netlink.Conn, ifindex uint32, where string, kinds []string) (map[string]bool, error) {
	have := make(map[string]bool, len(kinds))
	var errs []error
	root := tcwire.Tcmsg{Ifindex: ifindex, Handle: uint32(model.RootQdisc), Parent: uint32(model.HandleRoot)}
	for _, kind := range kinds {
		var a tcwire.Attrs
		a.B = root.AppendTo(nil)
		a.String(tcwire.TCAKind, kind)
		_, err := conn.Execute(netlink.Message{
			Header: netlink.Header{Type: tcwire.RTMNewQdisc, Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Replace},
			Data:   a.B,
		})
		switch {
		case err == nil:
			have[kind] = true
			// Remove it again: the next kind cannot replace a root of
			// another kind under the same handle.
			if _, err := conn.Execute(netlink.Message{
				Header: netlink.Header{Type: tcwire.RTMDelQdisc, Flags: netlink.Request | netlink.Acknowledge},
				Data:   root.AppendTo(nil),
			}); err != nil {
				return nil, fmt.Errorf("probe qdisc kinds: remove the %s probe from %s: %w", kind, where, err)
			}
		case errors.Is(err, unix.ENOENT):
			have[kind] = false
		default:
			have[kind] = false
			errs = append(errs, fmt.Errorf("probe qdisc kind %s on %s: %w", kind, where, err))
		}
	}
	return have, errors.Join(errs...)
}

// throwawayNetns creates a new, empty network namespace and returns its
// handle; the namespace disappears when the handle is closed. The calling
// goroutine's thread enters it only for the unshare and then returns to
// its namespace; if it cannot, the thread stays locked (and ends with the
// goroutine) so that no other goroutine runs in the wrong namespace.
func throwawayNetns() (netns.NsHandle, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), fmt.Errorf("probe qdisc kinds: this thread's namespace: %w", err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		if cur, gerr := netns.Get(); gerr == nil && cur.Equal(orig) {
			cur.Close()
			runtime.UnlockOSThread()
		}
		return netns.None(), fmt.Errorf("probe qdisc kinds: create a throwaway network namespace: %w", err)
	}
	if err := netns.Set(orig); err != nil {
		ns.Close()
		return netns.None(), fmt.Errorf("probe qdisc kinds: return to the original namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return ns, nil
}

// probed caches ProbeQdiscKinds(LeafKinds) for the process: the kernel's
// qdisc kinds do not change while shaperd runs (a module loaded later is
// picked up at the next start).
var probed struct {
	once sync.Once
	have map[string]bool
	err  error
}

// LeafKindsAvailable is ProbeQdiscKinds(LeafKinds), probed once per
// process and cached.
func LeafKindsAvailable() (map[string]bool, error) {
	probed.once.Do(func() { probed.have, probed.err = ProbeQdiscKinds(LeafKinds) })
	return probed.have, probed.err
}

// ProbeLinkName is the device LeafKinds creates (down, for a moment)
// when it cannot make a throwaway namespace.
const ProbeLinkName = "shaperd-probe"

// LeafKinds reports which leaf qdisc kinds the running kernel has; the
// daemon resolves its configured leaves with it. It is LeafKindsAvailable
// (a throwaway namespace, cached per process) where namespaces may be
// created. Where they may not (the systemd unit has RestrictNamespaces=yes
// and no CAP_SYS_ADMIN), it probes once on a device of its own in k's
// namespace: an IFB device named ProbeLinkName (a dummy or veth where
// the kernel has no ifb), left down, with no addresses, and deleted
// right after; no existing device is touched.
func (k *Kernel) LeafKinds() (map[string]bool, error) {
	have, err := LeafKindsAvailable()
	if have != nil {
		return have, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.leafKinds == nil && k.leafErr == nil {
		k.leafKinds, k.leafErr = k.probeOnOwnLink(LeafKinds)
		if k.leafErr != nil {
			k.leafErr = fmt.Errorf("%w; then: %w", err, k.leafErr)
		}
	}
	return k.leafKinds, k.leafErr
}

// probeOnOwnLink probes kinds on a temporary device ProbeLinkName in k's
// namespace (see LeafKinds). Called with k.mu held.
func (k *Kernel) probeOnOwnLink(kinds []string) (map[string]bool, error) {
	if old, err := k.link.LinkByName(ProbeLinkName); err == nil {
		// Left over by a crash during a probe: only ever ours.
		if err := k.link.LinkDel(old); err != nil {
			return nil, fmt.Errorf("probe qdisc kinds: remove the stale %s: %w", ProbeLinkName, err)
		}
	}
	attrs := vnl.LinkAttrs{Name: ProbeLinkName, TxQLen: 1000}
	var errs []error
	var link vnl.Link
	for _, l := range []vnl.Link{
		&vnl.Ifb{LinkAttrs: attrs},
		&vnl.Dummy{LinkAttrs: attrs},
		&vnl.Veth{LinkAttrs: attrs, PeerName: ProbeLinkName + "1"},
	} {
		if err := k.link.LinkAdd(l); err != nil {
			errs = append(errs, fmt.Errorf("create %s device %s: %w", l.Type(), ProbeLinkName, err))
			continue
		}
		link = l
		break
	}
	if link == nil {
		return nil, fmt.Errorf("probe qdisc kinds: %w", errors.Join(errs...))
	}
	defer func() { _ = k.link.LinkDel(link) }()
	got, err := k.link.LinkByName(ProbeLinkName)
	if err != nil {
		return nil, fmt.Errorf("probe qdisc kinds: %s: %w", ProbeLinkName, err)
	}
	defer k.deadline()()
	return probeKinds(k.conn, uint32(got.Attrs().Index), "the temporary device "+ProbeLinkName, kinds)
}
