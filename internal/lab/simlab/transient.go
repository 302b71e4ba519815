package simlab

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/lab/smoothness"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/sim"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// transientLead is how long the simulation runs before the change: the
// measured download was started smoothness.Options' Warmup + Before (2.5 s)
// before it, so by the first measured window (1 s before the change) the
// initial bursts of both the kernel and the simulation are long spent.
const transientLead = 3 * time.Second

// transientPacket is the packet size of the ramp measurements: smoothness
// runs the sender with gso_max_segs 1, so every packet is one 1514-byte
// frame.
const transientPacket = 1514 * tbf.Byte

// rampWindow is one measured window with its prediction, rates in bits/s.
type rampWindow struct {
	Start, End          time.Duration // relative to the change
	Predicted, Measured float64
	// Uncertainty is how much the window's length may be off (half of
	// each counter read's Dump); above smoothness.MaxUncertainty the
	// window is left out of the errors (Uncertain).
	Uncertainty time.Duration
	Uncertain   bool
	// Tolerance is the error this window may have (windowTolerance).
	Tolerance float64
}

// Tolerances of the transient test. Measured (docs/simulator.md, four
// runs of the four ramps on the shared 2-core machine): the largest window
// error of a ramp was 0.13-0.72 Mbit/s, the mean error 0.05-0.09 Mbit/s;
// most windows were within one 1514-byte frame (0.12 Mbit/s per 100 ms
// window). The causes are ones the simulation cannot know: which side of
// a counter read a frame falls on (a frame or two at each end of a
// window), and when within its Dump each counter was read (the window's
// length is known to within Window.Uncertain, a rate error of up to
// rate*Uncertain/length: 0.5 Mbit/s for 1 ms at 50 Mbit/s). So a window
// may be off by tolFrames frames plus what its uncertainty makes of the
// rate, and the mean by about three times the worst mean measured:
const (
	// tolFrames is the frames per window a measurement may differ by.
	tolFrames = 4
	// tolMean is the bound on the mean window error, in bits/s (two
	// frames per 100 ms window).
	tolMean = 0.25e6
)

// windowTolerance is the error window w may have: tolFrames frames over
// its length plus what the uncertainty of its length makes of the rate.
func windowTolerance(w rampWindow) float64 {
	l := (w.End - w.Start).Seconds()
	return tolFrames*float64(transientPacket)*8/l + w.Predicted*w.Uncertainty.Seconds()/l
}

// problems returns the windows and figures of c beyond the tolerances.
func (c rampComparison) problems() []string {
	var out []string
	for _, w := range c.Windows {
		if w.Uncertain {
			continue
		}
		if e := math.Abs(w.Measured - w.Predicted); e > w.Tolerance {
			out = append(out, fmt.Sprintf("window at %v: measured %.2f Mbit/s, predicted %.2f (error %.2f > %.2f)",
				w.Start.Round(time.Millisecond), w.Measured/1e6, w.Predicted/1e6, e/1e6, w.Tolerance/1e6))
		}
	}
	if c.MeanErr > tolMean {
		out = append(out, fmt.Sprintf("mean window error %.2f Mbit/s > %.2f", c.MeanErr/1e6, tolMean/1e6))
	}
	return out
}

// rampComparison is a measured ramp against the packet-level prediction.
type rampComparison struct {
	Case    smoothness.Case
	Windows []rampWindow
	// MaxErr is the largest |measured - predicted| of a certain window, in
	// bits/s, at MaxErrAt; MeanErr the mean over the certain windows.
	// Relative figures divide by max(From, To).
	MaxErr, MeanErr float64
	MaxErrAt        time.Duration
	Scale           float64
	Skipped         int
}

