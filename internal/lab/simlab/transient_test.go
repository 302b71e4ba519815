package simlab

import (
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/smoothness"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// tbfAt is a TBF root at rate with a 125000-byte burst.
func tbfAt(rate tbf.Rate) *model.Tree {
	return &model.Tree{Device: "lan0", Root: &model.Qdisc{Kind: model.ShaperTBF, Handle: model.RootQdisc,
		TBF: &model.TBFParams{Rate: rate, Burst: 125000, Limit: 1 << 20}}}
}

// syntheticRamp is a measurement of a TBF changed from 10 to 20mbit at
// 250 ms whose windows are what the kernel does by hand: 10 Mbit/s before,
// then in the window at 200 ms 50 ms at 10mbit, the refilled 125000-byte
// bucket (1 Mbit) and 50 ms at 20mbit, 25 Mbit/s in all; 20 Mbit/s after.
func syntheticRamp() smoothness.Result {
	r := smoothness.Result{
		Case:      smoothness.Case{Shaper: model.ShaperTBF, From: 10 * tbf.Mbit, To: 20 * tbf.Mbit, Burst: 125000},
		Installed: tbfAt(10 * tbf.Mbit),
		Steps:     []smoothness.Step{{At: 250 * time.Millisecond, Rate: 20 * tbf.Mbit, Tree: tbfAt(20 * tbf.Mbit)}},
	}
	for i := -10; i < 10; i++ {
		w := smoothness.Window{Start: time.Duration(i) * 100 * time.Millisecond, End: time.Duration(i+1) * 100 * time.Millisecond,
			Rate: 10e6, Uncertain: time.Millisecond / 2}
		switch {
		case i == 2:
			w.Rate = 25e6
		case i > 2:
			w.Rate = 20e6
		}
		r.Windows = append(r.Windows, w)
	}
	return r
}

// TestPredictRampReplaysSteps: predictRamp puts the installed tree, the
// backlogged source and the step at the measured times, so the hand-derived
// series matches within a frame per window (the refill lands in the window
// at 200 ms), and a window 2 Mbit/s off is reported.
func TestPredictRampReplaysSteps(t *testing.T) {
	r := syntheticRamp()
	cmp, err := predictRamp(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmp.Windows) != 20 {
		t.Fatalf("%d windows compared, want 20", len(cmp.Windows))
	}
	if frame := float64(transientPacket) * 8 / 0.1; cmp.MaxErr > frame {
		t.Errorf("largest error %.3f Mbit/s at %v, want at most one frame per window (%.3f):\n%s",
			cmp.MaxErr/1e6, cmp.MaxErrAt, frame/1e6, cmp)
	}
	if p := cmp.problems(); len(p) > 0 {
		t.Errorf("problems in a series that matches: %s", strings.Join(p, "; "))
	}

	r.Windows[13].Rate += 2e6 // the window at 300 ms
	cmp, err = predictRamp(r)
	if err != nil {
		t.Fatal(err)
	}
	if p := cmp.problems(); len(p) != 1 || !strings.Contains(p[0], "window at 300ms") {
		t.Errorf("problems %q, want the window at 300ms only", p)
	}
}
