package daemon

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Classes added at run time come after the sorted ones, and a removed
// user's place is taken by the last class: each finds every class's own
// counters, and the view updated chunk by chunk (appended, removed)
// holds what a fresh copy of the classes holds.
func TestSnapshotCountersByHandleAndViewUpdates(t *testing.T) {
	class := func(minor uint16, user string) model.Class {
		return model.Class{Handle: model.MakeHandle(1, minor), Labels: model.Labels{Kind: "user", User: user}}
	}
	var classes []model.Class
	for m := uint16(10); m < 10+600; m++ {
		classes = append(classes, class(m, "u"+string(rune('a'+m%26))))
	}
	v := newClassView(classes)
	// Add two at the end (one with a lower handle), remove two in the middle.
	for _, c := range []model.Class{class(5, "early"), class(700, "late")} {
		classes = append(classes, c)
		v = v.appended(c)
	}
	for _, i := range []int{3, 300} {
		last := len(classes) - 1
		classes[i] = classes[last]
		classes = classes[:last]
		v = v.removed(i)
	}
	fresh := newClassView(classes)
	if v.len() != fresh.len() {
		t.Fatalf("view of %d classes, a fresh one %d", v.len(), fresh.len())
	}
	for i := 0; i < v.len(); i++ {
		if *v.at(i) != *fresh.at(i) {
			t.Fatalf("row %d: %+v, fresh %+v", i, *v.at(i), *fresh.at(i))
		}
	}
	s := &ifaceSnapshot{classes: v}
	for _, c := range classes {
		s.counters = append(s.counters, classCounters{handle: c.Handle, stats: model.Stats{Bytes: uint64(c.Handle.Minor())}})
	}
	slicesSortCounters(s.counters)
	n := 0
	s.each(func(l model.Labels, rate, ceil uint64, st *model.Stats, _ tbf.Rate) {
		n++
		if st == nil {
			t.Errorf("user %s without its counters", l.User)
		}
	})
	if n != len(classes) {
		t.Errorf("each reported %d classes, want %d", n, len(classes))
	}
}

// slicesSortCounters sorts counters by handle, as a dump gives them.
func slicesSortCounters(cs []classCounters) {
	slices.SortFunc(cs, func(a, b classCounters) int { return cmp.Compare(a.handle, b.handle) })
}

func TestQueueDelay(t *testing.T) {
	for _, c := range []struct {
		backlog                uint32
		throughput, rate, ceil tbf.Rate
		want                   time.Duration
	}{
		{0, 10 * tbf.Mbit, tbf.Mbit, 10 * tbf.Mbit, 0},                            // an empty queue
		{125_000, 10 * tbf.Mbit, tbf.Mbit, 10 * tbf.Mbit, 100 * time.Millisecond}, // 1 Mbit at its throughput
		{125_000, 0, 2 * tbf.Mbit, 10 * tbf.Mbit, 500 * time.Millisecond},         // idle until now: at its rate
		{125_000, 40 * tbf.Mbit, tbf.Mbit, 20 * tbf.Mbit, 50 * time.Millisecond},  // never faster than its ceil
		{125_000, 0, 0, 0, 0},       // no rate at all
		{62_500, 0, 0, tbf.Mbit, 0}, // no rate, nothing measured
	} {
		if got := queueDelay(c.backlog, c.throughput, c.rate, c.ceil); got != c.want {
			t.Errorf("queueDelay(%d B, throughput %v, rate %v, ceil %v) = %v, want %v", c.backlog, c.throughput, c.rate, c.ceil, got, c.want)
		}
	}
}
