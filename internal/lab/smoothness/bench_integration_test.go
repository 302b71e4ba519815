package smoothness

import (
	"os"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Environment of TestBenchSmooth (scripts/bench-smooth.sh sets them).
const (
	// BenchEnv=1 runs the benchmark; without it the test skips.
	BenchEnv = "SHAPERD_SMOOTH_BENCH"
	// BenchBurstEnv is the TBF burst (tc units, "default" for shaperd's
	// default); default DefaultTBFBurst.
	BenchBurstEnv = "SHAPERD_SMOOTH_TBF_BURST"
	// BenchIntervalEnv is the policy tick (Go duration); default
	// DefaultInterval.
	BenchIntervalEnv = "SHAPERD_SMOOTH_INTERVAL"
)

// TestBenchSmooth measures the four reference changes both ways, shaperd then
// naive, each repeated (up to 3 attempts) while Disturbed, and prints them
// side by side (Format) on standard output. It asserts nothing about the
// figures: TestSmoothRamps does.
func TestBenchSmooth(t *testing.T) {
	if os.Getenv(BenchEnv) != "1" {
		t.Skipf("set %s=1 to run (scripts/bench-smooth.sh)", BenchEnv)
	}
	netnslab.Require(t)
	burst := DefaultTBFBurst
	if s := os.Getenv(BenchBurstEnv); s == "default" {
		burst = 0
	} else if s != "" {
		var err error
		if burst, err = tbf.ParseSize(s); err != nil {
			t.Fatalf("%s: %v", BenchBurstEnv, err)
		}
	}
	o := Options{Clock: RealClock{}}
	if s := os.Getenv(BenchIntervalEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s: %v", BenchIntervalEnv, err)
		}
		o.Interval = d
	}
	lab := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: 1})
	measure := func(c Case, way Way) Result {
		var r Result
		for attempt := 1; attempt <= 3; attempt++ {
			var err error
			if r, err = Run(lab, netnslab.StartServer(t, lab.LAN, lab.Users4[0]), c, way, o); err != nil {
				t.Fatal(err)
			}
			d := Disturbed(r)
			if d == "" {
				break
			}
			t.Logf("%s (%s) attempt %d disturbed: %s", c, way, attempt, d)
		}
		return r
	}
	var cs []Comparison
	for _, c := range RequirementCases(burst) {
		cs = append(cs, Comparison{Shaperd: measure(c, WayShaperd), Naive: measure(c, WayNaive)})
	}
	if err := Format(os.Stdout, cs); err != nil {
		t.Fatal(err)
	}
}
