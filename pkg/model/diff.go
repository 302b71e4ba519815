package model

import (
	"cmp"
	"net/netip"
	"slices"
)

// Diff returns the minimal ordered list of kernel changes that turns actual
// into desired. Equal objects (see equal.go: rates as bytes/s, buffer ticks,
// quantum, prio, leaf; labels, bursts and stats ignored) produce nothing;
// Diff(t, t) is empty.
//
// Objects:
//   - Redirect: added or deleted (Change.Device is Redirect.Interface); a
//     redirect whose IFB differs is deleted and re-added.
//   - Root qdisc: added; changed in place (OpChange with FromQdisc) when only
//     TBF's parameters differ; replaced (delete, then add) when its kind or
//     handle differs, or when HTB's default minor differs (the kernel cannot
//     change an HTB qdisc); deleted when desired has none.
//     Deleting a root qdisc removes its classes and filters in the kernel, so
//     they get no deletes of their own, and after a replace (or when actual
//     has no root, or is on another device) every desired class and filter is
//     added. When actual.Device differs from desired.Device, actual's root is
//     deleted on its own device after desired is built.
//   - Classes: added; changed in place (OpChange with FromClass) when their
//     parameters differ, never deleted and re-added, so HTB keeps their tokens
//     and counters; deleted when not desired. A class whose Parent differs is
//     deleted and re-added (HTB cannot move a class), and so are its actual
//     descendants (the kernel refuses to delete a class with children) and the
//     filters pointing into that subtree (it refuses to delete a class that
//     filters use).
//   - Filters, keyed by (Prefix, Match): added; deleted; deleted and re-added
//     when their ClassID differs or actual marks them Damaged.
//
// Order (each step only depends on the ones before it):
//
//  1. redirect adds (a changed redirect on the same interface: delete, add)
//  2. root qdisc replace (delete, add), add or change
//  3. for re-parented classes: deletes of filters pointing into their
//     subtrees, then the subtrees' class deletes, children first
//  4. class adds and changes, parents first (by depth in desired, then handle)
//  5. filter deletes (before any delete of a class they point to)
//  6. filter adds (after the classes they point to exist)
//  7. class deletes, children first (by depth in actual, deepest first, then
//     handle descending)
//  8. root qdisc delete (desired has none, or actual is on another device)
//  9. redirect deletes
//
// Within a step, filters are in filter order (CompareFilters) when the
// trees are sorted (Tree.Sort). Diff is O(n log n) in the number of classes and filters.
func Diff(actual, desired Tree) []Change {
	var d differ
	d.run(actual, desired)
	out := make([]Change, 0, d.len())
	for _, step := range [][]Change{
		d.redirAdds, d.qdisc, d.reFilterDels, d.reClassDels, d.classAdds,
		d.filterDels, d.filterAdds, d.classDels, d.qdiscDels, d.redirDels,
	} {
		out = append(out, step...)
	}
	return out
}

// differ collects the changes of each step.
type differ struct {
	redirAdds, qdisc, reFilterDels, reClassDels, classAdds  []Change
	filterDels, filterAdds, classDels, qdiscDels, redirDels []Change

	// Slabs the changes' Class and Filter copies live in: a few large
	// allocations instead of one per change.
	classSlab  []Class
	filterSlab []Filter
}

// class returns a stats-free copy of c that the changes may point to.
func (d *differ) class(c Class) *Class {
	if len(d.classSlab) == cap(d.classSlab) {
		d.classSlab = make([]Class, 0, max(64, 2*cap(d.classSlab)))
	}
	c.Stats = nil
	d.classSlab = append(d.classSlab, c)
	return &d.classSlab[len(d.classSlab)-1]
}

// filterChange returns a change of a copy of f.
func (d *differ) filterChange(op Op, dev string, f Filter) Change {
	if len(d.filterSlab) == cap(d.filterSlab) {
		d.filterSlab = make([]Filter, 0, max(64, 2*cap(d.filterSlab)))
	}
	d.filterSlab = append(d.filterSlab, f)
	return Change{Op: op, Device: dev, Filter: &d.filterSlab[len(d.filterSlab)-1]}
}

func (d *differ) len() int {
	return len(d.redirAdds) + len(d.qdisc) + len(d.reFilterDels) + len(d.reClassDels) + len(d.classAdds) +
		len(d.filterDels) + len(d.filterAdds) + len(d.classDels) + len(d.qdiscDels) + len(d.redirDels)
}

func (d *differ) run(actual, desired Tree) {
	d.redirects(actual.Redirect, desired.Redirect)
	fresh := d.root(actual, desired) // desired must be built from nothing
	if desired.Root == nil || desired.Root.Kind != ShaperHTB && desired.Root.Kind != ShaperMQ {
		return
	}
	if fresh {
		actual = Tree{Device: desired.Device}
	}
	am, wm := classMap(actual.Classes), classMap(desired.Classes)
	gone := d.reparented(actual, desired, am)
	d.classes(actual, desired, am, wm, gone)
	d.filters(actual, desired, gone)
}

