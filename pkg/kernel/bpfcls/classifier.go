package bpfcls

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
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

type junkKey struct {
	v6  bool
	key []byte
}

// objects are the classifier's BPF objects.
type objects struct {
	v4, v6 *ebpf.Map
	prog   *ebpf.Program
	progID ebpf.ProgramID
	pinned bool // in c.dir
}

func (o *objects) close() {
	for _, c := range []interface{ Close() error }{o.v4, o.v6, o.prog} {
		_ = c.Close()
	}
}

// tcState is the picture of the filters under the qdisc.
type tcState struct {
	// attached is the program id of shaperd's filter when it is exactly
	// right (the only object in Prio: cls_bpf, protocol all, handle
	// FilterHandle, name ProgName, classic mode); 0 otherwise.
	attached uint32
	// inPrio counts the objects in Prio; replaced lists the Replaces
	// priorities present (prio, proto).
	inPrio    int
	bpfInPrio bool
	replaced  [][2]uint16
	// foreign describes other tools' filters, one entry per kind,
	// priority and protocol (at most maxForeign), with foreignN objects
	// each.
	foreign  []string
	foreignN []int
	otherIdx map[otherKey]int
}

type otherKey struct {
	kind        string
	prio, proto uint16
}

// maxForeign bounds Foreign's list.
const maxForeign = 20

// noteOther records a filter object of another tool for Foreign, in the
// u32 classifier's words.
func (st *tcState) noteOther(o tcObject) {
	if st.otherIdx == nil {
		st.otherIdx = map[otherKey]int{}
	}
	k := otherKey{o.kind, o.prio, o.proto}
	i, ok := st.otherIdx[k]
	if !ok {
		if len(st.foreign) >= maxForeign {
			return
		}
		i = len(st.foreign)
		st.otherIdx[k] = i
		st.foreign = append(st.foreign, "")
		st.foreignN = append(st.foreignN, 0)
	}
	st.foreignN[i]++
	st.foreign[i] = fmt.Sprintf("%s filter pref %d protocol %#04x (%d objects)", o.kind, o.prio, o.proto, st.foreignN[i])
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

// dumpTC takes the picture of the qdisc's filters.
func (c *Classifier) dumpTC() error {
	c.st = nil
	m := tcwire.Tcmsg{Ifindex: c.ifindex, Parent: uint32(c.parent)}
	_ = c.conn.SetDeadline(time.Now().Add(RequestTimeout))
	defer func() { _ = c.conn.SetDeadline(time.Time{}) }()
	msgs, err := c.conn.Execute(netlink.Message{
		Header: netlink.Header{Type: tcwire.RTMGetTFilter, Flags: netlink.Request | netlink.Dump},
		Data:   m.AppendTo(nil),
	})
	if err != nil {
		return err
	}
	st := &tcState{}
	var right uint32
	for _, msg := range msgs {
		o, err := parseFilter(msg.Data)
		if err != nil {
			return fmt.Errorf("decode filter message: %w", err)
		}
		if o.msg.Ifindex != c.ifindex || o.msg.Parent != uint32(c.parent) {
			continue
		}
		switch {
		case o.prio == Prio:
			// The kernel dumps one message for the priority itself (no
			// handle, no options) and one per filter in it.
			if o.msg.Handle == 0 && o.kind == "bpf" {
				continue
			}
			st.inPrio++
			st.bpfInPrio = st.bpfInPrio || o.kind == "bpf"
			if o.kind == "bpf" && o.proto == tcwire.EthPAll && o.msg.Handle == FilterHandle && o.name == ProgName && o.flags&tcwire.TCABPFFlagActDirect == 0 {
				right = o.progID
			}
		case slices.Contains(c.opts.Replaces, o.prio):
			pp := [2]uint16{o.prio, o.proto}
			if !slices.Contains(st.replaced, pp) {
				st.replaced = append(st.replaced, pp)
			}
		default:
			if o.msg.Handle == 0 {
				continue // a priority's own message
			}
			st.noteOther(o)
		}
	}
	if st.inPrio == 1 {
		st.attached = right
	}
	c.st = st
	return nil
}

// Dump reads the maps back as filters (prefix, match field, class id),
// sorted by prefix and then match field; Labels stay empty (the kernel
// does not hold them). When shaperd's tc filter is missing or does not
// run this classifier's program, every filter is returned Damaged, so
// that Diff re-adds them and the Apply that does so re-attaches the
// program (Ensure). Entries whose keys shaperd cannot have written (a
// prefix shorter than the match word, a match byte other than dst or src,
// non-zero padding) are not returned but remembered, and every filter is
// Damaged too: the Ensure of the repairing Apply deletes them (one write
// each). Without maps (nothing installed yet) Dump returns no filters.
func (c *Classifier) Dump() ([]model.Filter, error) {
	if c.connErr != nil {
		return nil, c.errorf(c.connErr, "no netlink connection")
	}
	if err := c.dumpTC(); err != nil {
		return nil, c.errorf(err, "dump filters")
	}
	if _, err := c.open(false); err != nil {
		return nil, err
	}
	if c.objs == nil {
		return nil, nil
	}
	var out []model.Filter
	c.junk = nil
	for i, m := range []*ebpf.Map{c.objs.v4, c.objs.v6} {
		var k []byte
		var v uint32
		it := m.Iterate()
		for it.Next(&k, &v) {
			p, match, ok := parseKey(k)
			if !ok {
				c.junk = append(c.junk, junkKey{i == 1, slices.Clone(k)})
				continue
			}
			out = append(out, model.Filter{Prefix: p, Match: match, ClassID: model.Handle(v)})
		}
		if err := it.Err(); err != nil {
			return nil, c.errorf(err, "read map %s", m.String())
		}
	}
	if c.st.attached == 0 || c.st.attached != uint32(c.objs.progID) || len(c.junk) > 0 {
		for i := range out {
			out[i].Damaged = true
		}
	}
	slices.SortFunc(out, func(a, b model.Filter) int {
		return cmp.Or(a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()), cmp.Compare(a.Match, b.Match))
	})
	return out, nil
}

