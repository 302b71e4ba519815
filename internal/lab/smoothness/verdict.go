package smoothness

import (
	"fmt"
	"math"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Targets of a smooth rate change: a change must neither overshoot nor dip,
// must reach the new rate soon after its ramp, and must not release a burst.
const (
	// MaxFactor: no window above max(From, To) * MaxFactor.
	MaxFactor = 1.05
	// MinFactor: no window below min(From, To) * MinFactor once MinAfter
	// has passed since the change.
	MinFactor = 0.9
	// MinAfter is when the lower bound starts to apply.
	MinAfter = time.Second
	// SettleBand: a decrease has reached the new rate when every later
	// window is at most To * (1 + SettleBand), an increase when every
	// later window is at least To * (1 - SettleBand). (The other side is
	// the business of MaxFactor and MinFactor: a window below a lowered
	// rate says the download paused, one above a raised rate is a burst.)
	SettleBand = 0.05
	// SettleSlack: the new rate must be reached within ramp + SettleSlack.
	SettleSlack = 500 * time.Millisecond
)

// MaxUncertainty is the most a window's length may be uncertain by for
// Assess to judge it: 5 ms, 5% of a 100 ms window.
const MaxUncertainty = 5 * time.Millisecond

// sample is one reading of the shaper's byte counter: At (relative to the
// change) is the midpoint of the read, which took Took.
type sample struct {
	At    time.Duration
	Bytes uint64
	Took  time.Duration
}

// windowsOf turns consecutive samples into windows. A counter that went
// backwards (the object was re-created) gives a window of 0 bytes.
func windowsOf(ss []sample) []Window {
	var ws []Window
	for i := 1; i < len(ss); i++ {
		a, b := ss[i-1], ss[i]
		if b.At <= a.At {
			continue
		}
		var n uint64
		if b.Bytes >= a.Bytes {
			n = b.Bytes - a.Bytes
		}
		ws = append(ws, Window{Start: a.At, End: b.At, Bytes: n,
			Rate:      float64(n) * 8 / (b.At - a.At).Seconds(),
			Uncertain: (a.Took + b.Took) / 2})
	}
	return ws
}

// Assess computes the verdict of a change from its windows and the steps
// that were installed (sorted by At). Windows starting at or after 0 are
// after the change. Windows whose length is uncertain by more than
// MaxUncertainty (a slow counter read) are left out of Max, Min and Settle
// and counted in Skipped; Excess telescopes, so it uses every window.
// Excess integrates the installed rate: From until the first step, then
// each step's rate from its At.
func Assess(c Case, ws []Window, steps []Step) Verdict {
	v := Verdict{Settle: -1, Min: math.Inf(1)}
	var before float64
	var nBefore int
	settled, seen := true, false
	for i := len(ws) - 1; i >= 0; i-- {
		w := ws[i]
		if w.End <= 0 {
			before += w.Rate
			nBefore++
			continue
		}
		if w.Start < 0 {
			continue // straddles the change (does not happen with Run's alignment)
		}
		v.Excess += int64(w.Bytes) - int64(math.Round(installedBytes(c.From, steps, w.Start, w.End)))
		if w.Uncertain > MaxUncertainty {
			v.Skipped++
			continue
		}
		if !seen || w.Rate >= v.Max {
			v.Max, v.MaxAt, seen = w.Rate, w.Start, true
		}
		if w.Start >= MinAfter && w.Rate < v.Min {
			v.Min, v.MinAt = w.Rate, w.Start
		}
		if settled && reached(c, w.Rate) {
			v.Settle = w.End
		} else {
			settled = false
		}
	}
	if nBefore > 0 {
		v.Before = before / float64(nBefore)
	}
	if math.IsInf(v.Min, 1) {
		v.Min = 0
	}
	return v
}

// reached reports whether a window at rate has reached c.To (SettleBand).
func reached(c Case, rate float64) bool {
	to := float64(c.To)
	switch {
	case c.To < c.From:
		return rate <= to*(1+SettleBand)
	case c.To > c.From:
		return rate >= to*(1-SettleBand)
	}
	return math.Abs(rate-to) <= SettleBand*to
}

// installedBytes integrates the installed rate over [a, b] in bytes: from
// until steps[0].At, then each step's rate.
func installedBytes(from tbf.Rate, steps []Step, a, b time.Duration) float64 {
	var sum float64
	rate, t := from, a
	for _, s := range steps {
		if s.At > t {
			end := min(s.At, b)
			sum += float64(rate.BytesPerSecond()) * (end - t).Seconds()
			t = end
		}
		if t >= b {
			return sum
		}
		rate = s.Rate
	}
	return sum + float64(rate.BytesPerSecond())*(b-t).Seconds()
}

// Violations lists the targets v misses for case c with ramp duration
// ramp (0 for an at-once change is read as 0: settle within 0.5 s), one
// sentence each; none when every target holds.
func Violations(c Case, v Verdict, ramp time.Duration) []string {
	hi, lo := max(c.From, c.To), min(c.From, c.To)
	var out []string
	if lim := float64(hi) * MaxFactor; v.Max > lim {
		out = append(out, fmt.Sprintf("window at %v: %s above max(old, new)*%.2f = %s",
			v.MaxAt, bps(v.Max), MaxFactor, bps(lim)))
	}
	if lim := float64(lo) * MinFactor; v.Min < lim {
		out = append(out, fmt.Sprintf("window at %v: %s below min(old, new)*%.2f = %s after %v",
			v.MinAt, bps(v.Min), MinFactor, bps(lim), MinAfter))
	}
	if lim := ramp + SettleSlack; v.Settle < 0 || v.Settle > lim {
		got := "never"
		if v.Settle >= 0 {
			got = v.Settle.String()
		}
		out = append(out, fmt.Sprintf("reached %s (within %.0f%%): %s, want <= %v", c.To, SettleBand*100, got, lim))
	}
	return out
}

// bps formats bits/s as Mbit/s with one decimal ("52.4Mbit").
func bps(r float64) string { return fmt.Sprintf("%.1fMbit", r/1e6) }
