package model

import (
	"fmt"

	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// Mismatches describes, in words, every parameter in which actual differs
// from desired by the rules of equal.go, one string per difference, for
// kernel verification and status:
//
//	class 1:105 (user alice): rate 10mbit, want 12mbit
//	class 1:105 (user alice): missing
//	class 1:200: unexpected
//	filter 198.18.1.10/32 dst (user alice): class 1:105, want 1:106
//	qdisc 1: on lan0: default minor 3, want 2
//
// For trees on the same device it returns nil exactly when Diff is empty. Classes and filters are named with desired's labels, or
// actual's when only actual has the object.
func Mismatches(actual, desired Tree) []string {
	var m []string
	add := func(format string, args ...any) { m = append(m, fmt.Sprintf(format, args...)) }
	if actual.Device != desired.Device {
		add("device %s, want %s", actual.Device, desired.Device)
	}
	switch a, w := actual.Redirect, desired.Redirect; {
	case RedirectEqual(a, w):
	case a == nil:
		add("redirect %s -> %s: missing", w.Interface, w.IFB)
	case w == nil:
		add("redirect %s -> %s: unexpected", a.Interface, a.IFB)
	default:
		add("redirect %s -> %s, want %s -> %s", a.Interface, a.IFB, w.Interface, w.IFB)
	}
	m = append(m, qdiscMismatches(actual, desired)...)
	if desired.Root == nil || actual.Root == nil || !sameQdisc(*actual.Root, *desired.Root) {
		return m // classes and filters are not comparable: missing root or replaced
	}
	am := classMap(actual.Classes)
	wm := classMap(desired.Classes)
	for _, w := range desired.Classes {
		// The names are formatted only for a difference: a kernel that
		// holds the tree costs no string per object.
		name := func() string { return fmt.Sprintf("class %s%s", w.Handle, labelText(w.Labels)) }
		a, ok := am[w.Handle]
		if !ok {
			add("%s: missing", name())
			continue
		}
		if a.Parent != w.Parent {
			add("%s: parent %s, want %s", name(), a.Parent, w.Parent)
		}
		for _, s := range classParamMismatches(*a, w) {
			add("%s: %s", name(), s)
		}
	}
	for _, a := range actual.Classes {
		if _, ok := wm[a.Handle]; !ok {
			add("class %s%s: unexpected", a.Handle, labelText(a.Labels))
		}
	}
	type copies struct{ first, n int } // of a key in actual.Filters
	af := make(map[filterKey]copies, len(actual.Filters))
	for i, f := range actual.Filters {
		k := keyOf(f)
		c, ok := af[k]
		if !ok {
			c.first = i
		}
		c.n++
		af[k] = c
	}
	wf := make(map[filterKey]bool, len(desired.Filters))
	for _, w := range desired.Filters {
		k := keyOf(w)
		wf[k] = true
		name := func() string { return fmt.Sprintf("filter %s %s%s", w.Prefix, w.Match, labelText(w.Labels)) }
		c := af[k]
		switch {
		case c.n == 0:
			add("%s: missing", name())
		case c.n > 1:
			add("%s: %d copies", name(), c.n)
		case actual.Filters[c.first].ClassID != w.ClassID:
			add("%s: class %s, want %s", name(), actual.Filters[c.first].ClassID, w.ClassID)
		case actual.Filters[c.first].Damaged:
			add("%s: damaged", name())
		}
	}
	for _, a := range actual.Filters {
		if !wf[keyOf(a)] {
			add("filter %s %s%s: unexpected", a.Prefix, a.Match, labelText(a.Labels))
		}
	}
	return m
}

func qdiscMismatches(actual, desired Tree) []string {
	a, w := actual.Root, desired.Root
	switch {
	case a == nil && w == nil:
		return nil
	case a == nil:
		return []string{fmt.Sprintf("qdisc %s %s on %s: missing", w.Kind, w.Handle, desired.Device)}
	case w == nil:
		return []string{fmt.Sprintf("qdisc %s %s on %s: unexpected", a.Kind, a.Handle, actual.Device)}
	}
	name := fmt.Sprintf("qdisc %s on %s", w.Handle, desired.Device)
	if !sameQdisc(*a, *w) {
		return []string{fmt.Sprintf("%s: %s %s, want %s %s", name, a.Kind, a.Handle, w.Kind, w.Handle)}
	}
	var m []string
	if a.SizeOverhead != w.SizeOverhead {
		m = append(m, fmt.Sprintf("%s: size table overhead %d, want %d", name, a.SizeOverhead, w.SizeOverhead))
	}
	if w.Kind != ShaperTBF && a.DefaultMinor != w.DefaultMinor {
		m = append(m, fmt.Sprintf("%s: default minor %x, want %x", name, a.DefaultMinor, w.DefaultMinor))
	}
	if w.Kind == ShaperTBF {
		switch {
		case a.TBF == nil && w.TBF == nil:
		case a.TBF == nil || w.TBF == nil:
			m = append(m, fmt.Sprintf("%s: tbf parameters missing", name))
		default:
			for _, s := range tbfMismatches(*a.TBF, *w.TBF) {
				m = append(m, name+": "+s)
			}
		}
	}
	return m
}

func tbfMismatches(a, w TBFParams) []string {
	var m []string
	add := func(format string, args ...any) { m = append(m, fmt.Sprintf(format, args...)) }
	if a.Rate.BytesPerSecond() != w.Rate.BytesPerSecond() {
		add("rate %s, want %s", a.Rate, w.Rate)
	}
	if a.Framing != w.Framing {
		add("framing %s, want %s", framingText(a.Framing), framingText(w.Framing))
	}
	if !bucketEqual(a.Rate, a.Framing, a.Burst, w.Burst) {
		add("burst %s, want %s", a.Burst, w.Burst)
	}
	if a.Limit != w.Limit {
		add("limit %s, want %s", a.Limit, w.Limit)
	}
	if a.PeakRate.BytesPerSecond() != w.PeakRate.BytesPerSecond() {
		add("peak rate %s, want %s", a.PeakRate, w.PeakRate)
	}
	if !bucketEqual(a.PeakRate, a.Framing, a.MTU, w.MTU) {
		add("mtu %s, want %s", a.MTU, w.MTU)
	}
	return m
}

// classParamMismatches lists what ClassParamsEqual compares, in words.
func classParamMismatches(a, w Class) []string {
	var m []string
	add := func(format string, args ...any) { m = append(m, fmt.Sprintf(format, args...)) }
	if a.Rate.BytesPerSecond() != w.Rate.BytesPerSecond() {
		add("rate %s, want %s", a.Rate, w.Rate)
	}
	if a.Framing != w.Framing {
		add("framing %s, want %s", framingText(a.Framing), framingText(w.Framing))
	}
	if a.Ceil.BytesPerSecond() != w.Ceil.BytesPerSecond() {
		add("ceil %s, want %s", a.Ceil, w.Ceil)
	}
	if a.Buffer != w.Buffer {
		add("buffer %d ticks (%s), want %d ticks (%s)", a.Buffer, ticksBytes(a.Rate, a.Buffer), w.Buffer, ticksBytes(w.Rate, w.Buffer))
	}
	if a.CBuffer != w.CBuffer {
		add("cbuffer %d ticks (%s), want %d ticks (%s)", a.CBuffer, ticksBytes(a.Ceil, a.CBuffer), w.CBuffer, ticksBytes(w.Ceil, w.CBuffer))
	}
	if a.Quantum != w.Quantum && !inner(a) && !inner(w) {
		add("quantum %d, want %d", a.Quantum, w.Quantum)
	}
	if a.Prio != w.Prio {
		add("prio %d, want %d", a.Prio, w.Prio)
	}
	if !LeafEqual(a.Leaf, w.Leaf) {
		add("leaf %s, want %s", leafText(a.Leaf), leafText(w.Leaf))
	}
	return m
}

// ticksBytes is the burst that ticks allow at rate, as tc prints it.
func ticksBytes(rate tbf.Rate, ticks uint32) tbf.Size {
	return tbf.Size(psched.XmitSize(rate.BytesPerSecond(), ticks))
}

// leafText formats a leaf as tc's options read: "fq_codel limit 1000 target 5ms".
func leafText(l *LeafQdisc) string {
	if l == nil {
		return "default"
	}
	s := l.Kind
	if l.Limit != 0 {
		s += fmt.Sprintf(" limit %d", l.Limit)
	}
	if l.Segment != 0 {
		s += fmt.Sprintf(" max_size %d", l.Segment)
	}
	if l.Flows != 0 {
		s += fmt.Sprintf(" flows %d", l.Flows)
	}
	if l.Quantum != 0 {
		s += fmt.Sprintf(" quantum %d", l.Quantum)
	}
	if l.Target != 0 {
		s += " target " + l.Target.String()
	}
	if l.Interval != 0 {
		s += " interval " + l.Interval.String()
	}
	if l.Diffserv != "" {
		s += " " + l.Diffserv
	}
	return s
}

// labelText is " (user alice)", " (tier gold)", " (default)", " (root)" or "".
func labelText(l Labels) string {
	switch {
	case l.User != "":
		return " (user " + l.User + ")"
	case l.Tier != "":
		return " (tier " + l.Tier + ")"
	case l.Kind != "":
		return " (" + l.Kind + ")"
	}
	return ""
}

// framingText formats a link framing as tc prints it: "overhead 34 mpu 64 linklayer atm".
func framingText(f psched.Framing) string {
	ll := "ethernet"
	if f.ATM {
		ll = "atm"
	}
	return fmt.Sprintf("overhead %d mpu %d linklayer %s", f.Overhead, f.MPU, ll)
}
