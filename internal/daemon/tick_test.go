package daemon

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// loopState reads the loop's counters and ticker-relevant state.
func loopState(t *testing.T, d *Daemon) (w workCounters, ramping bool, every time.Duration) {
	t.Helper()
	if err := d.call(context.Background(), func() {
		w, ramping, every = d.work, d.ramper.Active(), d.policyTickEvery()
	}); err != nil {
		t.Fatal(err)
	}
	return w, ramping, every
}

// Policy ticks with nothing changed evaluate nothing and touch neither the
// kernel nor the policy; the next wall-clock minute (schedules, quota
// periods) and a set-rate do evaluate.
func TestIdlePolicyTicksDoNoWork(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock() // 10:00:00 UTC
	d, c := runDaemon(t, k, clk, io.Discard, &recNotifier{})
	syncLoop(t, c)
	w0, _, _ := loopState(t, d)
	if w0.evaluations == 0 {
		t.Fatal("no evaluation at start")
	}
	writes, dumps := k.writeCount(), k.dumpCount()
	clk.Advance(t, 4*time.Second) // four policy ticks, no reconcile tick
	syncLoop(t, c)
	w1, _, _ := loopState(t, d)
	if w1.evaluations != w0.evaluations || w1.rampSteps != w0.rampSteps {
		t.Errorf("idle ticks worked: before %+v, after %+v", w0, w1)
	}
	if got := w1.idleTicks - w0.idleTicks; got != 4 {
		t.Errorf("idle ticks counted %d, want 4", got)
	}
	if k.writeCount() != writes || k.dumpCount() != dumps {
		t.Errorf("idle policy ticks wrote %d and dumped %d times", k.writeCount()-writes, k.dumpCount()-dumps)
	}
	clk.Advance(t, 56*time.Second) // 10:01:00, a schedule/period boundary
	syncLoop(t, c)
	dumps = k.dumpCount()
	w2, _, _ := loopState(t, d)
	if got := w2.evaluations - w1.evaluations; got != 1 {
		t.Errorf("evaluations in the minute up to 10:01:00: %d, want 1 (at the minute)", got)
	}
	rate := 3 * tbf.Mbit
	if _, err := c.SetRate(context.Background(), control.SetRateRequest{Target: "bob", Rate: rate, Ramp: control.DurationPtr(0)}); err != nil {
		t.Fatal(err)
	}
	w3, _, _ := loopState(t, d)
	if w3.evaluations != w2.evaluations || w3.userSteps != w2.userSteps+1 {
		t.Errorf("set-rate of one user: %d evaluations, %d single-user steps; want 0, 1",
			w3.evaluations-w2.evaluations, w3.userSteps-w2.userSteps)
	}
	if n := k.dumpCount() - dumps; n != 0 {
		t.Errorf("set-rate of one user dumped the kernel %d times", n)
	}
	// A tier's override takes a full evaluation.
	if _, err := c.SetRate(context.Background(), control.SetRateRequest{Target: "tier:gold", Rate: rate, Ramp: control.DurationPtr(0)}); err != nil {
		t.Fatal(err)
	}
	if w4, _, _ := loopState(t, d); w4.evaluations != w3.evaluations+1 {
		t.Errorf("set-rate of a tier: %d evaluations, want 1", w4.evaluations-w3.evaluations)
	}
	if got := userClass(t, d, k, "lan0/egress", "lan0", "alice").Ceil; got != rate {
		t.Errorf("alice's ceil after set-rate of her tier: %v, want %v", got, rate)
	}
	if got := userClass(t, d, k, "lan0/egress", "lan0", "bob").Ceil; got != rate {
		t.Errorf("bob's ceil after set-rate: %v, want %v", got, rate)
	}
}

// While a ramp runs the policy ticker steps every RampStep, moving only
// the ramping user's classes without evaluating the policy or dumping the
// kernel; afterwards it falls back to policy.interval.
func TestRampStepsEveryRampStepIncrementally(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, c := runDaemon(t, k, clk, io.Discard, &recNotifier{})
	syncLoop(t, c)
	rate := 10 * tbf.Mbit
	if _, err := c.SetRate(context.Background(), control.SetRateRequest{Target: "alice", Rate: rate, Ramp: control.DurationPtr(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	w0, ramping, every := loopState(t, d)
	if !ramping || every != RampStep {
		t.Fatalf("after a set-rate with a 2s ramp: ramping %v, tick every %v; want true, %v", ramping, every, RampStep)
	}
	prev := userClass(t, d, k, "lan0/egress", "lan0", "alice").Ceil
	if prev == rate {
		t.Fatal("a 2s ramp changed at once")
	}
	steps := 0
	for i := 0; i < 8; i++ {
		writes, dumps := k.writeCount(), k.dumpCount()
		clk.Advance(t, RampStep)
		syncLoop(t, c)
		cur := userClass(t, d, k, "lan0/egress", "lan0", "alice").Ceil
		if cur > prev {
			t.Errorf("step %d: ceil rose from %v to %v on the way down to %v", i, prev, cur, rate)
		}
		if cur != prev {
			steps++
		}
		prev = cur
		// alice has one class per interface: at most two writes a step.
		if n := k.writeCount() - writes; n > 2 {
			t.Errorf("step %d: %d kernel writes, want at most 2 (alice's classes)", i, n)
		}
		if n := k.dumpCount() - dumps; n != 0 {
			t.Errorf("step %d: %d kernel dumps, want none", i, n)
		}
	}
	if prev != rate {
		t.Errorf("after the 2s ramp alice's ceil is %v, want %v", prev, rate)
	}
	if steps < 7 {
		t.Errorf("the 2s ramp moved in %d steps, want about 8 (every %v)", steps, RampStep)
	}
	w1, ramping, every := loopState(t, d)
	if w1.evaluations != w0.evaluations {
		t.Errorf("ramp steps evaluated the policy %d times", w1.evaluations-w0.evaluations)
	}
	if w1.rampSteps-w0.rampSteps < 8 {
		t.Errorf("%d incremental ramp steps, want 8", w1.rampSteps-w0.rampSteps)
	}
	if ramping || every != time.Second {
		t.Errorf("after the ramp: ramping %v, tick every %v; want false, 1s", ramping, every)
	}
	// The patched desired trees are what a full build gives, and the kernel
	// holds them.
	var desired, full []model.Tree
	var devices []string
	_ = d.call(context.Background(), func() {
		for _, st := range d.ifaces {
			tr, err := model.Build(*st.targets(), st.ids.Clone())
			if err != nil {
				t.Errorf("%s: build: %v", st.key, err)
			}
			desired, full, devices = append(desired, *st.tree()), append(full, tr), append(devices, st.tree().Device)
		}
	})
	for i := range desired {
		if ch := model.Diff(full[i], desired[i]); len(ch) != 0 {
			t.Errorf("%s: patched desired tree differs from a full build: %v", devices[i], ch)
		}
		if m := model.Mismatches(k.tree(devices[i]), desired[i]); len(m) != 0 {
			t.Errorf("%s: kernel differs from desired: %v", devices[i], m)
		}
	}
	w2, _, _ := loopState(t, d)
	clk.Advance(t, 2*time.Second)
	syncLoop(t, c)
	w3, _, _ := loopState(t, d)
	if got := w3.idleTicks - w2.idleTicks; got != 2 {
		t.Errorf("idle ticks in 2s after the ramp: %d, want 2 (back to 1s ticks)", got)
	}
}