func (d *differ) redirects(a, w *Redirect) {
	switch {
	case RedirectEqual(a, w):
	case a == nil:
		d.redirAdds = append(d.redirAdds, redirChange(OpAdd, *w))
	case w == nil:
		d.redirDels = append(d.redirDels, redirChange(OpDelete, *a))
	case a.Interface == w.Interface:
		d.redirAdds = append(d.redirAdds, redirChange(OpDelete, *a), redirChange(OpAdd, *w))
	default:
		d.redirAdds = append(d.redirAdds, redirChange(OpAdd, *w))
		d.redirDels = append(d.redirDels, redirChange(OpDelete, *a))
	}
}

func redirChange(op Op, r Redirect) Change {
	return Change{Op: op, Device: r.Interface, Redirect: &r}
}

// root diffs the root qdiscs and reports whether desired's classes and
// filters must all be added (actual's are gone or elsewhere).
func (d *differ) root(actual, desired Tree) bool {
	a, w := actual.Root, desired.Root
	if actual.Device != desired.Device {
		if a != nil {
			d.qdiscDels = append(d.qdiscDels, qdiscChange(OpDelete, actual.Device, a))
		}
		if w != nil {
			d.addRoot(desired)
		}
		return true
	}
	switch {
	case a == nil && w == nil:
		return true
	case a == nil:
		d.addRoot(desired)
		return true
	case w == nil:
		d.qdiscDels = append(d.qdiscDels, qdiscChange(OpDelete, actual.Device, a))
		return true
	case !sameQdisc(*a, *w), w.Kind == ShaperHTB && a.DefaultMinor != w.DefaultMinor:
		// The kernel cannot change an HTB qdisc's options in place
		// ("Change operation not supported by specified qdisc"), so a
		// different default class replaces it. shaperd's own trees always
		// use DefaultClass, so this only happens when adopting a foreign
		// HTB root. (Its size table can be changed in place: below.)
		d.qdisc = append(d.qdisc, qdiscChange(OpDelete, actual.Device, a))
		d.addRoot(desired)
		return true
	case w.Kind == ShaperMQ && !queuesEqual(actual.Queues, desired.Queues):
		// A missing or different queue qdisc: the kernel cannot change
		// an HTB qdisc in place, and a queue count change moves users
		// anyway; build the whole mq tree afresh.
		d.qdisc = append(d.qdisc, qdiscChange(OpDelete, actual.Device, a))
		d.addRoot(desired)
		return true
	case !QdiscParamsEqual(*a, *w):
		c := qdiscChange(OpChange, desired.Device, w)
		c.FromQdisc = copyQdisc(a)
		d.qdisc = append(d.qdisc, c)
	}
	return false
}

// addRoot adds desired's root qdisc and, under mq, its queues' qdiscs.
func (d *differ) addRoot(desired Tree) {
	d.qdisc = append(d.qdisc, qdiscChange(OpAdd, desired.Device, desired.Root))
	if desired.Root.Kind == ShaperMQ {
		for i := range desired.Queues {
			d.qdisc = append(d.qdisc, qdiscChange(OpAdd, desired.Device, &desired.Queues[i]))
		}
	}
}

// queuesEqual reports whether two lists of queue qdiscs are the same
// qdiscs with the same parameters.
func queuesEqual(a, b []Qdisc) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Parent != b[i].Parent || !QdiscParamsEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func qdiscChange(op Op, dev string, q *Qdisc) Change {
	return Change{Op: op, Device: dev, Qdisc: copyQdisc(q)}
}

// copyQdisc returns a copy without stats, owning its TBF params.
func copyQdisc(q *Qdisc) *Qdisc {
	c := *q
	c.Stats = nil
	if q.TBF != nil {
		p := *q.TBF
		c.TBF = &p
	}
	return &c
}

// reparented finds desired classes whose actual parent differs, deletes
// them with their actual subtrees (filters pointing into them first) and
// returns the set of actual classes so deleted.
func (d *differ) reparented(actual, desired Tree, am map[Handle]*Class) map[Handle]bool {
	var roots []Handle
	for _, w := range desired.Classes {
		if a, ok := am[w.Handle]; ok && a.Parent != w.Parent {
			roots = append(roots, w.Handle)
		}
	}
	if len(roots) == 0 {
		return nil
	}
	children := make(map[Handle][]Handle, len(actual.Classes))
	for _, a := range actual.Classes {
		children[a.Parent] = append(children[a.Parent], a.Handle)
	}
	gone := map[Handle]bool{}
	for len(roots) > 0 {
		h := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if gone[h] {
			continue
		}
		gone[h] = true
		roots = append(roots, children[h]...)
	}
	for _, f := range actual.Filters {
		if gone[f.ClassID] {
			d.reFilterDels = append(d.reFilterDels, d.filterChange(OpDelete, actual.Device, f))
		}
	}
	d.reClassDels = d.deletesChildrenFirst(actual, am, func(c Class) bool { return gone[c.Handle] })
	return gone
}

