package u32

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// Classifier manages shaperd's hashed u32 filters under one qdisc (the HTB
// root, model.RootQdisc) of one device. It keeps a picture of the kernel's
// u32 objects, taken by Dump (or by the first method that needs it) and
// updated by its own writes; after a failed write it takes a new one.
//
// A Classifier is not safe for concurrent use, nor for use concurrently
// with other requests on the same netlink socket.
type Classifier struct {
	conn    *netlink.Conn
	connErr error
	ifindex uint32
	parent  model.Handle
	st      *state // nil: unknown, dump before use
	// lastObjects is the number of objects the last dump returned.
	lastObjects int
}

// NewConn returns the Classifier of device ifindex's qdisc parent
// (normally model.RootQdisc), writing on conn, an rtnetlink socket
// (netlink.Dial(unix.NETLINK_ROUTE, ...)) in the device's network
// namespace. The socket stays the caller's; a nil conn makes every method
// that needs the kernel return an error.
//
// NewConn turns on extended acknowledgements on the socket, so that kernel
// refusals carry the kernel's message in (*netlink.OpError).Message; the
// caller's other requests on that socket get them too. Kernels before 4.12
// lack them, and errors then have no message.
func NewConn(conn *netlink.Conn, ifindex uint32, parent model.Handle) *Classifier {
	var err error
	if conn == nil {
		err = errors.New("nil netlink connection")
	} else {
		_ = conn.SetOption(netlink.ExtendedAcknowledge, true) // best effort, see above
	}
	return &Classifier{conn: conn, connErr: err, ifindex: ifindex, parent: parent}
}

// errorf wraps err with the device and qdisc and what was being done.
func (c *Classifier) errorf(err error, format string, a ...any) error {
	return fmt.Errorf("u32 filters of ifindex %d (qdisc %v): %s: %w", c.ifindex, c.parent, fmt.Sprintf(format, a...), err)
}

// filterName describes a filter for errors.
func filterName(f model.Filter) string {
	s := fmt.Sprintf("%s %v class %v", f.Match, f.Prefix, f.ClassID)
	if f.Labels.User != "" {
		s += " (user " + f.Labels.User + ")"
	}
	return s
}

// ready makes sure there is a connection and a picture of the kernel.
func (c *Classifier) ready() error {
	if c.connErr != nil {
		return c.errorf(c.connErr, "no netlink connection")
	}
	if c.st == nil {
		if _, err := c.Dump(); err != nil {
			return err
		}
	}
	return nil
}

// execute sends one request and waits for its acknowledgement. On failure
// the picture of the kernel is dropped so the next call dumps afresh.
func (c *Classifier) execute(typ netlink.HeaderType, flags netlink.HeaderFlags, m tcwire.Tcmsg, o *u32Opts) error {
	err := c.send(typ, flags, m, o)
	if err != nil {
		c.st = nil
	}
	return err
}

// send sends one request and waits for its acknowledgement.
func (c *Classifier) send(typ netlink.HeaderType, flags netlink.HeaderFlags, m tcwire.Tcmsg, o *u32Opts) error {
	m.Ifindex, m.Parent = c.ifindex, uint32(c.parent)
	req := filterRequest(typ, flags|netlink.Acknowledge, m, o)
	clearDeadline := c.deadline()
	_, err := c.conn.Execute(req)
	clearDeadline()
	return err
}

// RequestTimeout bounds each request and its ack, and each whole dump, on
// the classifier's socket: a kernel that does not answer makes the call
// fail (wrapping os.ErrDeadlineExceeded) instead of hanging.
const RequestTimeout = 30 * time.Second

// deadline sets RequestTimeout on the socket and returns the function that
// clears it again (the socket is shared with the caller).
func (c *Classifier) deadline() func() {
	_ = c.conn.SetDeadline(time.Now().Add(RequestTimeout))
	return func() { _ = c.conn.SetDeadline(time.Time{}) }
}

// create adds a new object (fails if the handle exists).
func (c *Classifier) create(t int, handle uint32, o *u32Opts) error {
	return c.execute(tcwire.RTMNewTFilter, netlink.Create|netlink.Excl, tcwire.Tcmsg{Handle: handle, Info: tcwire.FilterInfo(trees[t].prio, trees[t].proto)}, o)
}

// change modifies an existing key node in place (class, link).
func (c *Classifier) change(t int, handle uint32, o *u32Opts) error {
	return c.execute(tcwire.RTMNewTFilter, 0, tcwire.Tcmsg{Handle: handle, Info: tcwire.FilterInfo(trees[t].prio, trees[t].proto)}, o)
}

// remove deletes one object; a missing one is not an error (and keeps
// the picture: its callers go on using it).
func (c *Classifier) remove(t int, handle uint32) error {
	err := c.send(tcwire.RTMDelTFilter, 0, tcwire.Tcmsg{Handle: handle, Info: tcwire.FilterInfo(trees[t].prio, trees[t].proto)}, nil)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		c.st = nil
	}
	return err
}

