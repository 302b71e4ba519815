package smoothness

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Comparison is one case measured both ways.
type Comparison struct {
	Shaperd, Naive Result
}

// SeriesFrom is where Format's per-window series start, relative to the
// change.
const SeriesFrom = -500 * time.Millisecond

// Format writes cs side by side, one block per case: the targets, then for
// each way the highest window, the lowest window from 1 s on, the settling
// time, the excess bytes (bursts released above the installed rates), the
// missed targets ("ok" when none) and, on a second line, the window rates
// in Mbit/s from SeriesFrom on, rounded, with '|' at the change.
func Format(w io.Writer, cs []Comparison) error {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString("\n")
		}
		k := c.Shaperd.Case
		hi, lo := max(k.From, k.To), min(k.From, k.To)
		fmt.Fprintf(&b, "%s  (ramp %v, policy tick %v)\n", k, c.Shaperd.Ramp, c.Shaperd.Interval)
		fmt.Fprintf(&b, "  targets: max <= %s, min from %v >= %s, settled within %.0f%% by %v\n",
			bps(float64(hi)*MaxFactor), MinAfter, bps(float64(lo)*MinFactor), SettleBand*100, c.Shaperd.Ramp+SettleSlack)
		fmt.Fprintf(&b, "  %-8s %-17s %-17s %-9s %-10s %s\n", "way", "max window", "min from 1s", "settled", "excess", "targets")
		for _, r := range []Result{c.Shaperd, c.Naive} {
			v := r.Verdict
			miss := Violations(r.Case, v, r.Ramp)
			verdict := "ok"
			if len(miss) > 0 {
				verdict = fmt.Sprintf("%d missed", len(miss))
			}
			if d := Disturbed(r); d != "" {
				verdict += " (disturbed: " + d + ")"
			}
			fmt.Fprintf(&b, "  %-8s %-17s %-17s %-9s %-10s %s\n", r.Way,
				fmt.Sprintf("%s @%.1fs", bps(v.Max), v.MaxAt.Seconds()),
				fmt.Sprintf("%s @%.1fs", bps(v.Min), v.MinAt.Seconds()),
				settled(v.Settle), kb(v.Excess), verdict)
		}
		for _, r := range []Result{c.Shaperd, c.Naive} {
			fmt.Fprintf(&b, "  %-8s %s\n", r.Way, series(r.Windows))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rampOf is the ramp a result is judged by: its ramp for shaperd, 0 for
// an at-once change (which must settle within SettleSlack... of the ramp
// the issue gives: both ways are judged by the same ramp + 0.5 s).
func rampOf(r Result) time.Duration { return r.Ramp }

// sampleOf is the sampling period of r's windows (the median length).
func sampleOf(r Result) time.Duration {
	if len(r.Windows) == 0 {
		return 0
	}
	w := r.Windows[len(r.Windows)/2]
	return (w.End - w.Start).Round(10 * time.Millisecond)
}

// settled formats a settling time ("2.10s", "never").
func settled(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// kb formats bytes as signed KiB ("+256.0KiB").
func kb(n int64) string { return fmt.Sprintf("%+.1fKiB", float64(n)/1024) }

// series formats the window rates from SeriesFrom on, in whole Mbit/s,
// with '|' before the first window after the change.
func series(ws []Window) string {
	var parts []string
	marked := false
	for _, w := range ws {
		if w.Start < SeriesFrom-10*time.Millisecond {
			continue
		}
		s := fmt.Sprintf("%d", int(math.Round(w.Rate/1e6)))
		if !marked && w.Start >= 0 {
			s, marked = "|"+s, true
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}
