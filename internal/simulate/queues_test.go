package simulate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/sim"
)

// queues = 4 on the download: the simulator solves the four queue trees with
// the split the policy loop's rebalancing settles on; the interface still
// delivers (at most) its bandwidth, and the table shows the split.
func TestSimulateQueues(t *testing.T) {
	plan := loadPlan(t)
	plan.Interfaces[0].Queues = 4
	sp, err := ParseSpec(DefaultSpec)
	if err != nil {
		t.Fatal(err)
	}
	when, err := ParseAt("2026-12-04 18:30", time.Time{}, plan.Policy.Location)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Simulate(plan, sp, when, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	down := rep.Interfaces[0]
	if len(down.Queues) != 4 {
		t.Fatalf("download: %d queues, want 4", len(down.Queues))
	}
	var ceils float64
	for _, q := range down.Queues {
		ceils += q.Ceil
	}
	if ceils > 100*mbit || down.Rate > 100*mbit*1.0001 || down.Rate < 95*mbit {
		t.Errorf("download with 4 queues: rate %.2f mbit, ceils %.2f mbit; want within 100mbit and at least 95", down.Rate/mbit, ceils/mbit)
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "htb x4 queues") || !strings.Contains(b.String(), "queues after rebalancing") {
		t.Errorf("table does not show the queues:\n%s", b.String())
	}
	t.Log(b.String())
}
