package daemon

import (
	"errors"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel"
)

// tcSettle is how long the daemon waits after a traffic-control change by
// another program for more of them (tc commands come in bursts) before it
// reconciles the device.
const tcSettle = 20 * time.Millisecond

// eventState is the loop's view of the kernel's link and traffic-control
// events.
type eventState struct {
	// links and tc are the event channels (nil: none, or ended).
	links <-chan kernel.LinkEvent
	tc    <-chan kernel.TCEvent
	// dirty are the reconcilers events concern; they are reconciled when
	// settle fires (nil: nothing pending).
	dirty  map[*reconciler]bool
	settle <-chan time.Time
}

// linkEvent takes a link event (ok false: the channel closed): a managed
// device that changed is reconciled after Options.LinkSettle.
func (d *Daemon) linkEvent(ev kernel.LinkEvent, ok bool) {
	if !ok {
		d.events.links = nil
		d.log.Warn("link events ended; interfaces are found by the reconcile tick only")
		return
	}
	if d.markDirty(ev.Name, d.opts.LinkSettle) {
		d.log.Debug("link event", "device", ev.Name, "up", ev.Up, "deleted", ev.Deleted)
	}
}

// tcEvent takes a traffic-control event (ok false: the channel closed): a
// managed device another program changed is reconciled after tcSettle,
// every interface after an overrun.
func (d *Daemon) tcEvent(ev kernel.TCEvent, ok bool) {
	if !ok {
		d.events.tc, d.tcLive = nil, false
		d.log.Warn("traffic-control events ended; changes made by others are found by the reconcile tick only")
		return
	}
	switch {
	case ev.Overrun:
		d.log.Warn("traffic-control events overran (the kernel dropped some); reconciling every interface")
		for _, st := range d.ifaces {
			d.markDirty(st.cfg.Name, tcSettle)
		}
	case d.markDirty(ev.Device, tcSettle):
		d.log.Debug("traffic-control change by another program", "device", ev.Device)
	default:
		return
	}
	d.stats.tcEvents.Inc()
}

// markDirty marks the reconcilers of device name (the interface, or the
// IFB that carries its ingress shaping) for the next settle, starting the
// settle wait when none runs. It reports whether name is managed.
func (d *Daemon) markDirty(name string, wait time.Duration) bool {
	found := false
	for _, st := range d.ifaces {
		if st.cfg.Name == name || st.device == name {
			d.events.dirty[st], found = true, true
		}
	}
	if found && d.events.settle == nil {
		d.events.settle = d.clock.After(wait)
	}
	return found
}

// settled reconciles the reconcilers events marked. Events taken
// meanwhile (drainEvents) mark the next settle's.
func (d *Daemon) settled() error {
	dirty := d.events.dirty
	d.events.dirty, d.events.settle = map[*reconciler]bool{}, nil
	var errs []error
	for _, st := range d.ifaces {
		if dirty[st] {
			if err := d.reconcile(st, "event"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// drainEvents takes the events already received, without waiting, and
// then unmarks st: a full pass calls it just before the dump that decides
// whether st is in sync (the first dump, or the verify after an apply), so
// the changes those events report are in that dump. Otherwise the IFB
// that an ingress interface's first apply creates and brings up (link
// events the daemon cannot tell from another program's) would cost a
// second full pass at once, with its memory peak. Events of other
// reconcilers stay marked.
func (d *Daemon) drainEvents(st *reconciler) {
	if d.events.dirty == nil {
		return // no loop (Once)
	}
	for {
		select {
		case ev, ok := <-d.events.links:
			d.linkEvent(ev, ok)
			continue
		case ev, ok := <-d.events.tc:
			d.tcEvent(ev, ok)
			continue
		default:
		}
		break
	}
	delete(d.events.dirty, st)
	if len(d.events.dirty) == 0 {
		d.events.settle = nil // nothing left to wait for
	}
}