// Add installs filter f: one node per replica slot, each matching the full
// prefix and classifying into f.ClassID, creating the hash tables and links
// it needs. When nodes for f's prefix and match field exist it makes them
// exactly right instead: wrong class changed in place, misplaced or damaged
// nodes replaced (new ones first), so Add also serves a class change and
// the repair of a Damaged filter. writes counts netlink requests that
// changed something. Prefixes rejected: /0, IPv6 /65../112, non-canonical
// (host bits set), IPv4-mapped IPv6, zoned.
func (c *Classifier) Add(f model.Filter) (writes int, err error) {
	pl, err := layoutOf(f.Prefix, f.Match)
	if err != nil {
		return 0, c.errorf(err, "add %s", filterName(f))
	}
	if f.ClassID == 0 || f.ClassID.Minor() == 0 {
		return 0, c.errorf(fmt.Errorf("class id %v is not a class", f.ClassID), "add %s", filterName(f))
	}
	if err := c.ready(); err != nil {
		return 0, err
	}
	w, err := c.ensureFor(pl)
	writes += w
	if err != nil {
		return writes, c.errorf(err, "add %s: tables", filterName(f))
	}
	w, err = c.place(pl, fkey{f.Prefix, f.Match}, uint32(f.ClassID))
	writes += w
	if err != nil {
		return writes, c.errorf(err, "add %s", filterName(f))
	}
	return writes, nil
}

// place makes the nodes of filter k exactly those of pl with class cls.
func (c *Classifier) place(pl placement, k fkey, cls uint32) (writes int, err error) {
	st := c.st
	t := pl.tree
	sel := tcwire.U32Sel{Flags: tcwire.U32Terminal, Keys: pl.keys}
	lo, hi := nodeRange(pl)
	keep := map[uint32]bool{}
	var fix []uint32 // nodes in the right slot that need their class changed
	for _, s := range pl.slots {
		sb := st.slotBase(t, s)
		var ok uint32
		for _, h := range st.byFilter[k] {
			n := st.nodes[h]
			if h&^0xfff == sb && !keep[h] && n.sel.Equal(sel) && n.flags&tcwire.U32UserFlags == 0 && nodeIDOf(h) >= lo && nodeIDOf(h) <= hi {
				ok = h
				break
			}
		}
		if ok != 0 {
			keep[ok] = true
			if st.nodes[ok].classID != cls {
				fix = append(fix, ok)
			}
			continue
		}
		id, err := st.freeNode(sb, lo, hi)
		if err != nil {
			return writes, fmt.Errorf("table %x: bucket %d: %w", s.htid, s.bucket, err)
		}
		h := sb | uint32(id)
		o := &u32Opts{classID: cls, hash: c.hashAttr(t, s), sel: &sel}
		if err := c.create(t, h, o); err != nil {
			return writes, fmt.Errorf("create node %x: %w", h, err)
		}
		writes++
		st.addNode(&node{handle: h, tree: t, classID: cls, sel: sel, key: k, user: true})
		keep[h] = true
	}
	for _, h := range fix {
		if err := c.change(t, h, &u32Opts{classID: cls}); err != nil {
			return writes, fmt.Errorf("change class of node %x: %w", h, err)
		}
		writes++
		st.nodes[h].classID = cls
	}
	for _, h := range append([]uint32(nil), st.byFilter[k]...) {
		n, ok := st.nodes[h]
		if keep[h] || !ok {
			continue
		}
		if err := c.remove(n.tree, h); err != nil {
			return writes, fmt.Errorf("delete misplaced node %x: %w", h, err)
		}
		writes++
		st.removeNode(h)
	}
	return writes, nil
}

// hashAttr is TCA_U32_HASH for slot s of tree t.
func (c *Classifier) hashAttr(t int, s slot) uint32 {
	if s.htid == 0 {
		return tcwire.U32RootHTID
	}
	return handleOf(s.htid, s.bucket, 0)
}

// Delete removes every node of f's prefix and match field (the class is
// not compared), wherever it is. Deleting a filter that is not there is not
// an error and writes nothing.
func (c *Classifier) Delete(f model.Filter) (writes int, err error) {
	if err := c.ready(); err != nil {
		return 0, err
	}
	k := fkey{f.Prefix, f.Match}
	for _, h := range append([]uint32(nil), c.st.byFilter[k]...) {
		n, ok := c.st.nodes[h]
		if !ok {
			continue
		}
		if err := c.remove(n.tree, h); err != nil {
			return writes, c.errorf(err, "delete %s: node %x", filterName(f), h)
		}
		writes++
		c.st.removeNode(h)
	}
	return writes, nil
}

// fkey identifies a filter in the kernel: its prefix and match field.
type fkey struct {
	prefix netip.Prefix
	match  model.MatchField
}

// Close forgets the Classifier's picture of the kernel. It does not close
// the netlink socket, which belongs to the caller, nor touch the kernel;
// the Classifier may be used again afterwards (it dumps first).
func (c *Classifier) Close() error {
	c.st = nil
	return nil
}
