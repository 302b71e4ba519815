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
// number of kernel writes, the missed targets ("ok" when none, each missed
// one on a line below; windows not judged for a slow counter read are
// counted; Verify's complaints after shaperd's writes, the first one
// quoted) and then, one line per way, the window rates in
// Mbit/s from SeriesFrom on, rounded, with '|' at the change.
func Format(w io.Writer, cs []Comparison) error {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString("\n")
		}
		k := c.Shaperd.Case
		hi, lo := max(k.From, k.To), min(k.From, k.To)
		fmt.Fprintf(&b, "%s  (ramp %v, policy tick %v, first tick %v after the change)\n", k, c.Shaperd.Ramp, c.Shaperd.Interval, c.Shaperd.Phase)
		fmt.Fprintf(&b, "  targets: max <= %s, min from %v >= %s, new rate reached (within %.0f%%) by %v\n",
			bps(float64(hi)*MaxFactor), MinAfter, bps(float64(lo)*MinFactor), SettleBand*100, c.Shaperd.Ramp+SettleSlack)
		fmt.Fprintf(&b, "  %-8s %-17s %-17s %-9s %-11s %-7s %s\n", "way", "max window", "min from 1s", "reached", "excess", "writes", "targets")
		for _, r := range []Result{c.Shaperd, c.Naive} {
			v := r.Verdict
			miss := Violations(r.Case, v, r.Ramp)
			verdict := "ok"
			if len(miss) > 0 {
				verdict = fmt.Sprintf("%d missed", len(miss))
			}
			if v.Skipped > 0 {
				verdict += fmt.Sprintf(" (%d uncertain windows not judged)", v.Skipped)
			}
			if d := Disturbed(r); d != "" {
				verdict += " (disturbed: " + d + ")"
			}
			fmt.Fprintf(&b, "  %-8s %-17s %-17s %-9s %-11s %-7d %s\n", r.Way,
				fmt.Sprintf("%s @%.1fs", bps(v.Max), v.MaxAt.Seconds()),
				fmt.Sprintf("%s @%.1fs", bps(v.Min), v.MinAt.Seconds()),
				settled(v.Settle), kb(v.Excess), len(r.Steps), verdict)
			for _, m := range miss {
				fmt.Fprintf(&b, "           missed: %s\n", m)
			}
			if n := len(r.Mismatches); n > 0 {
				fmt.Fprintf(&b, "           verify after %d of the writes: %s\n", n, r.Mismatches[0])
			}
		}
		fmt.Fprintf(&b, "  Mbit/s per %v from %v ('|': the change):\n", c.Shaperd.Sample, SeriesFrom)
		for _, r := range []Result{c.Shaperd, c.Naive} {
			fmt.Fprintf(&b, "  %-8s %s\n", r.Way, series(r.Windows))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
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
