package smoothness

import (
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Way is how the rate change is made.
type Way string

// Ways of changing the rate.
const (
	// WayShaperd ramps through policy.Ramper and applies every step on the
	// daemon's path (Build, Dump, Diff, Apply, Verify).
	WayShaperd Way = "shaperd"
	// WayNaive makes one tc change to the new rate: `tc class change` with
	// tc's default burst (HTB), `tc qdisc change` with the configured
	// burst and the limit Build would give (TBF; tc's tbf has no default
	// burst).
	WayNaive Way = "naive"
)

// Case is one measured change.
type Case struct {
	// Shaper is HTB (one user class under the root class) or TBF (the root
	// qdisc shapes the whole link).
	Shaper model.ShaperKind
	// From and To are the rates before and after the change (the user's
	// rate = ceil, or the TBF rate).
	From, To tbf.Rate
	// Burst is the TBF interface's configured burst in bytes (0: shaperd's
	// default, tbf.RecommendedBurst of the rate). Ignored for HTB, where
	// the user's tier has the default burst.
	Burst tbf.Size
}

// String names the case, e.g. "HTB 50mbit->10mbit" or "TBF 10mbit->50mbit burst 256kb".
func (c Case) String() string {
	s := fmt.Sprintf("%s %s->%s", kindName(c.Shaper), c.From, c.To)
	if c.Shaper == model.ShaperTBF && c.Burst != 0 {
		s += " burst " + c.Burst.String()
	}
	return s
}

// kindName is the shaper kind in capitals ("HTB").
func kindName(k model.ShaperKind) string {
	if k == model.ShaperTBF {
		return "TBF"
	}
	return "HTB"
}

// Window is one sampling interval at the shaper's exit. Start and End are
// relative to the change: to the counter sample taken just before the change
// was requested (the request follows it within a few ms), so windows start
// at 0, 100 ms, ... and those before the change end at or before 0. Rate is
// Bytes*8/(End-Start) in bits/s.
//
// Uncertain is how much the window's length may be off: half the duration
// of each of its two counter reads (the counter is read at some moment of a
// whole kernel Dump; At is the Dump's midpoint).
type Window struct {
	Start, End time.Duration
	Bytes      uint64
	Rate       float64
	Uncertain  time.Duration
}

// Step is one kernel write of the change that altered the shaper: when it
// took effect (relative to the change, as Window) and what it installed. Burst is the TBF burst (0 for HTB,
// where kept tokens make the burst irrelevant to the released bytes).
type Step struct {
	At    time.Duration
	Rate  tbf.Rate
	Burst tbf.Size
	// Took is how long the write took (netlink Apply, or the tc process);
	// At lies in it (see Run).
	Took time.Duration
	// Tree is the whole tree the step wrote (the shaperd way; nil for
	// the naive way's tc command), for replaying the change in a
	// simulator.
	Tree *model.Tree
}

// Verdict holds the figures a smooth rate change is judged by, computed from the
// windows that start at or after the change.
type Verdict struct {
	// Max is the highest window rate after the change (bits/s) and MaxAt
	// the start of that window. Target: Max <= max(From, To) * 1.05.
	Max   float64
	MaxAt time.Duration
	// Min is the lowest rate of the windows starting at least 1 s after
	// the change. Target: Min >= min(From, To) * 0.9.
	Min   float64
	MinAt time.Duration
	// Settle is the end of the first window from which every later window
	// has reached To within 5% (SettleBand: at most To*1.05 after a
	// decrease, at least To*0.95 after an increase); -1 when the last
	// window has not. Target: Settle <= ramp + 0.5 s.
	Settle time.Duration
	// Excess is the bytes that left after the change beyond the installed
	// rates (the Steps, each from its At), i.e. the bursts that changes
	// granted; negative when the shaper was not kept busy.
	Excess int64
	// Before is the mean rate of the windows before the change (bits/s):
	// the saturation check (it should be From).
	Before float64
	// Skipped is the number of windows after the change left out of Max,
	// Min and Settle because their length was uncertain (MaxUncertainty).
	Skipped int
}

// Result is one measurement.
type Result struct {
	Case Case
	Way  Way
	// Ramp, Interval and Phase are the ramp duration, policy tick and
	// first tick of the shaperd way (measured: the daemon's own ticker
	// runs free, as in service, so Phase falls anywhere in one Interval) (both ways are judged against Ramp +
	// SettleSlack); Sample is the sampling period.
	Ramp, Interval, Phase, Sample time.Duration
	Windows                       []Window
	// Installed is the tree installed at From before the download
	// started (the shaperd way's Build; the naive way starts there too).
	Installed *model.Tree
	Steps     []Step
	Verdict   Verdict
	// SampleLatency is the slowest counter read (a whole kernel Dump; no
	// cheaper per-object stats read exists in pkg/kernel).
	SampleLatency time.Duration
	// Mismatches are kernel.Verify's complaints after shaperd's writes (the
	// daemon logs them and carries on; the next Diff repeats the write).
	Mismatches []string
}
