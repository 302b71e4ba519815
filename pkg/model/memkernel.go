package model

import (
	"fmt"
	"maps"
	"slices"
	"syscall"
)

// MemKernel is an in-memory stand-in for the kernel's traffic control, for
// tests and the daemon's fake kernel. It holds one Tree per device and the
// redirects by interface, and applies Changes with the kernel's rules, failing
// with the errno the kernel would return (wrapped, with the change):
//
//   - adding an object that exists: syscall.EEXIST; changing or deleting
//     one that does not: syscall.ENOENT
//   - a class or filter on a device without an HTB root, a class whose
//     major differs from the root's, an OpChange of a class's Parent or of a
//     qdisc's Kind or Handle, a leaf qdisc on a class with children, an
//     OpChange of a filter or redirect: syscall.EINVAL
//   - a class whose parent does not exist, a filter whose class does not:
//     syscall.ENOENT (the real kernel accepts an unbound filter; the fake is
//     stricter so that Diff's ordering is checked)
//   - deleting a class that has children or that filters point to:
//     syscall.EBUSY
//
// Deleting a root qdisc removes its classes and filters. Adding a child to
// a class drops that class's leaf qdisc (HTB turns it into an inner class);
// a class left without children gets the kernel's default leaf (Leaf nil).
// Stats are not kept; Labels and Bursts are kept as applied. MemKernel is
// not safe for concurrent use.
type MemKernel struct {
	devices   map[string]*memDevice
	redirects map[string]Redirect // by Interface
}

type memDevice struct {
	root     *Qdisc
	queues   map[Handle]Qdisc // per-queue HTB qdiscs under an mq root, by handle
	classes  map[Handle]*Class
	children map[Handle]int // class handle -> number of child classes
	bound    map[Handle]int // class handle -> number of filters pointing to it
	filters  map[filterKey]Filter
}

// NewMemKernel returns a kernel with no devices.
func NewMemKernel() *MemKernel {
	return &MemKernel{devices: map[string]*memDevice{}, redirects: map[string]Redirect{}}
}

func (k *MemKernel) device(name string) *memDevice {
	d, ok := k.devices[name]
	if !ok {
		d = &memDevice{}
		d.clear()
		k.devices[name] = d
	}
	return d
}

func (d *memDevice) clear() {
	d.root = nil
	d.queues = map[Handle]Qdisc{}
	d.classes = map[Handle]*Class{}
	d.children = map[Handle]int{}
	d.bound = map[Handle]int{}
	d.filters = map[filterKey]Filter{}
}

// Load replaces the state of t.Device with t as given (without checks) and
// installs t.Redirect, replacing any redirect into t.Device.
func (k *MemKernel) Load(t Tree) {
	d := k.device(t.Device)
	d.clear()
	if t.Root != nil {
		d.root = copyQdisc(t.Root)
	}
	for _, q := range t.Queues {
		d.queues[q.Handle] = *copyQdisc(&q)
	}
	for _, c := range t.Classes {
		d.classes[c.Handle] = copyClass(c)
		d.children[c.Parent]++
	}
	for _, f := range t.Filters {
		d.filters[keyOf(f)] = f
		d.bound[f.ClassID]++
	}
	for i, r := range k.redirects {
		if r.IFB == t.Device {
			delete(k.redirects, i)
		}
	}
	if t.Redirect != nil {
		k.redirects[t.Redirect.Interface] = *t.Redirect
	}
}

// Tree returns the current state of device as a sorted Tree; Redirect is
// the redirect into device, if any.
func (k *MemKernel) Tree(device string) Tree {
	t := Tree{Device: device}
	for _, i := range sortedKeys(k.redirects) {
		if r := k.redirects[i]; r.IFB == device {
			t.Redirect = &r
			break
		}
	}
	d, ok := k.devices[device]
	if !ok {
		return t
	}
	if d.root != nil {
		t.Root = copyQdisc(d.root)
	}
	for _, h := range slices.Sorted(maps.Keys(d.queues)) {
		t.Queues = append(t.Queues, d.queues[h])
	}
	for _, c := range d.classes {
		cc := *copyClass(*c)
		if c.Leaf != nil {
			l := *c.Leaf
			cc.Leaf = &l
		}
		t.Classes = append(t.Classes, cc)
	}
	for _, f := range d.filters {
		t.Filters = append(t.Filters, f)
	}
	t.Sort()
	return t
}

// Apply applies cs in order and stops at the first change the kernel would
// refuse, returning an error that names it and wraps the errno.
func (k *MemKernel) Apply(cs []Change) error {
	for i, c := range cs {
		if err := k.apply(c); err != nil {
			return fmt.Errorf("change %d (%s): %w", i, describeChange(c), err)
		}
	}
	return nil
}

// ApplyChanges applies cs to a MemKernel loaded with t and returns the
// resulting tree of t.Device. Changes of qdiscs, classes or filters on other
// devices are refused (syscall.EINVAL); use MemKernel for several devices.
func ApplyChanges(t Tree, cs []Change) (Tree, error) {
	k := NewMemKernel()
	k.Load(t)
	for i, c := range cs {
		if c.Redirect == nil && c.Device != t.Device {
			return Tree{}, fmt.Errorf("change %d (%s): tree is on %s: %w", i, describeChange(c), t.Device, syscall.EINVAL)
		}
	}
	if err := k.Apply(cs); err != nil {
		return Tree{}, err
	}
	return k.Tree(t.Device), nil
}

func (k *MemKernel) apply(c Change) error {
	switch {
	case c.Redirect != nil:
		return k.applyRedirect(c)
	case c.Qdisc != nil:
		return k.device(c.Device).applyQdisc(c)
	case c.Class != nil:
		return k.device(c.Device).applyClass(c)
	case c.Filter != nil:
		return k.device(c.Device).applyFilter(c)
	}
	return fmt.Errorf("no object: %w", syscall.EINVAL)
}

