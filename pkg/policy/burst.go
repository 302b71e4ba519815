package policy

import (
	"math/bits"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// Burst rules for ramp steps.
//
// HTB keeps a class's tokens (and ctokens) when the class is changed: they
// are nanoseconds of transmission at the class's rate, capped at the buffer
// (burst/rate) at the next charge. So when the burst *time* stays constant,
// the saved tokens scale with the rate by themselves: a class cut from 100 to
// 10 Mbit/s with a 5 ms burst keeps at most 5 ms of sending, i.e. 6250 B at
// the new rate. Each step's burst is therefore StepBurst (the default burst,
// tbf.RecommendedBurst, is 5 ms of rate; a configured burst keeps its time at
// the target rate), and on a decrease it is capped at new_rate*smooth_window
// (SmoothCap). Raising a buffer later grants nothing (tokens are kept), so
// the step after a capped one simply installs the uncapped burst.
//
// TBF refills its bucket to the full new burst on every change (tbf_change
// sets tokens = buffer). A saturated TBF therefore releases a whole burst at
// every change: a ramp of N steps would release N bursts on top of its rate.
// The rule: the steps of a TBF ramp before its last one share a budget of one
// burst B of the target (TBFBudget), each step's burst is at least one
// full-size frame (model.MaxFrame, 1514 B, so no packet is dropped as larger
// than max_size), and a step that the budget cannot pay at least one frame
// for is not made (the rate holds; when the budget affords fewer changes
// than there are steps, TBFBudget.Due spreads them evenly over the ramp). The last step
// installs the target with its full burst B, exactly as an at-once change
// would. So a ramp releases at most one configured burst more than an
// at-once change (which releases B): in [Start, End) at most ∫rate + B bytes
// leave (TestTBFRampBudget proves it with the kernel arithmetic of pkg/tbf).
// A TBF ramp cannot grant less than that and end with the configured burst:
// the change that installs B refills to B whatever came before.

// StepBurst is the burst of a ramp step at rate towards a target with
// (configured) burst targetBurst at targetRate: with targetBurst 0 (the
// default) tbf.RecommendedBurst(rate); otherwise targetBurst scaled by
// rate/targetRate (the same burst time), at least model.MaxFrame. At rate ==
// targetRate it is exactly targetBurst (or the default). A configured
// burst is never above tbf.MaxBurst(rate), the most an HTB class at rate
// can hold, so every step builds.
func StepBurst(rate tbf.Rate, targetBurst tbf.Size, targetRate tbf.Rate) tbf.Size {
	if targetBurst == 0 {
		return tbf.RecommendedBurst(rate)
	}
	if rate == targetRate || targetRate == 0 {
		return min(targetBurst, tbf.MaxBurst(rate))
	}
	return min(max(mulDiv(uint64(targetBurst), uint64(rate), uint64(targetRate)), model.MaxFrame), tbf.MaxBurst(rate))
}

// SmoothCap caps burst at rate*window bytes (the bytes rate sends in
// window), but not below model.MaxFrame; window <= 0 leaves burst as it is.
func SmoothCap(burst tbf.Size, rate tbf.Rate, window time.Duration) tbf.Size {
	if window <= 0 {
		return burst
	}
	c := max(mulDiv(rate.BytesPerSecond(), uint64(window), psched.NanosPerSecond), model.MaxFrame)
	return min(burst, c)
}

// mulDiv returns a*b/c rounded down, saturating at MaxUint64 (c > 0).
func mulDiv(a, b, c uint64) tbf.Size {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return tbf.Size(^uint64(0))
	}
	q, _ := bits.Div64(hi, lo, c)
	return tbf.Size(q)
}

// TBFBudget is the burst the intermediate steps of one TBF ramp may still
// grant: Total (one target burst) less Spent.
type TBFBudget struct {
	Total, Spent tbf.Size
}

// Remaining is Total - Spent (0 when overspent).
func (b *TBFBudget) Remaining() tbf.Size {
	if b.Spent >= b.Total {
		return 0
	}
	return b.Total - b.Spent
}

// Take pays for one intermediate step that wants burst want, with stepsLeft
// steps (this one included, at least 1) still to come before the ramp ends.
// It grants min(want, Remaining/stepsLeft), at least model.MaxFrame, and
// reports false (granting nothing) when less than one frame remains.
func (b *TBFBudget) Take(want tbf.Size, stepsLeft int) (tbf.Size, bool) {
	rem := b.Remaining()
	if rem < model.MaxFrame {
		return 0, false
	}
	share := rem / tbf.Size(max(stepsLeft, 1))
	g := min(max(min(want, share), model.MaxFrame), rem)
	b.Spent += g
	return g, true
}

// Due reports whether an intermediate step should change the TBF now,
// given stepsLeft steps until the ramp ends (this one included) and the
// time since the ramp's last change (or its start). When the budget pays
// for a frame-sized burst at every remaining step, every step is due;
// otherwise the affordable changes are spread evenly: one every
// ceil(stepsLeft/affordable) intervals, so a long ramp with a small burst
// moves in fewer, evenly spaced stairs instead of spending its budget at
// the start and then standing still.
func (b *TBFBudget) Due(stepsLeft int, sinceLast, interval time.Duration) bool {
	affordable := int(min(b.Remaining()/model.MaxFrame, tbf.Size(1<<31)))
	switch {
	case affordable == 0:
		return false
	case affordable >= stepsLeft:
		return true
	}
	stride := (stepsLeft + affordable - 1) / affordable
	return sinceLast >= time.Duration(stride)*interval-interval/2
}