// Foreign describes the filters under the qdisc, as of the last Dump or
// Ensure, that are neither shaperd's cls_bpf filter nor in the Replaces
// priorities: one entry per kind, priority and protocol, at most
// maxForeign (as the u32 classifier says them).
func (c *Classifier) Foreign() []string {
	if c.st == nil {
		return nil
	}
	return c.st.foreign
}

// Ensure makes the maps, the program and the tc filter exist and be
// right: it adopts the pinned ones (or, without pins, the program the
// attached filter runs and its maps, pinning them again), creates what is
// missing (maps and program each count as a write), attaches the program
// (one write; a priority holding anything else is deleted first, one more)
// and deletes the Replaces priorities (one write each). It writes nothing
// when everything is in place.
func (c *Classifier) Ensure() (writes int, err error) {
	if c.connErr != nil {
		return 0, c.errorf(c.connErr, "no netlink connection")
	}
	if err := c.dumpTC(); err != nil {
		return 0, c.errorf(err, "dump filters")
	}
	if writes, err = c.open(true); err != nil {
		return writes, err
	}
	for _, pp := range c.st.replaced {
		if err := c.execute(deleteRequest(c.ifindex, uint32(c.parent), pp[0], pp[1])); err != nil && !errors.Is(err, syscall.ENOENT) {
			c.st = nil
			return writes, c.errorf(err, "delete filter priority %d (u32)", pp[0])
		}
		writes++
	}
	c.st.replaced = nil
	for _, j := range c.junk {
		switch err := c.mapFor(j.v6).Delete(j.key); {
		case errors.Is(err, ebpf.ErrKeyNotExist):
		case err != nil:
			return writes, c.errorf(err, "delete a map entry shaperd did not write (key %x)", j.key)
		default:
			writes++
		}
	}
	c.junk = nil
	if c.st.attached != 0 && c.st.attached == uint32(c.objs.progID) {
		return writes, nil
	}
	if c.st.inPrio > 0 && c.st.attached == 0 {
		// Something else in shaperd's priority (another kind, handle or
		// protocol) that a replace cannot turn into our filter.
		if err := c.execute(deleteRequest(c.ifindex, uint32(c.parent), Prio, 0)); err != nil && !errors.Is(err, syscall.ENOENT) {
			c.st = nil
			return writes, c.errorf(err, "delete filter priority %d", Prio)
		}
		writes++
	}
	if err := c.execute(attachRequest(c.ifindex, uint32(c.parent), c.objs.prog.FD())); err != nil {
		c.st = nil
		return writes, c.errorf(err, "attach program %s (cls_bpf pref %d)", ProgName, Prio)
	}
	writes++
	c.st.attached, c.st.inPrio = uint32(c.objs.progID), 1
	return writes, nil
}