// deletesChildrenFirst returns deletes of the actual classes pick selects,
// deepest first, then by handle descending. am indexes actual.Classes.
func (d *differ) deletesChildrenFirst(actual Tree, am map[Handle]*Class, pick func(Class) bool) []Change {
	var del []Class
	for _, c := range actual.Classes {
		if pick(c) {
			del = append(del, c)
		}
	}
	if len(del) == 0 {
		return nil
	}
	depth := depthFunc(am)
	slices.SortFunc(del, func(x, y Class) int {
		if c := cmp.Compare(depth(y.Handle), depth(x.Handle)); c != 0 {
			return c
		}
		return cmp.Compare(y.Handle, x.Handle)
	})
	out := make([]Change, len(del))
	for i, c := range del {
		out[i] = Change{Op: OpDelete, Device: actual.Device, Class: d.class(c)}
	}
	return out
}

// depthFunc returns a memoizing function giving a class's distance from the
// root qdisc in m: a class whose parent is not in m has depth 0.
func depthFunc(m map[Handle]*Class) func(Handle) int {
	memo := map[Handle]int{}
	var walk func(h Handle, guard int) int
	walk = func(h Handle, guard int) int {
		if v, ok := memo[h]; ok {
			return v
		}
		c, ok := m[h]
		if !ok || guard > len(m) {
			return -1 // not a class (or a cycle, which the kernel cannot have)
		}
		v := walk(c.Parent, guard+1) + 1
		memo[h] = v
		return v
	}
	return func(h Handle) int { return walk(h, 0) }
}

// classes adds and changes desired classes (parents first) and deletes
// actual ones not desired (children first). gone are actual classes
// already deleted in step 3.
func (d *differ) classes(actual, desired Tree, am, wm map[Handle]*Class, gone map[Handle]bool) {
	type pending struct {
		c     Change
		depth int
	}
	var ps []pending
	var depth func(Handle) int
	for _, w := range desired.Classes {
		a, ok := am[w.Handle]
		var c Change
		switch {
		case !ok || gone[w.Handle]:
			c = Change{Op: OpAdd, Device: desired.Device, Class: d.class(w)}
		case !ClassParamsEqual(*a, w):
			c = Change{Op: OpChange, Device: desired.Device, Class: d.class(w), FromClass: d.class(*a)}
		default:
			continue
		}
		if depth == nil {
			depth = depthFunc(wm)
		}
		ps = append(ps, pending{c, depth(w.Handle)})
	}
	slices.SortStableFunc(ps, func(x, y pending) int {
		if c := cmp.Compare(x.depth, y.depth); c != 0 {
			return c
		}
		return cmp.Compare(x.c.Class.Handle, y.c.Class.Handle)
	})
	d.classAdds = make([]Change, len(ps))
	for i, p := range ps {
		d.classAdds[i] = p.c
	}
	d.classDels = d.deletesChildrenFirst(actual, am, func(c Class) bool {
		_, want := wm[c.Handle]
		return !want && !gone[c.Handle]
	})
}

// filterKey identifies a filter.
type filterKey struct {
	prefix netip.Prefix
	match  MatchField
}

func keyOf(f Filter) filterKey { return filterKey{f.Prefix, f.Match} }

// filters adds, deletes and re-creates filters. Filters pointing to gone
// classes were deleted in step 3.
func (d *differ) filters(actual, desired Tree, gone map[Handle]bool) {
	// am maps a key to its index in actual.Filters, or -1 when the key is
	// duplicated (all copies are deleted and the filter added afresh).
	am := make(map[filterKey]int, len(actual.Filters))
	for i, f := range actual.Filters {
		k := keyOf(f)
		if _, dup := am[k]; dup {
			am[k] = -1
		} else {
			am[k] = i
		}
	}
	wanted := make([]bool, len(actual.Filters))
	for _, w := range desired.Filters {
		i, ok := am[keyOf(w)]
		if ok && i >= 0 {
			wanted[i] = true
			a := actual.Filters[i]
			switch {
			case gone[a.ClassID]: // deleted in step 3
			case !filterOK(a, w):
				d.filterDels = append(d.filterDels, d.filterChange(OpDelete, actual.Device, a))
			default:
				continue
			}
		}
		d.filterAdds = append(d.filterAdds, d.filterChange(OpAdd, desired.Device, w))
	}
	for i, a := range actual.Filters {
		if !wanted[i] && !gone[a.ClassID] {
			d.filterDels = append(d.filterDels, d.filterChange(OpDelete, actual.Device, a))
		}
	}
	slices.SortStableFunc(d.filterDels, func(x, y Change) int { return CompareFilters(*x.Filter, *y.Filter) })
}
