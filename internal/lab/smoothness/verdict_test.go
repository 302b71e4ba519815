package smoothness

import (
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

const ms = time.Millisecond

// synth builds samples every 100 ms from -1 s to +3.5 s of a counter that
// grows at rate(t) bits/s (integrated in 1 ms slices), plus extra bytes at
// extraAt.
func synth(rate func(time.Duration) float64, extraAt time.Duration, extra uint64) []sample {
	var ss []sample
	var bytes float64
	for at := -time.Second; at <= 3500*ms; at += ms {
		if at%(100*ms) == 0 {
			ss = append(ss, sample{At: at, Bytes: uint64(bytes), Took: ms})
		}
		if at == extraAt {
			bytes += float64(extra)
		}
		bytes += rate(at) / 8 / 1000
	}
	return ss
}

// ramp50to10 is a linear 2 s ramp from 50 to 10 Mbit in 250 ms stairs.
func ramp50to10(at time.Duration) float64 {
	switch {
	case at < 250*ms:
		return 50e6
	case at >= 2*time.Second:
		return 10e6
	}
	return 50e6 - 5e6*float64(at/(250*ms))
}

func stairs(from, to tbf.Rate, n int, every time.Duration) []Step {
	var s []Step
	for i := 1; i <= n; i++ {
		s = append(s, Step{At: time.Duration(i) * every, Rate: from - (from-to)*tbf.Rate(i)/tbf.Rate(n)})
	}
	return s
}

func TestWindowsOf(t *testing.T) {
	ws := windowsOf([]sample{{At: 0, Bytes: 100, Took: 2 * ms}, {At: 100 * ms, Bytes: 1350, Took: 4 * ms}, {At: 150 * ms, Bytes: 10, Took: ms}})
	if len(ws) != 2 {
		t.Fatalf("windows %+v", ws)
	}
	if w := ws[0]; w.Bytes != 1250 || w.Rate != 100000 || w.Uncertain != 3*ms {
		t.Errorf("first window %+v, want 1250 bytes, 100 kbit/s, 3ms uncertain", w)
	}
	if w := ws[1]; w.Bytes != 0 || w.Rate != 0 {
		t.Errorf("a counter that went backwards gives %+v, want 0 bytes", w)
	}
}

func TestAssessSmoothRamp(t *testing.T) {
	c := Case{Shaper: model.ShaperHTB, From: 50 * tbf.Mbit, To: 10 * tbf.Mbit}
	v := Assess(c, windowsOf(synth(ramp50to10, 0, 0)), stairs(c.From, c.To, 8, 250*ms))
	if v.Before < 50e6-10 || v.Before > 50e6+10 {
		t.Errorf("before %v, want 50e6", v.Before)
	}
	if v.Max < 50e6-10 || v.Max > 50e6+10 || v.MaxAt != 0 {
		t.Errorf("max %v at %v, want 50e6 at 0 (the first window with it)", v.Max, v.MaxAt)
	}
	if v.Min < 10e6-100 || v.Min > 10e6+100 || v.MinAt < 2*time.Second {
		t.Errorf("min %v at %v, want 10e6 from 2s on", v.Min, v.MinAt)
	}
	if v.Settle != 2100*ms {
		t.Errorf("settle %v, want 2.1s", v.Settle)
	}
	// The synthetic windows follow the stairs exactly: nothing released
	// beyond them, up to the per-window truncation to whole bytes.
	if v.Excess < -50 || v.Excess > 50 {
		t.Errorf("excess %d, want about 0", v.Excess)
	}
	if got := Violations(c, v, 2*time.Second); len(got) != 0 {
		t.Errorf("violations %q, want none", got)
	}
}

func TestAssessBurst(t *testing.T) {
	// An at-once change from 10 to 50 Mbit at 0 that refills a 256 KiB
	// bucket: the first window carries the burst.
	c := Case{Shaper: model.ShaperTBF, From: 10 * tbf.Mbit, To: 50 * tbf.Mbit, Burst: 256 * tbf.Kibibyte}
	rate := func(at time.Duration) float64 {
		if at < 0 {
			return 10e6
		}
		return 50e6
	}
	v := Assess(c, windowsOf(synth(rate, 0, 262144)), []Step{{At: 0, Rate: 50 * tbf.Mbit, Burst: c.Burst}})
	if v.Excess < 262144-50 || v.Excess > 262144+50 {
		t.Errorf("excess %d, want the burst 262144", v.Excess)
	}
	if want := 50e6 + 262144*8/0.1; v.Max < want-100 || v.Max > want+100 || v.MaxAt != 0 {
		t.Errorf("max %v at %v, want %v at 0", v.Max, v.MaxAt, want)
	}
	if v.Settle != 100*ms {
		t.Errorf("settle %v, want 100ms (an increase has reached the new rate in the burst window)", v.Settle)
	}
	got := Violations(c, v, 2*time.Second)
	if len(got) != 1 || !strings.Contains(got[0], "above max(old, new)*1.05 = 52.5Mbit") {
		t.Errorf("violations %q, want only the maximum", got)
	}
}

func TestAssessSkipsUncertainWindows(t *testing.T) {
	c := Case{Shaper: model.ShaperHTB, From: 50 * tbf.Mbit, To: 10 * tbf.Mbit}
	ss := synth(ramp50to10, 0, 0)
	// A slow read at 2.5 s makes its two windows uncertain; move its
	// bytes so that those windows would miss both bounds.
	for i := range ss {
		if ss[i].At == 2500*ms {
			ss[i].Took = 40 * ms
			ss[i].Bytes -= 120000
		}
	}
	v := Assess(c, windowsOf(ss), stairs(c.From, c.To, 8, 250*ms))
	if v.Skipped != 2 {
		t.Errorf("skipped %d, want 2", v.Skipped)
	}
	if v.Min < 10e6-100 || v.Max > 50e6+100 || v.Settle != 2100*ms {
		t.Errorf("verdict %+v judged uncertain windows", v)
	}
}

func TestViolations(t *testing.T) {
	c := Case{Shaper: model.ShaperHTB, From: 10 * tbf.Mbit, To: 50 * tbf.Mbit}
	got := Violations(c, Verdict{Max: 53e6, Min: 8.9e6, Settle: -1}, 2*time.Second)
	want := []string{"53.0Mbit above max(old, new)*1.05 = 52.5Mbit", "8.9Mbit below min(old, new)*0.90 = 9.0Mbit", "never"}
	if len(got) != len(want) {
		t.Fatalf("violations %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("violation %d: %q, want it to contain %q", i, got[i], want[i])
		}
	}
	if got := Violations(c, Verdict{Max: 52.5e6, Min: 9e6, Settle: 2500 * ms}, 2*time.Second); len(got) != 0 {
		t.Errorf("at the limits: %q, want none", got)
	}
	if got := Violations(c, Verdict{Max: 50e6, Min: 50e6, Settle: 2501 * ms}, 2*time.Second); len(got) != 1 {
		t.Errorf("settled 1ms late: %q, want one violation", got)
	}
}

func TestReached(t *testing.T) {
	down := Case{From: 50 * tbf.Mbit, To: 10 * tbf.Mbit}
	up := Case{From: 10 * tbf.Mbit, To: 50 * tbf.Mbit}
	same := Case{From: 10 * tbf.Mbit, To: 10 * tbf.Mbit}
	for _, tc := range []struct {
		c    Case
		rate float64
		want bool
	}{
		{down, 10.5e6, true}, {down, 10.6e6, false}, {down, 5e6, true},
		{up, 47.5e6, true}, {up, 47.4e6, false}, {up, 70e6, true},
		{same, 9.5e6, true}, {same, 10.5e6, true}, {same, 9.4e6, false}, {same, 10.6e6, false},
	} {
		if got := reached(tc.c, tc.rate); got != tc.want {
			t.Errorf("%s->%s at %v: reached %v, want %v", tc.c.From, tc.c.To, tc.rate, got, tc.want)
		}
	}
}

func TestInstalledBytes(t *testing.T) {
	steps := []Step{{At: 50 * ms, Rate: 20 * tbf.Mbit}, {At: 150 * ms, Rate: 40 * tbf.Mbit}}
	cases := []struct {
		a, b time.Duration
		want float64
	}{
		{0, 50 * ms, 10e6 / 8 * 0.05},                   // before the first step: From
		{0, 100 * ms, 10e6/8*0.05 + 20e6/8*0.05},        // across the first step
		{100 * ms, 300 * ms, 20e6/8*0.05 + 40e6/8*0.15}, // across the second
		{200 * ms, 300 * ms, 40e6 / 8 * 0.1},            // after the last
		{-100 * ms, 200 * ms, 10e6/8*0.15 + 20e6/8*0.1 + 40e6/8*0.05},
	}
	for _, tc := range cases {
		if got := installedBytes(10*tbf.Mbit, steps, tc.a, tc.b); got < tc.want-1e-6 || got > tc.want+1e-6 {
			t.Errorf("[%v, %v]: %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
