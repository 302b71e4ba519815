package main

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// The queue delay status shows (DELAY, queue_delay: the class's backlog
// over the rate it drains at) is the time a packet waits in the user's
// queue: under a saturating download, with the default settings and the
// daemon run as the unit runs it, its median over the load matches the
// median round trip of pings from the wan host to the user (whose echo
// requests wait in the same queue, the replies going back through the
// idle upload) less the idle round trip, within 20 % or 3 ms plus one
// full-size frame's time at the ceiling, for the cheapest tier and a
// faster one. The frame: the backlog is whole frames (6.2 ms each at
// 2 Mbit/s), a sample sees it at one instant and a ping also waits for the
// frame on the wire, so at 2 Mbit/s the medians of 30 samples and of 120
// pings were measured up to 7.4 ms apart (25.0 vs 32.4 ms).
func TestQueueDelayMatchesPing(t *testing.T) {
	ceils := []int{2, 20}
	config := fmt.Sprintf(sweepConfig, 1, "", sweepTiers(ceils))
	start := time.Now()
	u := newUnitLab(t, len(ceils), config, sweepUsers(ceils))
	t.Logf("lab and daemon up after %v", time.Since(start).Round(time.Millisecond))
	lab := u.RouterLab
	idle := make([]time.Duration, len(ceils))
	for i, a := range lab.Users4 {
		rtts := pingRTTs(t, lab.WAN, a, 20)
		if len(rtts) == 0 {
			t.FailNow()
		}
		idle[i] = rtts[len(rtts)/2]
	}
	servers := make([]*netnslab.Server, len(ceils))
	for i, a := range lab.Users4 {
		servers[i] = netnslab.StartServer(t, lab.LAN, a)
	}
	var wg sync.WaitGroup
	rates := make([]float64, len(ceils))
	errs := make([]error, len(ceils))
	pings := make([][]time.Duration, len(ceils))
	for i := range ceils {
		wg.Add(2)
		go func() {
			defer wg.Done()
			rates[i], errs[i] = netnslab.RunClient(lab.WAN, lab.WAN4, servers[i], netnslab.ClientOptions{Seconds: 6})
		}()
		go func() {
			defer wg.Done()
			time.Sleep(2500 * time.Millisecond) // past TCP's start: the queue is full
			pings[i] = pingRTTs(t, lab.WAN, lab.Users4[i], 120)
		}()
	}
	// `top --once --json` every 100 ms while the pings run (from 2.5 s for
	// 3 s): top asks for fresh counters (status shows the last reconcile's).
	time.Sleep(2500 * time.Millisecond)
	delays := make([][]time.Duration, len(ceils))
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var top struct {
			Users []control.UserStatus `json:"users"`
		}
		if err := jsonout.Decode([]byte(u.mustCtl("top", "--once", "--json")), &top); err != nil {
			t.Fatalf("shaperctl top --once --json: %v", err)
		}
		for _, us := range top.Users {
			for i := range ceils {
				if us.Name == fmt.Sprintf("u%d", ceils[i]) && us.Direction == "download" {
					delays[i] = append(delays[i], us.QueueDelay.Std())
				}
			}
		}
	}
	wg.Wait()
	t.Logf("load done after %v", time.Since(start).Round(time.Millisecond))
	for i, c := range ceils {
		if errs[i] != nil {
			t.Fatalf("download to u%d: %v", c, errs[i])
		}
		// The load is there: a queue delay of an idle user proves nothing.
		if mbit := rates[i] / 1e6; mbit < 0.9*float64(c)*1448/1514 {
			t.Errorf("u%d (ceil %dmbit): goodput %.2f Mbit/s, want the class saturated", c, c, mbit)
		}
		if len(pings[i]) == 0 || len(delays[i]) < 5 {
			t.Fatalf("u%d: %d pings, %d status samples", c, len(pings[i]), len(delays[i]))
		}
		slices.Sort(delays[i])
		got := delays[i][len(delays[i])/2]
		want := pings[i][len(pings[i])/2] - idle[i]
		t.Logf("u%d (ceil %dmbit, %.2f Mbit/s): queue delay median %v (samples %v); ping median %v - idle %v = %v",
			c, c, rates[i]/1e6, got.Round(100*time.Microsecond), delays[i], pings[i][len(pings[i])/2].Round(100*time.Microsecond), idle[i], want.Round(100*time.Microsecond))
		if want < 5*time.Millisecond {
			t.Errorf("u%d: the pings waited %v in the queue: no standing queue to measure", c, want)
		}
		frame := time.Duration(1514 * 8 * float64(time.Second) / (float64(c) * 1e6))
		if diff := (got - want).Abs(); diff > max(3*time.Millisecond, want/5)+frame {
			t.Errorf("u%d: queue delay median %v, ping's %v: off by %v, want within 20%% or 3ms plus one frame (%v)", c, got, want, diff, frame)
		}
	}
}
