package simlab

import (
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/internal/lab/smoothness"
)

// TestTransientRamp measures shaperd's 2 s set-rate ramps (250 ms policy
// ticks, every step written on the daemon's path by smoothness.Run) with
// a saturating 4-stream iperf3 download and compares the per-100 ms series
// of the shaper's byte counter with sim.Run's replay of the same writes,
// for the four reference ramps (smoothness.RequirementCases: HTB 50->10
// and 10->50mbit, TBF the same with a 256 KiB burst, which every step
// refills). Every window
// must be within windowTolerance and the mean error within tolMean (see
// there for why). A measurement disturbed by the shared machine
// (smoothness.Disturbed) or one that misses a bound is repeated; two
// misses, or three attempts without an undisturbed one, fail.
//
// The ramp is the daemon's own (daemonlab: set-rate through its control
// API, steps on its free-running policy ticker), so a step may be written
// at a window boundary: a step written while the counter is being read
// falls on either side of it, and a TBF step releases a refilled 256 KiB
// burst (+-12 Mbit/s in the two windows around it). Windows with a step
// that close to a boundary are left out (predictRamp).
func TestTransientRamp(t *testing.T) {
	netnslab.Require(t)
	lab := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: 1})
	for _, c := range smoothness.RequirementCases(smoothness.DefaultTBFBurst) {
		t.Run(strings.ReplaceAll(c.String(), " ", "_"), func(t *testing.T) {
			misses := 0
			for attempt := 1; attempt <= 3; attempt++ {
				r, err := smoothness.Run(lab, netnslab.StartServer(t, lab.LAN, lab.Users4[0]), c, smoothness.WayShaperd, smoothness.Options{Clock: smoothness.RealClock{}})
				if err != nil {
					t.Fatal(err)
				}
				if d := smoothness.Disturbed(r); d != "" {
					t.Logf("attempt %d disturbed, repeating: %s", attempt, d)
					continue
				}
				cmp, err := predictRamp(r)
				if err != nil {
					t.Fatal(err)
				}
				t.Log(cmp.String())
				p := cmp.problems()
				if len(p) == 0 {
					return
				}
				t.Logf("attempt %d missed:\n  %s", attempt, strings.Join(p, "\n  "))
				if misses++; misses == 2 {
					t.Fatalf("%s: prediction missed twice:\n%s", c, strings.Join(p, "\n"))
				}
			}
			t.Fatalf("%s: no undisturbed measurement in 3 attempts", c)
		})
	}
}
