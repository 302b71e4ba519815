package daemon

import (
	"fmt"
	"testing"
	"time"
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
