package bpfcls

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/model"
)

// Options configure a Classifier.
type Options struct {
	// PinRoot is the directory under which maps and program are pinned
	// (DefaultPinRoot when empty); its parent must be, or becomes, a bpffs
	// mount.
	PinRoot string
	// NetNS is the nsfs inode of the device's network namespace
	// (NetNSInode); it names the pin directory.
	NetNS uint64
	// MaxEntries is each map's capacity (DefaultMaxEntries when 0).
	MaxEntries uint32
	// Replaces are filter priorities under the qdisc that hold shaperd's
	// other classifier (u32) after a switch to bpf: Ensure deletes them and
	// Foreign does not list them.
	Replaces []uint16
}

// RequestTimeout bounds each netlink request and its ack, and each dump.
const RequestTimeout = 30 * time.Second

// Classifier is shaperd's cls_bpf classifier under one qdisc (parent) of
// one device: an LPM-trie map per address family, the program that looks
// packets up in them, and the tc filter that runs the program. It keeps
// the maps and program open once found or made, and a picture of the
// qdisc's filters taken by Dump or Ensure.
//
// A Classifier is not safe for concurrent use, nor for use concurrently
// with other requests on the same netlink socket.
type Classifier struct {
	conn    *netlink.Conn
	connErr error
	ifindex uint32
	parent  model.Handle
	opts    Options
	dir     string
	objs    *objects // nil: not opened yet
	st      *tcState // nil: unknown
	// junk are the map entries of the last Dump that shaperd cannot have
	// written; Ensure deletes them. Close keeps them (Kernel.Dump closes
	// the classifier after each dump; the repairing Apply comes after).
	junk []junkKey
}

// junkKey is a map entry of the IPv4 or IPv6 map to delete.
type junkKey struct {
	v6  bool
	key []byte
}

// NewConn returns the Classifier of device ifindex's qdisc parent, writing
// filters on conn, an rtnetlink socket in the device's network namespace
// (the socket stays the caller's; a nil conn makes every method that needs
// the kernel fail). Nothing is read or written until a method needs it.
func NewConn(conn *netlink.Conn, ifindex uint32, parent model.Handle, o Options) *Classifier {
	var err error
	if conn == nil {
		err = errors.New("nil netlink connection")
	} else {
		_ = conn.SetOption(netlink.ExtendedAcknowledge, true)
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.PinRoot == "" {
		o.PinRoot = DefaultPinRoot
	}
	return &Classifier{conn: conn, connErr: err, ifindex: ifindex, parent: parent, opts: o,
		dir: PinDir(o.PinRoot, o.NetNS, ifindex, parent)}
}

// PinDir is the directory where this classifier pins its maps and program.
func (c *Classifier) PinDir() string { return c.dir }

// errorf wraps err with the device and qdisc and what was being done.
func (c *Classifier) errorf(err error, format string, a ...any) error {
	return fmt.Errorf("bpf classifier of ifindex %d (qdisc %v): %s: %w", c.ifindex, c.parent, fmt.Sprintf(format, a...), err)
}

// filterName describes a filter for errors.
func filterName(f model.Filter) string {
	s := fmt.Sprintf("%s %v class %v", f.Match, f.Prefix, f.ClassID)
	if f.Labels.User != "" {
		s += " (user " + f.Labels.User + ")"
	}
	return s
}

// execute sends one request and waits for its ack.
func (c *Classifier) execute(m netlink.Message) error {
	_ = c.conn.SetDeadline(time.Now().Add(RequestTimeout))
	defer func() { _ = c.conn.SetDeadline(time.Time{}) }()
	_, err := c.conn.Execute(m)
	return err
}

// mapFor is the IPv6 map for v6, else the IPv4 one.
func (c *Classifier) mapFor(v6 bool) *ebpf.Map {
	if v6 {
		return c.objs.v6
	}
	return c.objs.v4
}

// Add makes the map entry of f's prefix and match field hold f.ClassID:
// one map update (a write) unless it already does. Nothing is written to
// tc. Without maps yet, Ensure runs first.
func (c *Classifier) Add(f model.Filter) (writes int, err error) {
	k, v6, err := key(f.Prefix, f.Match)
	if err != nil {
		return 0, c.errorf(err, "add %s", filterName(f))
	}
	if f.ClassID == 0 || f.ClassID.Minor() == 0 {
		return 0, c.errorf(fmt.Errorf("class id %v is not a class", f.ClassID), "add %s", filterName(f))
	}
	if c.objs == nil {
		if writes, err = c.Ensure(); err != nil {
			return writes, err
		}
	}
	m := c.mapFor(v6)
	var old uint32
	if err := m.Lookup(k, &old); err == nil && old == uint32(f.ClassID) {
		return writes, nil
	}
	if err := m.Update(k, value(f.ClassID), ebpf.UpdateAny); err != nil {
		return writes, c.errorf(err, "add %s: map update", filterName(f))
	}
	return writes + 1, nil
}

// Delete removes the map entry of f's prefix and match field (the class
// is not compared): one write, none when there is no such entry.
func (c *Classifier) Delete(f model.Filter) (writes int, err error) {
	k, v6, err := key(f.Prefix, f.Match)
	if err != nil {
		return 0, c.errorf(err, "delete %s", filterName(f))
	}
	if c.objs == nil {
		if c.connErr == nil && c.st == nil {
			if err := c.dumpTC(); err != nil {
				return 0, c.errorf(err, "dump filters")
			}
		}
		if _, err := c.open(false); err != nil {
			return 0, err
		}
		if c.objs == nil {
			return 0, nil
		}
	}
	if err := c.mapFor(v6).Delete(k); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return 0, nil
		}
		return 0, c.errorf(err, "delete %s: map delete", filterName(f))
	}
	return 1, nil
}

// Remove deletes shaperd's tc filter under the qdisc (a missing one is
// not an error, nor a qdisc that takes no filters, such as a TBF root
// that replaced the HTB: the kernel answers EOPNOTSUPP), closes the maps and program and removes their pins (and
// the pin directories left empty): with the filter and the pins gone the
// kernel frees them.
func (c *Classifier) Remove() error {
	var errs []error
	if c.connErr != nil {
		errs = append(errs, c.errorf(c.connErr, "no netlink connection"))
	} else if err := c.execute(deleteRequest(c.ifindex, uint32(c.parent), Prio, 0)); err != nil &&
		!errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.EOPNOTSUPP) {
		errs = append(errs, c.errorf(err, "delete filter priority %d", Prio))
	}
	c.Close()
	if err := removePins(c.opts.PinRoot, c.dir); err != nil {
		errs = append(errs, c.errorf(err, "unpin"))
	}
	return errors.Join(errs...)
}

// Close forgets the picture of the filters and closes the classifier's
// file descriptors of maps and program (the pins and the attached filter
// keep them in the kernel); it does not touch the socket. The Classifier
// may be used again: it opens them from the pins when next needed.
func (c *Classifier) Close() error {
	c.st = nil
	if c.objs != nil {
		c.objs.close()
		c.objs = nil
	}
	return nil
}
