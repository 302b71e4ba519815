package model_test

import (
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestRebalanceOneBusyQueueGetsNearlyAll(t *testing.T) {
	bw := 100 * tbf.Mbit
	prev := model.EvenQueueTargets(bw, 4) // 25mbit each
	// Queue 2 sends at its ceil, the others nothing.
	got := model.RebalanceQueues(bw, prev, []tbf.Rate{0, 0, 25 * tbf.Mbit, 0})
	if s := sumCeil(got); s != bw {
		t.Fatalf("ceils add up to %s, want %s", s, bw)
	}
	if got[2].Ceil < bw*95/100 {
		t.Errorf("busy queue gets %s of %s, want at least 95%%", got[2].Ceil, bw)
	}
	if got[2].Rate != got[2].Ceil {
		t.Errorf("rate %s != ceil %s", got[2].Rate, got[2].Ceil)
	}
}

func TestRebalanceAllBusyShareEqually(t *testing.T) {
	bw := 100 * tbf.Mbit
	prev := []model.QueueTarget{{Rate: 97 * tbf.Mbit, Ceil: 97 * tbf.Mbit}, {Rate: tbf.Mbit, Ceil: tbf.Mbit}, {Rate: tbf.Mbit, Ceil: tbf.Mbit}, {Rate: tbf.Mbit, Ceil: tbf.Mbit}}
	// Every queue sends at its ceil: all saturated.
	got := model.RebalanceQueues(bw, prev, []tbf.Rate{97 * tbf.Mbit, tbf.Mbit, tbf.Mbit, tbf.Mbit})
	for q, g := range got {
		if g.Ceil < bw/4-4 || g.Ceil > bw/4+4 {
			t.Errorf("queue %d: ceil %s, want %s", q, g.Ceil, bw/4)
		}
	}
	if s := sumCeil(got); s != bw {
		t.Errorf("ceils add up to %s, want %s", s, bw)
	}
}

func TestRebalanceIdleSplitsEvenlyAndLightQueueKeepsHeadroom(t *testing.T) {
	bw := 100 * tbf.Mbit
	got := model.RebalanceQueues(bw, nil, []tbf.Rate{0, 0})
	if got[0].Ceil != bw/2 || got[1].Ceil != bw/2 {
		t.Errorf("idle: %v, want an even split", got)
	}
	// Queue 0 is saturated, queue 1 uses 10mbit of its 50: it keeps
	// 12.5mbit (headroom), queue 0 gets the rest.
	got = model.RebalanceQueues(bw, got, []tbf.Rate{50 * tbf.Mbit, 10 * tbf.Mbit})
	if got[1].Ceil != 12500*tbf.Kbit || got[0].Ceil != bw-12500*tbf.Kbit {
		t.Errorf("saturated + light: %v, want 87.5mbit and 12.5mbit", got)
	}
}

func TestRebalanceHysteresisKeepsPrev(t *testing.T) {
	bw := 100 * tbf.Mbit
	prev := model.RebalanceQueues(bw, nil, []tbf.Rate{100 * tbf.Mbit, 0})
	again := model.RebalanceQueues(bw, prev, []tbf.Rate{prev[0].Ceil, 0})
	if &again[0] != &prev[0] {
		t.Errorf("a steady state produced a new split %v (prev %v)", again, prev)
	}
}

// A step-by-step run: queue 1 turns busy while queue 0 holds nearly all;
// within two ticks both have half, and the sum never exceeds the bandwidth.
func TestRebalanceConverges(t *testing.T) {
	bw := 100 * tbf.Mbit
	qs := model.RebalanceQueues(bw, nil, []tbf.Rate{50 * tbf.Mbit, 0})
	for tick := 0; tick < 3; tick++ {
		// Both queues send all they are allowed.
		qs = model.RebalanceQueues(bw, qs, []tbf.Rate{qs[0].Ceil, qs[1].Ceil})
		if s := sumCeil(qs); s > bw {
			t.Fatalf("tick %d: sum %s above %s", tick, s, bw)
		}
	}
	if qs[0].Ceil != bw/2 || qs[1].Ceil != bw/2 {
		t.Errorf("after 3 ticks: %v, want halves", qs)
	}
}

// sumCeil adds the queues' ceils.
func sumCeil(qs []model.QueueTarget) tbf.Rate {
	var s tbf.Rate
	for _, q := range qs {
		s += q.Ceil
	}
	return s
}