// mapFor is the map that holds key k.
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
// not an error), closes the maps and program and removes their pins (and
// the pin directories left empty): with the filter and the pins gone the
// kernel frees them.
func (c *Classifier) Remove() error {
	var errs []error
	if c.connErr != nil {
		errs = append(errs, c.errorf(c.connErr, "no netlink connection"))
	} else if err := c.execute(deleteRequest(c.ifindex, uint32(c.parent), Prio, 0)); err != nil &&
		!errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EINVAL) {
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

// open finds the classifier's maps and program: the pinned ones, or
// (without usable pins) those of the program the attached filter runs.
// With create it mounts bpffs if needed, makes what it cannot find (each
// map and the program load count as a write) and pins what is not pinned;
// without, it neither mounts, pins nor creates anything, and c.objs may
// stay nil. Needs the picture of the filters (c.st).
func (c *Classifier) open(create bool) (writes int, err error) {
	if c.objs == nil {
		c.objs = c.find(create)
	}
	if c.objs == nil && create {
		o, w, err := c.create()
		writes += w
		if err != nil {
			return writes, err
		}
		c.objs = o
	}
	if c.objs != nil && create && !c.objs.pinned {
		if err := EnsureBPFFS(c.opts.PinRoot); err != nil {
			return writes, c.errorf(err, "pin directory")
		}
		if err := c.pin(c.objs); err != nil {
			return writes, err
		}
		c.objs.pinned = true
	}
	return writes, nil
}

// find returns the pinned objects (when the pin root's parent is a bpffs
// mount, which create mounts) or those of the attached program; nil when
// there are none.
func (c *Classifier) find(create bool) *objects {
	var fsErr error
	if create {
		fsErr = EnsureBPFFS(c.opts.PinRoot)
	} else {
		fsErr = isBPFFS(filepath.Dir(c.opts.PinRoot))
	}
	if fsErr == nil {
		if o := c.loadPinned(); o != nil {
			o.pinned = true
			return o
		}
	}
	return c.adoptAttached()
}

// create makes the maps and loads the program.
func (c *Classifier) create() (o *objects, writes int, err error) {
	o = &objects{}
	if o.v4, err = ebpf.NewMap(mapSpec(v4MapName, v4KeySize, c.opts.MaxEntries)); err != nil {
		return nil, writes, c.errorf(err, "create map %s", v4MapName)
	}
	writes++
	if o.v6, err = ebpf.NewMap(mapSpec(v6MapName, v6KeySize, c.opts.MaxEntries)); err != nil {
		_ = o.v4.Close()
		return nil, writes, c.errorf(err, "create map %s", v6MapName)
	}
	writes++
	if o.prog, err = ebpf.NewProgram(programSpec(o.v4, o.v6)); err != nil {
		_ = o.v4.Close()
		_ = o.v6.Close()
		return nil, writes, c.errorf(err, "load program %s", ProgName)
	}
	writes++
	if o.progID, err = progID(o.prog); err != nil {
		o.close()
		return nil, writes, c.errorf(err, "program %s", ProgName)
	}
	return o, writes, nil
}

// pin pins o's maps and program in c.dir, replacing whatever is there.
func (c *Classifier) pin(o *objects) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return c.errorf(err, "create pin directory")
	}
	for _, p := range []struct {
		name string
		obj  interface{ Pin(string) error }
	}{{pinV4, o.v4}, {pinV6, o.v6}, {pinProg, o.prog}} {
		path := filepath.Join(c.dir, p.name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return c.errorf(err, "replace pin %s", path)
		}
		if err := p.obj.Pin(path); err != nil {
			return c.errorf(err, "pin %s", path)
		}
	}
	return nil
}

