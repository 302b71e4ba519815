package smoothness

import (
	"fmt"
	"math"
	"time"
)

// Limits beyond which a measurement says more about the shared machine than
// about the shaper (Disturbed).
const (
	// MaxSkipped is the largest fraction of the windows after the change
	// that Assess may leave out for slow counter reads (MaxUncertainty);
	// under load a whole Dump often takes 10-30 ms.
	MaxSkipped = 0.5
	// MaxWriteLatency is the slowest acceptable kernel write of shaperd's
	// steps (a netlink Apply takes well under 1 ms).
	MaxWriteLatency = 20 * time.Millisecond
	// BeforeBand: the rate before the change must be From within this
	// fraction, or the download did not saturate the shaper.
	BeforeBand = 0.05
)

// Disturbed returns why r cannot be trusted, or "" when it can: the
// download did not saturate the shaper before the change, more than the
// fraction MaxSkipped of the windows after it had slow counter reads, a write was slow, a window is not about one sampling period long (the
// sampler was late: the process stalled), or a policy tick came late.
func Disturbed(r Result) string {
	sample := r.Sample
	from := float64(r.Case.From)
	if math.Abs(r.Verdict.Before-from) > BeforeBand*from {
		return fmt.Sprintf("rate before the change %s, want %s within %.0f%% (not saturated or disturbed)",
			bps(r.Verdict.Before), r.Case.From, BeforeBand*100)
	}
	after := 0
	for _, w := range r.Windows {
		if w.Start >= 0 {
			after++
		}
	}
	if float64(r.Verdict.Skipped) > MaxSkipped*float64(after) {
		return fmt.Sprintf("%d of %d windows uncertain by more than %v (slow counter reads, slowest %v)",
			r.Verdict.Skipped, after, MaxUncertainty, r.SampleLatency.Round(time.Millisecond))
	}
	for _, w := range r.Windows {
		if d := w.End - w.Start; d < sample/2 || d > sample*3/2 {
			return fmt.Sprintf("window at %v lasted %v, want about %v (sampler stalled)",
				w.Start.Round(time.Millisecond), d.Round(time.Millisecond), sample)
		}
	}
	if r.Way != WayShaperd {
		return ""
	}
	for i, s := range r.Steps {
		if s.Took > MaxWriteLatency {
			return fmt.Sprintf("step %d (%s) took %v to write (limit %v)", i, s.Rate, s.Took.Round(time.Millisecond), MaxWriteLatency)
		}
	}
	// The first tick at or after the ramp's end is the last step.
	due := r.Ramp
	if r.Phase < r.Ramp && r.Interval > 0 {
		due = r.Phase + (r.Ramp-r.Phase+r.Interval-1)/r.Interval*r.Interval
	}
	if n := len(r.Steps); n > 0 && r.Steps[n-1].At > due+MaxWriteLatency {
		return fmt.Sprintf("last step at %v, want by %v (policy ticks late)", r.Steps[n-1].At.Round(time.Millisecond), due+MaxWriteLatency)
	}
	return ""
}
