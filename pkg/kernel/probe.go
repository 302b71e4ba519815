package kernel

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

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
	have := make(map[string]bool, len(kinds))
	var errs []error
	for _, kind := range kinds {
		var a attrs
		a.b = tcmsg{Ifindex: loIndex, Handle: uint32(model.RootQdisc), Parent: uint32(model.HandleRoot)}.appendTo(nil)
		a.str(tcaKind, kind)
		_, err := conn.Execute(netlink.Message{
			Header: netlink.Header{Type: rtmNewQdisc, Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Replace},
			Data:   a.b,
		})
		switch {
		case err == nil:
			have[kind] = true
			// Remove it again: the next kind cannot replace a root of
			// another kind under the same handle.
			var d attrs
			d.b = tcmsg{Ifindex: loIndex, Handle: uint32(model.RootQdisc), Parent: uint32(model.HandleRoot)}.appendTo(nil)
			if _, err := conn.Execute(netlink.Message{
				Header: netlink.Header{Type: rtmDelQdisc, Flags: netlink.Request | netlink.Acknowledge},
				Data:   d.b,
			}); err != nil {
				return nil, fmt.Errorf("probe qdisc kinds: remove the %s probe: %w", kind, err)
			}
		case errors.Is(err, unix.ENOENT):
			have[kind] = false
		default:
			have[kind] = false
			errs = append(errs, fmt.Errorf("probe qdisc kind %s on the loopback of a throwaway namespace: %w", kind, err))
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

// LeafKinds reports which leaf qdisc kinds the running kernel has
// (LeafKindsAvailable); the daemon resolves its configured leaves with it.
func (k *Kernel) LeafKinds() (map[string]bool, error) { return LeafKindsAvailable() }