// loadPinned opens the pinned maps and program when all three are there
// and are shaperd's current ones (map types and sizes, program name, and
// the program using exactly these maps); nil otherwise.
func (c *Classifier) loadPinned() *objects {
	o := &objects{}
	var err error
	if o.v4, err = ebpf.LoadPinnedMap(filepath.Join(c.dir, pinV4), nil); err != nil {
		return nil
	}
	if o.v6, err = ebpf.LoadPinnedMap(filepath.Join(c.dir, pinV6), nil); err != nil {
		_ = o.v4.Close()
		return nil
	}
	if o.prog, err = ebpf.LoadPinnedProgram(filepath.Join(c.dir, pinProg), nil); err != nil {
		_ = o.v4.Close()
		_ = o.v6.Close()
		return nil
	}
	if !c.matches(o) {
		o.close()
		return nil
	}
	return o
}

// adoptAttached opens the program that shaperd's attached filter runs
// (by id, from the dump) and its two maps, when they are shaperd's
// current ones; nil otherwise. Opening objects by id needs CAP_SYS_ADMIN.
func (c *Classifier) adoptAttached() *objects {
	if c.st == nil || c.st.attached == 0 {
		return nil
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(c.st.attached))
	if err != nil {
		return nil
	}
	o := &objects{prog: prog}
	info, err := prog.Info()
	if err != nil {
		_ = prog.Close()
		return nil
	}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		mi, err := m.Info()
		switch {
		case err == nil && mi.Name == v4MapName && o.v4 == nil:
			o.v4 = m
		case err == nil && mi.Name == v6MapName && o.v6 == nil:
			o.v6 = m
		default:
			_ = m.Close()
		}
	}
	if o.v4 == nil || o.v6 == nil || !c.matches(o) {
		for _, x := range []interface{ Close() error }{o.v4, o.v6, o.prog} {
			if x != nil && !isNilMap(x) {
				_ = x.Close()
			}
		}
		return nil
	}
	return o
}

func isNilMap(x interface{ Close() error }) bool {
	m, ok := x.(*ebpf.Map)
	return ok && m == nil
}

// matches checks o's maps and program and sets o.progID.
func (c *Classifier) matches(o *objects) bool {
	for _, m := range []struct {
		m    *ebpf.Map
		size uint32
	}{{o.v4, v4KeySize}, {o.v6, v6KeySize}} {
		if m.m.Type() != ebpf.LPMTrie || m.m.KeySize() != m.size || m.m.ValueSize() != valueSize {
			return false
		}
	}
	info, err := o.prog.Info()
	if err != nil || info.Name != ProgName || o.prog.Type() != ebpf.SchedCLS {
		return false
	}
	ids, ok := info.MapIDs()
	if !ok || len(ids) != 2 {
		return false
	}
	for _, m := range []*ebpf.Map{o.v4, o.v6} {
		mi, err := m.Info()
		if err != nil {
			return false
		}
		id, ok := mi.ID()
		if !ok || !slices.Contains(ids, id) {
			return false
		}
	}
	id, ok := info.ID()
	if !ok {
		return false
	}
	o.progID = id
	return true
}

func progID(p *ebpf.Program) (ebpf.ProgramID, error) {
	info, err := p.Info()
	if err != nil {
		return 0, err
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("the kernel does not report program ids")
	}
	return id, nil
}
