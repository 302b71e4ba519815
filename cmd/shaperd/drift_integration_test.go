package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestDriftRepairedByEvents: with the reconcile tick at 5 minutes, a class
// changed by hand and a filter deleted by hand are repaired from the
// kernel's traffic-control notifications alone. It reports the repair
// latency (p50, p99 of 20 changes, measured by polling the kernel every
// 5 ms); the bound asserted is 2 s, far below the tick.
func TestDriftRepairedByEvents(t *testing.T) {
	cfg := strings.Replace(daemonConfig, `reconcile_interval = "1s"`, `reconcile_interval = "5m"`, 1)
	u := newUnitLab(t, 3, u32Config(cfg), labUsers) // deletes a u32 priority by hand
	u0 := u.Users4[0]
	var took []time.Duration
	for i := range 20 {
		c := u.classOf("r-lan", u0)
		start := time.Now()
		u.Router.MustRun("tc", "class", "change", "dev", "r-lan", "parent", c.Parent.String(), "classid", c.Handle.String(),
			"htb", "rate", "1mbit", "ceil", "1mbit")
		for u.classOf("r-lan", u0).Rate != 10*tbf.Mbit {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("change %d: not repaired within 2 s (the tick is 5 min)\n%s", i, tail(u.Logs.String(), 2000))
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("drift repair latency after `tc class change` (includes tc's own ~10 ms): p50 %v, p99 %v, max %v",
		took[len(took)/2], took[len(took)*99/100], took[len(took)-1])

	u.Router.MustRun("tc", "filter", "del", "dev", "r-lan", "parent", "1:", "pref", "100", "protocol", "ip")
	waitFor(t, 2*time.Second, "IPv4 filters repaired by the event", func() bool {
		tr, err := u.k.Dump("r-lan")
		return err == nil && len(tr.Filters) == 2*len(u.Users4)
	})
	if n := u.metric("shaperd_tc_events_total"); n < 21 {
		t.Errorf("shaperd_tc_events_total = %v, want at least 21", n)
	}
}
