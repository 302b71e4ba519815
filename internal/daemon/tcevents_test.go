package daemon

import (
	"io"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// A traffic-control change by another program is repaired tcSettle after
// its event, without waiting for the reconcile tick; events of devices
// shaperd does not manage change nothing; an overrun reconciles every
// interface.
func TestTCEventRepairsBeforeTheTick(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, c := runDaemon(t, k, clk, io.Discard, &recNotifier{})
	syncLoop(t, c)
	intact := func() bool {
		var desired model.Tree
		syncLoop(t, c)
		_ = d.call(t.Context(), func() { desired = *d.ifaces[0].tree() })
		return len(model.Mismatches(k.tree("lan0"), desired)) == 0
	}
	for _, ev := range []kernel.TCEvent{{Device: "lan0", Ifindex: 2}, {Overrun: true}} {
		k.mutate("lan0", func(tr *model.Tree) { tr.Classes = tr.Classes[:len(tr.Classes)-1] })
		k.tc <- kernel.TCEvent{Device: "eth9", Ifindex: 9} // not managed: ignored
		clk.Advance(t, time.Second)
		if intact() {
			t.Fatal("an event of an unmanaged device repaired lan0")
		}
		k.tc <- ev
		syncLoop(t, c)
		clk.Advance(t, tcSettle)
		if !intact() {
			t.Errorf("event %+v: lan0 not repaired %v after it (the reconcile tick is 5s)", ev, tcSettle)
		}
	}
	if n := counterValue(t, d.stats.tcEvents); n != 2 {
		t.Errorf("shaperd_tc_events_total = %v, want 2", n)
	}
}

// TestEventsOfAPassAreDrained: an event the kernel sends while a full pass
// applies (as for an IFB shaperd brings up) is taken before the pass's
// verify, whose dump covers it, and causes no second pass.
func TestEventsOfAPassAreDrained(t *testing.T) {
	k := newFakeKernel("lan0")
	k.tc = make(chan kernel.TCEvent, 4) // the loop is busy applying: only the drain can take it
	clk := newFakeClock()
	d, c := runDaemon(t, k, clk, io.Discard, &recNotifier{})
	syncLoop(t, c)
	k.mutate("lan0", func(tr *model.Tree) { tr.Classes = tr.Classes[:len(tr.Classes)-1] })
	k.onApply = func() {
		k.onApply = nil
		k.tc <- kernel.TCEvent{Device: "lan0", Ifindex: 2}
	}
	w := k.writeCount()
	clk.Advance(t, 5*time.Minute) // the full reconcile repairs the drift
	var pending bool
	_ = d.call(t.Context(), func() { pending = len(d.events.dirty) > 0 || d.events.settle != nil })
	if k.writeCount() == w {
		t.Fatal("the full reconcile did not repair the drift")
	}
	if pending || len(k.tc) > 0 {
		t.Errorf("the event of the apply is pending (dirty or settle %v, %d in the channel): a second pass would follow", pending, len(k.tc))
	}
}
