package daemon

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
)

// A long first apply asks for more start-up time every startExtend/2 and
// feeds the watchdog between runs; once ready it only feeds the watchdog.
func TestApplyProgressExtendsStartTimeout(t *testing.T) {
	clk := newFakeClock()
	d, _ := newTestDaemon(t, newFakeKernel("lan0"), clk, "")
	n := &recNotifier{}
	d.notify, d.opts.Watchdog = n, 10*time.Second
	extend := fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", startExtend.Microseconds())

	d.applyProgress() // the first run of the apply
	for range 8 {     // 8 runs, 5 s apart: 35 s after the first
		clk.Advance(t, 5*time.Second)
		d.applyProgress()
	}
	// Extended at 15 s and 30 s.
	if got := n.count(extend); got != 2 {
		t.Errorf("%d %s in %q, want 2", got, extend, n.states)
	}
	if got := n.count("WATCHDOG=1"); got != 9 {
		t.Errorf("%d WATCHDOG=1 over 35 s of runs with a 10 s watchdog, want 9 (the first run, then every run 5 s after the last ping)", got)
	}

	d.ready = true
	before := n.count(extend)
	clk.Advance(t, time.Minute)
	d.applyProgress()
	if got := n.count(extend); got != before {
		t.Errorf("ready daemon extended its start timeout: %q", n.states)
	}
}

// A status asked while a long apply runs (a whole tree rebuilt) is
// answered between two of its runs of writes, without waiting for the
// apply's end and without using the kernel the apply holds.
func TestStatusAnsweredDuringALongApply(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, c := runDaemon(t, k, clk, io.Discard, &recNotifier{})
	syncLoop(t, c)
	k.mutate("lan0", func(tr *model.Tree) { tr.Classes = tr.Classes[:len(tr.Classes)-1] })

	answered := make(chan *control.Status, 1)
	var runs int
	var during bool
	k.onApply = func() { // the apply: runs of writes until status is answered
		k.onApply = nil
		go func() {
			st, err := c.Status(t.Context())
			if err != nil {
				t.Errorf("status during the apply: %v", err)
			}
			answered <- st
		}()
		dumps := k.dumpCount()
		for runs = 1; runs <= 300; runs++ {
			d.applyProgress()
			if len(answered) > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		during = len(answered) > 0
		if k.dumpCount() != dumps {
			t.Errorf("status read counters (%d dumps) while the apply held the kernel", k.dumpCount()-dumps)
		}
	}
	w := k.writeCount()
	clk.Advance(t, 5*time.Minute) // the full reconcile repairs the drift
	syncLoop(t, c)
	if k.writeCount() == w {
		t.Fatal("the full reconcile did not repair the drift")
	}
	if !during {
		t.Fatalf("status was not answered during %d runs of the apply", runs)
	}
	select {
	case st := <-answered:
		if st == nil || len(st.Users) == 0 {
			t.Fatalf("status during the apply has no users: %+v", st)
		}
		t.Logf("answered after %d runs of the apply", runs)
	default:
		t.Fatal("status was not answered")
	}
}
