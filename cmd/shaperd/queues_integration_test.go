package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// queuesHead is the daemon, policy and interface of the per-queue tests:
// per-queue trees on a 4-queue lan device, 40mbit, the policy tick every
// second, no ramps.
const queuesHead = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
metrics = "` + metricsAddr + `"
reconcile_interval = "2s"

[policy]
interval = "1s"
ramp = "0s"
timezone = "UTC"

[[interface]]
name = "r-lan"
bandwidth = "40mbit"
queues = "auto"
`

// queuesConfig: tier "agg" has a 20mbit aggregate ceil, tier "free" none
// (its users may use the interface).
const queuesConfig = queuesHead + `
[tiers.agg]
rate = "250kbit"
ceil = "40mbit"
aggregate_rate = "5mbit"
aggregate_ceil = "20mbit"

[tiers.free]
rate = "250kbit"
ceil = "40mbit"
`

// queueUsers puts lab users 0 and 1 in tier agg and 2 and 3 in free.
func queueUsers(lab *netnslab.RouterLab) string {
	var b strings.Builder
	for i, a := range lab.Users4 {
		tier := "agg"
		if i >= 2 {
			tier = "free"
		}
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = %q\naddresses = [%q, %q]\n", i, tier, a, lab.Users6[i])
	}
	return b.String()
}

// The daemon started as the unit runs it keeps the interface bandwidth and
// a tier's aggregate ceil across per-queue trees (its policy tick
// rebalances the queues' and the tier's shares): one user busy alone gets
// the whole tier (within 5 %) or the whole interface, users busy on
// several queues together stay within the tier's ceil and the interface's
// bandwidth (within 3 %, and use at least 90 % of it), once the split has
// followed the demand.
func TestQueuesHoldInterfaceAndTier(t *testing.T) {
	u := newUnitLabBefore(t, 4, queuesConfig, queueUsers, nil, unitEdit{lanQueues: 4})
	queue := map[int]int{}
	for i, a := range u.Users4 {
		c := u.classOf("r-lan", a)
		queue[model.QueueOf(c.Handle)]++
		t.Logf("u%d: class %s under %s", i, c.Handle, c.Parent)
	}
	if len(queue) != 4 {
		t.Fatalf("4 users on %d of 4 queues; the test needs one per queue\n%s", len(queue), u.mustCtl("status"))
	}
	sum := func(x []float64) float64 {
		s := 0.0
		for _, v := range x {
			s += v
		}
		return s
	}
	for _, c := range []struct {
		name  string
		users []int
		want  tbf.Rate
		alone bool // the users should get want (within 5%), else at most want +3%
	}{
		{"one agg user alone gets the tier's aggregate", []int{0}, 20 * tbf.Mbit, true},
		{"two agg users on two queues share the tier's aggregate", []int{0, 1}, 20 * tbf.Mbit, false},
		{"one free user alone gets the interface", []int{2}, 40 * tbf.Mbit, true},
		{"all four users on four queues share the interface", []int{0, 1, 2, 3}, 40 * tbf.Mbit, false},
	} {
		var flows []netnslab.Flow
		var handles []model.Handle
		for _, i := range c.users {
			flows = append(flows, netnslab.Flow{User: u.Users4[i], Dir: netnslab.Download})
			handles = append(handles, u.classOf("r-lan", u.Users4[i]).Handle)
		}
		want := float64(c.want)
		ok := func(x []float64) bool {
			if c.alone {
				return sum(x) >= want*0.95 && sum(x) <= want*1.03
			}
			return sum(x) <= want*1.03 && sum(x) >= want*0.9
		}
		// The flows run 12 s; the users' classes are measured (link-layer
		// bytes) over 5 s after the policy ticks (1 s) have moved the
		// shares to the busy queues and TCP has recovered from starting
		// in an idle queue (at its floor, behind a 1000-packet pfifo).
		done := make(chan []float64, 1)
		go func() { done <- u.Measure(t, 11, flows...) }()
		time.Sleep(5 * time.Second)
		got := classRates(t, u, "r-lan", 5*time.Second, handles...)
		goodput := <-done
		t.Logf("%s: classes %v Mbit/s, total %.2f (want %.2f); iperf3 %v", c.name, mbitOf(got), sum(got)/1e6, want/1e6, mbitOf(goodput))
		if !ok(got) {
			t.Errorf("%s: total %.2f Mbit/s, want %.2f (%s)\n%s", c.name, sum(got)/1e6, want/1e6,
				map[bool]string{true: "-5%..+3%", false: "-10%..+3%"}[c.alone], u.mustCtl("status"))
		}
	}
}

// mbitOf formats rates in Mbit/s.
func mbitOf(x []float64) []string {
	out := make([]string, len(x))
	for i, v := range x {
		out[i] = fmt.Sprintf("%.2f", v/1e6)
	}
	return out
}
