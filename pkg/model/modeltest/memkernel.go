// Package modeltest provides MemKernel, an in-memory stand-in for the
// kernel's traffic control that applies model.Changes with the kernel's
// rules, for tests of the model and of the daemon.
package modeltest

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"syscall"

	"github.com/shaperd/shaperd/pkg/model"
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
	redirects map[string]model.Redirect // by Interface
}

type memDevice struct {
	root     *model.Qdisc
	queues   map[model.Handle]model.Qdisc // per-queue HTB qdiscs under an mq root, by handle
	classes  map[model.Handle]*model.Class
	children map[model.Handle]int // class handle -> number of child classes
	bound    map[model.Handle]int // class handle -> number of filters pointing to it
	filters  map[filterKey]model.Filter
}

// NewMemKernel returns a kernel with no devices.
func NewMemKernel() *MemKernel {
	return &MemKernel{devices: map[string]*memDevice{}, redirects: map[string]model.Redirect{}}
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
	d.queues = map[model.Handle]model.Qdisc{}
	d.classes = map[model.Handle]*model.Class{}
	d.children = map[model.Handle]int{}
	d.bound = map[model.Handle]int{}
	d.filters = map[filterKey]model.Filter{}
}

// Load replaces the state of t.Device with t as given (without checks) and
// installs t.Redirect, replacing any redirect into t.Device.
func (k *MemKernel) Load(t model.Tree) {
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
func (k *MemKernel) Tree(device string) model.Tree {
	t := model.Tree{Device: device}
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
func (k *MemKernel) Apply(cs []model.Change) error {
	for i, c := range cs {
		if err := k.apply(c); err != nil {
			return fmt.Errorf("change %d (%s): %w", i, c.String(), err)
		}
	}
	return nil
}

// ApplyChanges applies cs to a MemKernel loaded with t and returns the
// resulting tree of t.Device. Changes of qdiscs, classes or filters on other
// devices are refused (syscall.EINVAL); use MemKernel for several devices.
func ApplyChanges(t model.Tree, cs []model.Change) (model.Tree, error) {
	k := NewMemKernel()
	k.Load(t)
	for i, c := range cs {
		if c.Redirect == nil && c.Device != t.Device {
			return model.Tree{}, fmt.Errorf("change %d (%s): tree is on %s: %w", i, c.String(), t.Device, syscall.EINVAL)
		}
	}
	if err := k.Apply(cs); err != nil {
		return model.Tree{}, err
	}
	return k.Tree(t.Device), nil
}

func (k *MemKernel) apply(c model.Change) error {
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

func (k *MemKernel) applyRedirect(c model.Change) error {
	r := *c.Redirect
	old, ok := k.redirects[r.Interface]
	switch c.Op {
	case model.OpAdd:
		if ok {
			return syscall.EEXIST
		}
		k.redirects[r.Interface] = r
	case model.OpDelete:
		if !ok || old != r {
			return syscall.ENOENT
		}
		delete(k.redirects, r.Interface)
	default:
		return syscall.EINVAL
	}
	return nil
}

func (d *memDevice) applyQdisc(c model.Change) error {
	q := c.Qdisc
	if q.Parent != 0 {
		return d.applyQueue(c)
	}
	switch c.Op {
	case model.OpAdd:
		if d.root != nil {
			return syscall.EEXIST
		}
		if q.Handle.Minor() != 0 || q.Handle == 0 {
			return syscall.EINVAL
		}
		d.clear()
		d.root = copyQdisc(q)
	case model.OpChange:
		if d.root == nil || d.root.Handle != q.Handle {
			return syscall.ENOENT
		}
		if d.root.Kind != q.Kind {
			return syscall.EINVAL
		}
		d.root = copyQdisc(q)
	case model.OpDelete:
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
func (d *memDevice) applyQueue(c model.Change) error {
	q := c.Qdisc
	if d.root == nil || d.root.Kind != model.ShaperMQ || q.Parent.Major() != d.root.Handle.Major() || q.Kind != model.ShaperHTB {
		return fmt.Errorf("queue qdisc %s under %s: %w", q.Handle, q.Parent, syscall.EINVAL)
	}
	_, exists := d.queues[q.Handle]
	switch c.Op {
	case model.OpAdd:
		if exists {
			return syscall.EEXIST
		}
		d.queues[q.Handle] = *copyQdisc(q)
	case model.OpDelete:
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
func (d *memDevice) htbOf(m uint16) (model.Handle, bool) {
	if d.root == nil {
		return 0, false
	}
	if d.root.Kind == model.ShaperHTB && d.root.Handle.Major() == m {
		return d.root.Handle, true
	}
	if d.root.Kind == model.ShaperMQ {
		if _, ok := d.queues[model.MakeHandle(m, 0)]; ok {
			return model.MakeHandle(m, 0), true
		}
	}
	return 0, false
}

func (d *memDevice) applyClass(c model.Change) error {
	n := copyClass(*c.Class)
	qdisc, ok := d.htbOf(n.Handle.Major())
	if !ok {
		if d.root == nil || d.root.Kind != model.ShaperMQ {
			return fmt.Errorf("no htb root: %w", syscall.EINVAL)
		}
		return fmt.Errorf("no htb qdisc %x: for class %s: %w", n.Handle.Major(), n.Handle, syscall.EINVAL)
	}
	if n.Handle.Minor() == 0 {
		return syscall.EINVAL
	}
	old, exists := d.classes[n.Handle]
	switch c.Op {
	case model.OpAdd:
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
	case model.OpChange:
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
	case model.OpDelete:
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

func (d *memDevice) applyFilter(c model.Change) error {
	if d.root == nil || d.root.Kind != model.ShaperHTB && d.root.Kind != model.ShaperMQ {
		return fmt.Errorf("no htb root: %w", syscall.EINVAL)
	}
	f := *c.Filter
	k := keyOf(f)
	old, exists := d.filters[k]
	switch c.Op {
	case model.OpAdd:
		if exists {
			return syscall.EEXIST
		}
		if _, ok := d.classes[f.ClassID]; !ok {
			return fmt.Errorf("class %s: %w", f.ClassID, syscall.ENOENT)
		}
		f.Damaged = false
		d.filters[k] = f
		d.bound[f.ClassID]++
	case model.OpDelete:
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

// copyQdisc returns a copy of q without stats.
func copyQdisc(q *model.Qdisc) *model.Qdisc {
	c := *q
	c.Stats = nil
	if q.TBF != nil {
		c.TBF = new(*q.TBF)
	}
	return &c
}

// copyClass returns a copy of c without stats.
func copyClass(c model.Class) *model.Class {
	c.Stats = nil
	return &c
}

// filterKey identifies a filter on a device, as the kernel does.
type filterKey struct {
	prefix netip.Prefix
	match  model.MatchField
}

func keyOf(f model.Filter) filterKey { return filterKey{f.Prefix, f.Match} }

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
