package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
)

// TCEvent is a change of a qdisc, class or filter that the kernel
// announced on the rtnetlink traffic-control group and that this Kernel's
// own requests did not cause: someone else (tc by hand, another tool)
// changed traffic control.
type TCEvent struct {
	// Ifindex and Device name the device whose objects changed (Device
	// may be "" when the device is already gone).
	Ifindex int
	Device  string
	// Overrun is set (and the rest zero) when the kernel dropped
	// notifications because they came faster than they were read
	// (ENOBUFS): anything may have changed.
	Overrun bool
}

// WatchTC reports traffic-control changes made by others until ctx is
// done, then closes the channel. Changes made through this Kernel are
// recognised by the port id the kernel stamps on each notification (the
// requesting socket's) and left out, so applying a plan causes no events.
// The subscription has its own socket in the Kernel's namespace.
func (k *Kernel) WatchTC(ctx context.Context) (<-chan TCEvent, error) {
	own := k.conn.PID()
	c, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: k.nsFD(), Groups: 1 << (unix.RTNLGRP_TC - 1)})
	if err != nil {
		return nil, fmt.Errorf("subscribe to traffic-control events: %w", err)
	}
	_ = c.SetReadBuffer(4 << 20)
	// Its own link handle, to name devices: k.link serves other goroutines.
	links, err := vnl.NewHandleAt(k.ns)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("subscribe to traffic-control events: link handle: %w", err)
	}
	go func() {
		<-ctx.Done()
		c.Close() // ends Receive below
	}()
	out := make(chan TCEvent, 64)
	go func() {
		defer close(out)
		defer links.Close()
		send := func(ev TCEvent) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			msgs, err := c.Receive()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if errors.Is(err, unix.ENOBUFS) {
					if !send(TCEvent{Overrun: true}) {
						return
					}
					continue
				}
				return // the socket is broken: the reconcile ticks remain
			}
			seen := map[int]bool{} // one event per device per datagram batch
			for _, m := range msgs {
				ifindex, ok := foreignTCChange(m, own)
				if !ok || seen[ifindex] {
					continue
				}
				seen[ifindex] = true
				ev := TCEvent{Ifindex: ifindex}
				if l, err := links.LinkByIndex(ifindex); err == nil {
					ev.Device = l.Attrs().Name
				}
				if !send(ev) {
					return
				}
			}
		}
	}()
	return out, nil
}

// foreignTCChange returns the ifindex of a qdisc, class or filter
// notification that a socket other than port own caused.
func foreignTCChange(m netlink.Message, own uint32) (int, bool) {
	switch m.Header.Type {
	case tcwire.RTMNewQdisc, tcwire.RTMDelQdisc, tcwire.RTMNewTClass, tcwire.RTMDelTClass, tcwire.RTMNewTFilter, tcwire.RTMDelTFilter:
	default:
		return 0, false
	}
	if m.Header.PID == own {
		return 0, false
	}
	tm, _, err := tcwire.ParseTcmsg(m.Data)
	if err != nil {
		return 0, false
	}
	return int(int32(tm.Ifindex)), true // tcm_ifindex is an int
}