// predictRamp replays r in sim.Run: the tree installed before the change,
// a backlogged source from transientLead before it, and every tree the
// ramp wrote at the moment it was written (the midpoint of the write). It
// integrates the prediction (1 ms windows) over each measured window.
func predictRamp(r smoothness.Result) (rampComparison, error) {
	cmp := rampComparison{Case: r.Case, Scale: float64(max(r.Case.From, r.Case.To))}
	if r.Installed == nil || len(r.Windows) == 0 {
		return cmp, fmt.Errorf("%s: no installed tree or no windows", r.Case)
	}
	tree := r.Installed
	src := tree.Root.Handle
	if tree.Root.Kind == model.ShaperHTB {
		src = 0
		for _, c := range tree.Classes {
			if c.Labels.User == smoothness.UserName {
				src = c.Handle
			}
		}
		if src == 0 {
			return cmp, fmt.Errorf("%s: no class for %s", r.Case, smoothness.UserName)
		}
	}
	var evs []sim.Event
	for i, s := range r.Steps {
		if s.Tree == nil {
			return cmp, fmt.Errorf("%s: step %d has no tree", r.Case, i)
		}
		evs = append(evs, sim.Event{At: transientLead + s.At, Tree: s.Tree})
	}
	end := r.Windows[len(r.Windows)-1].End
	s, err := sim.Run(tree, sim.RunOptions{
		Demand:     map[model.Handle]sim.Demand{src: sim.Max},
		Events:     evs,
		Duration:   transientLead + end + time.Millisecond,
		Window:     time.Millisecond,
		PacketSize: transientPacket,
	})
	if err != nil {
		return cmp, err
	}
	cs, ok := s.Class(src)
	if !ok {
		return cmp, fmt.Errorf("%s: no series for %s", r.Case, src)
	}
	var sum float64
	n := 0
	for _, w := range r.Windows {
		if w.Start < -transientLead+time.Second {
			continue
		}
		bits := cs.BitsBetween(s.Window, transientLead+w.Start, transientLead+w.End)
		rw := rampWindow{Start: w.Start, End: w.End, Predicted: bits / (w.End - w.Start).Seconds(), Measured: w.Rate,
			Uncertainty: w.Uncertain, Uncertain: w.Uncertain > smoothness.MaxUncertainty ||
				stepNear(r.Steps, w.Start) || stepNear(r.Steps, w.End)}
		rw.Tolerance = windowTolerance(rw)
		cmp.Windows = append(cmp.Windows, rw)
		if rw.Uncertain {
			cmp.Skipped++
			continue
		}
		e := math.Abs(rw.Measured - rw.Predicted)
		sum += e
		n++
		if e > cmp.MaxErr {
			cmp.MaxErr, cmp.MaxErrAt = e, w.Start
		}
	}
	if n > 0 {
		cmp.MeanErr = sum / float64(n)
	}
	return cmp, nil
}

// String is the comparison as a table: every window's predicted and
// measured rate and their difference, then the largest and mean error.
func (c rampComparison) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (shaperd ramp 2s, 250ms steps): packet-level prediction vs kernel counter, per window\n", c.Case)
	fmt.Fprintf(&b, "  %8s %10s %10s %9s\n", "start", "predicted", "measured", "error")
	for _, w := range c.Windows {
		mark := ""
		if w.Uncertain {
			mark = "  (uncertain, left out)"
		}
		fmt.Fprintf(&b, "  %8v %7.2f Mb %7.2f Mb %+6.2f Mb%s\n", w.Start.Round(time.Millisecond),
			w.Predicted/1e6, w.Measured/1e6, (w.Measured-w.Predicted)/1e6, mark)
	}
	fmt.Fprintf(&b, "  largest window error %.2f Mbit/s (%.1f%% of %s) at %v, mean %.2f Mbit/s (%.1f%%), %d windows left out",
		c.MaxErr/1e6, 100*c.MaxErr/c.Scale, tbf.Rate(c.Scale), c.MaxErrAt.Round(time.Millisecond),
		c.MeanErr/1e6, 100*c.MeanErr/c.Scale, c.Skipped)
	return b.String()
}

// boundarySlack is how close to a window boundary a step's write may end
// or start and still be counted on its side: a counter read (a whole
// Dump, a few ms) and a write interleave in the kernel in an order the
// timestamps cannot tell.
const boundarySlack = 15 * time.Millisecond

// stepNear reports whether one of steps was written within boundarySlack
// of the instant at (both relative to the change): the window on either
// side of at may then have the step's effect or not.
func stepNear(steps []smoothness.Step, at time.Duration) bool {
	for _, s := range steps {
		d := s.At - at
		if d < 0 {
			d = -d
		}
		if d <= s.Took/2+boundarySlack {
			return true
		}
	}
	return false
}
