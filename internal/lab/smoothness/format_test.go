package smoothness

import (
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// result builds a Result from synthetic samples, judged as Run judges.
func result(c Case, way Way, rate func(time.Duration) float64, steps []Step, extraAt time.Duration, extra uint64) Result {
	ws := windowsOf(synth(rate, extraAt, extra))
	return Result{Case: c, Way: way, Ramp: 2 * time.Second, Interval: 250 * ms, Phase: 250 * ms, Sample: 100 * ms,
		Windows: ws, Steps: steps, Verdict: Assess(c, ws, steps)}
}

func TestFormat(t *testing.T) {
	c := Case{Shaper: model.ShaperHTB, From: 50 * tbf.Mbit, To: 10 * tbf.Mbit}
	atOnce := func(at time.Duration) float64 {
		if at < 0 {
			return 50e6
		}
		return 10e6
	}
	cmp := Comparison{
		Shaperd: result(c, WayShaperd, ramp50to10, stairs(c.From, c.To, 8, 250*ms), 0, 0),
		Naive:   result(c, WayNaive, atOnce, []Step{{At: 0, Rate: c.To}}, 0, 200000),
	}
	var b strings.Builder
	if err := Format(&b, []Comparison{cmp}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"HTB 50mbit->10mbit  (ramp 2s, policy tick 250ms, first tick 250ms after the change)",
		"targets: max <= 52.5Mbit, min from 1s >= 9.0Mbit, new rate reached (within 5%) by 2.5s",
		"shaperd  50.0Mbit @0.0s",
		"2.10s",
		"ok\n",
		"naive    26.0Mbit @0.0s", // 10 Mbit + 200000 B in the first window
		"+195.3KiB",
		"shaperd  50 50 50 50 50 |50 50 48 45 45 40",
		"naive    50 50 50 50 50 |26 10 10",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "1 missed") != 0 || strings.Count(out, "ok") != 2 {
		t.Errorf("both ways meet the targets here:\n%s", out)
	}
}

func TestDisturbed(t *testing.T) {
	c := Case{Shaper: model.ShaperHTB, From: 50 * tbf.Mbit, To: 10 * tbf.Mbit}
	good := result(c, WayShaperd, ramp50to10, stairs(c.From, c.To, 8, 250*ms), 0, 0)
	if d := Disturbed(good); d != "" {
		t.Fatalf("clean measurement disturbed: %s", d)
	}
	notSaturated := result(c, WayShaperd, func(at time.Duration) float64 { return ramp50to10(at) * 0.9 }, good.Steps, 0, 0)
	stalled := good
	stalled.Windows = append([]Window(nil), good.Windows...)
	stalled.Windows[20].End += 80 * ms
	slowWrite := good
	slowWrite.Steps = append([]Step(nil), good.Steps...)
	slowWrite.Steps[3].Took = 30 * ms
	late := good
	late.Steps = append([]Step(nil), good.Steps...)
	late.Steps[7].At = 2200 * ms
	uncertain := good
	uncertain.Verdict.Skipped = 30
	for name, tc := range map[string]struct {
		r    Result
		want string
	}{
		"not saturated": {notSaturated, "not saturated"},
		"stalled":       {stalled, "sampler stalled"},
		"slow write":    {slowWrite, "to write"},
		"late tick":     {late, "policy ticks late"},
		"uncertain":     {uncertain, "slow counter reads"},
	} {
		if d := Disturbed(tc.r); !strings.Contains(d, tc.want) {
			t.Errorf("%s: Disturbed %q, want it to contain %q", name, d, tc.want)
		}
	}
}
