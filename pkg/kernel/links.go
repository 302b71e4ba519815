package kernel

import (
	"context"
	"errors"
	"fmt"

	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	errEEXIST = unix.EEXIST
	errEINVAL = unix.EINVAL
)

// EnsureIFB creates the IFB device name if it does not exist and sets it up.
// An existing device of another type is an error.
func (k *Kernel) EnsureIFB(name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ensureIFB(name, 0)
}

// ensureIFB is EnsureIFB with queues transmit (and receive) queues when it
// creates the device (0 or 1: the kernel's one). An existing IFB with
// fewer transmit queues than queues is an error that says how to fix it
// (its queue count is fixed when it is created).
func (k *Kernel) ensureIFB(name string, queues int) error {
	l, err := k.link.LinkByName(name)
	if err != nil {
		var nf vnl.LinkNotFoundError
		if !errors.As(err, &nf) {
			return fmt.Errorf("ifb %s: %w", name, err)
		}
		attrs := vnl.LinkAttrs{Name: name, TxQLen: 1000}
		if queues > 1 {
			attrs.NumTxQueues, attrs.NumRxQueues = queues, queues
		}
		if err := k.link.LinkAdd(&vnl.Ifb{LinkAttrs: attrs}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create ifb %s: %w", name, err)
		}
		if l, err = k.link.LinkByName(name); err != nil {
			return fmt.Errorf("ifb %s: %w", name, err)
		}
	}
	if l.Type() != "ifb" {
		return fmt.Errorf("device %s is a %s device, not ifb", name, l.Type())
	}
	if n := l.Attrs().NumTxQueues; queues > 1 && n < queues {
		return fmt.Errorf("ifb %s has %d transmit queues, %d per-queue trees need %d: delete it (ip link del %s) and shaperd creates it with %d", name, n, queues, queues, name, queues)
	}
	if l.Attrs().Flags&unix.IFF_UP == 0 {
		if err := k.link.LinkSetUp(l); err != nil {
			return fmt.Errorf("set ifb %s up: %w", name, err)
		}
	}
	return nil
}

// DeleteIFB removes the IFB device name; a missing device is not an error,
// a device of another type is.
func (k *Kernel) DeleteIFB(name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	l, err := k.link.LinkByName(name)
	if err != nil {
		var nf vnl.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("ifb %s: %w", name, err)
	}
	if l.Type() != "ifb" {
		return fmt.Errorf("device %s is a %s device, not ifb: not deleting it", name, l.Type())
	}
	if err := k.link.LinkDel(l); err != nil {
		return fmt.Errorf("delete ifb %s: %w", name, err)
	}
	return nil
}

// LinkExists reports whether the device exists.
func (k *Kernel) LinkExists(name string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, err := k.link.LinkByName(name); err != nil {
		var nf vnl.LinkNotFoundError
		if errors.As(err, &nf) {
			return false, nil
		}
		return false, fmt.Errorf("device %s: %w", name, err)
	}
	return true, nil
}

// LinkUp reports whether the device exists and is administratively up
// (IFF_UP); a missing device is false with ErrNoDevice.
func (k *Kernel) LinkUp(name string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l, err := k.linkByName(name)
	if err != nil {
		return false, err
	}
	return l.Attrs().Flags&unix.IFF_UP != 0, nil
}

// LinkEvent is a change of a network device.
type LinkEvent struct {
	Name  string
	Index int
	// Up is IFF_UP (administratively up); Running is IFF_RUNNING (carrier).
	Up, Running bool
	// Deleted is set when the device was removed.
	Deleted bool
}

// WatchLinks reports link changes in the Kernel's namespace until ctx is
// done; the channel is closed then (or when the subscription fails).
// Several events may arrive for one change; consumers should treat them as
// "look again".
func (k *Kernel) WatchLinks(ctx context.Context) (<-chan LinkEvent, error) {
	updates := make(chan vnl.LinkUpdate, 64)
	done := make(chan struct{})
	ns := k.ns
	errc := make(chan struct{})
	opts := vnl.LinkSubscribeOptions{
		Namespace: &ns,
		ErrorCallback: func(error) {
			select {
			case errc <- struct{}{}:
			default:
			}
		},
	}
	if err := vnl.LinkSubscribeWithOptions(updates, done, opts); err != nil {
		return nil, fmt.Errorf("subscribe to link events: %w", err)
	}
	out := make(chan LinkEvent, 64)
	go func() {
		defer close(out)
		defer func() {
			close(done)
			go func() { // let the subscription goroutine finish
				for range updates {
				}
			}()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-errc:
				return
			case u, ok := <-updates:
				if !ok {
					return
				}
				ev := LinkEvent{
					Index:   int(u.Index),
					Up:      u.IfInfomsg.Flags&unix.IFF_UP != 0,
					Running: u.IfInfomsg.Flags&unix.IFF_RUNNING != 0,
					Deleted: u.Header.Type == unix.RTM_DELLINK,
				}
				if u.Link != nil {
					ev.Name = u.Link.Attrs().Name
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