func (k *MemKernel) applyRedirect(c Change) error {
	r := *c.Redirect
	old, ok := k.redirects[r.Interface]
	switch c.Op {
	case OpAdd:
		if ok {
			return syscall.EEXIST
		}
		k.redirects[r.Interface] = r
	case OpDelete:
		if !ok || old != r {
			return syscall.ENOENT
		}
		delete(k.redirects, r.Interface)
	default:
		return syscall.EINVAL
	}
	return nil
}

func (d *memDevice) applyQdisc(c Change) error {
	q := c.Qdisc
	if q.Parent != 0 {
		return d.applyQueue(c)
	}
	switch c.Op {
	case OpAdd:
		if d.root != nil {
			return syscall.EEXIST
		}
		if q.Handle.Minor() != 0 || q.Handle == 0 {
			return syscall.EINVAL
		}
		d.clear()
		d.root = copyQdisc(q)
	case OpChange:
		if d.root == nil || d.root.Handle != q.Handle {
			return syscall.ENOENT
		}
		if d.root.Kind != q.Kind {
			return syscall.EINVAL
		}
		d.root = copyQdisc(q)
	case OpDelete:
		if d.root == nil || d.root.Handle != q.Handle {
			return syscall.ENOENT
		}
		d.clear()
	default:
		return syscall.EINVAL
	}
	return nil
}

// applyQueue adds or deletes the HTB qdisc of one queue under an mq root.
func (d *memDevice) applyQueue(c Change) error {
	q := c.Qdisc
	if d.root == nil || d.root.Kind != ShaperMQ || q.Parent.Major() != d.root.Handle.Major() || q.Kind != ShaperHTB {
		return fmt.Errorf("queue qdisc %s under %s: %w", q.Handle, q.Parent, syscall.EINVAL)
	}
	_, exists := d.queues[q.Handle]
	switch c.Op {
	case OpAdd:
		if exists {
			return syscall.EEXIST
		}
		d.queues[q.Handle] = *copyQdisc(q)
	case OpDelete:
		if !exists {
			return syscall.ENOENT
		}
		delete(d.queues, q.Handle)
		for h, cl := range d.classes {
			if h.Major() == q.Handle.Major() {
				delete(d.classes, h)
				d.children[cl.Parent]--
			}
		}
		for k, f := range d.filters {
			if f.ClassID.Major() == q.Handle.Major() {
				delete(d.filters, k)
				d.bound[f.ClassID]--
			}
		}
	default:
		return syscall.EINVAL
	}
	return nil
}

// htbOf returns the HTB qdisc that holds classes with major m: the root,
// or a queue's under mq.
func (d *memDevice) htbOf(m uint16) (Handle, bool) {
	if d.root == nil {
		return 0, false
	}
	if d.root.Kind == ShaperHTB && d.root.Handle.Major() == m {
		return d.root.Handle, true
	}
	if d.root.Kind == ShaperMQ {
		if _, ok := d.queues[MakeHandle(m, 0)]; ok {
			return MakeHandle(m, 0), true
		}
	}
	return 0, false
}

func (d *memDevice) applyClass(c Change) error {
	n := copyClass(*c.Class)
	qdisc, ok := d.htbOf(n.Handle.Major())
	if !ok {
		return fmt.Errorf("no htb qdisc %x: for class %s: %w", n.Handle.Major(), n.Handle, syscall.EINVAL)
	}
	if n.Handle.Minor() == 0 {
		return syscall.EINVAL
	}
	old, exists := d.classes[n.Handle]
	switch c.Op {
	case OpAdd:
		if exists {
			return syscall.EEXIST
		}
		if n.Parent != qdisc {
			p, ok := d.classes[n.Parent]
			if !ok {
				return fmt.Errorf("parent %s: %w", n.Parent, syscall.ENOENT)
			}
			p.Leaf = nil // the parent becomes an inner class
		}
		d.classes[n.Handle] = n
		d.children[n.Parent]++
	case OpChange:
		if !exists {
			return syscall.ENOENT
		}
		if old.Parent != n.Parent {
			return fmt.Errorf("parent %s, was %s: %w", n.Parent, old.Parent, syscall.EINVAL)
		}
		if d.children[n.Handle] > 0 && n.Leaf != nil {
			return fmt.Errorf("leaf qdisc on an inner class: %w", syscall.EINVAL)
		}
		d.classes[n.Handle] = n
	case OpDelete:
		if !exists {
			return syscall.ENOENT
		}
		if d.children[n.Handle] > 0 || d.bound[n.Handle] > 0 {
			return syscall.EBUSY
		}
		delete(d.classes, n.Handle)
		d.children[old.Parent]--
	default:
		return syscall.EINVAL
	}
	return nil
}

func (d *memDevice) applyFilter(c Change) error {
	if d.root == nil || d.root.Kind != ShaperHTB && d.root.Kind != ShaperMQ {
		return fmt.Errorf("no htb root: %w", syscall.EINVAL)
	}
	f := *c.Filter
	k := keyOf(f)
	old, exists := d.filters[k]
	switch c.Op {
	case OpAdd:
		if exists {
			return syscall.EEXIST
		}
		if _, ok := d.classes[f.ClassID]; !ok {
			return fmt.Errorf("class %s: %w", f.ClassID, syscall.ENOENT)
		}
		f.Damaged = false
		d.filters[k] = f
		d.bound[f.ClassID]++
	case OpDelete:
		if !exists {
			return syscall.ENOENT
		}
		delete(d.filters, k)
		d.bound[old.ClassID]--
	default:
		return syscall.EINVAL
	}
	return nil
}
