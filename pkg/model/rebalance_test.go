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
	got := model.RebalanceQueues(bw, prev, []tbf.Rate{0, 0, 25 * tbf.Mbit, 0}, nil)
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
	got := model.RebalanceQueues(bw, prev, []tbf.Rate{97 * tbf.Mbit, tbf.Mbit, tbf.Mbit, tbf.Mbit}, nil)
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
	got := model.RebalanceQueues(bw, nil, []tbf.Rate{0, 0}, nil)
	if got[0].Ceil != bw/2 || got[1].Ceil != bw/2 {
		t.Errorf("idle: %v, want an even split", got)
	}
	// Queue 0 is saturated, queue 1 uses 10mbit of its 50: it keeps
	// 12.5mbit (headroom), queue 0 gets the rest.
	got = model.RebalanceQueues(bw, got, []tbf.Rate{50 * tbf.Mbit, 10 * tbf.Mbit}, nil)
	if got[1].Ceil != 12500*tbf.Kbit || got[0].Ceil != bw-12500*tbf.Kbit {
		t.Errorf("saturated + light: %v, want 87.5mbit and 12.5mbit", got)
	}
}

func TestRebalanceHysteresisKeepsPrev(t *testing.T) {
	bw := 100 * tbf.Mbit
	prev := model.RebalanceQueues(bw, nil, []tbf.Rate{100 * tbf.Mbit, 0}, nil)
	again := model.RebalanceQueues(bw, prev, []tbf.Rate{prev[0].Ceil, 0}, nil)
	if &again[0] != &prev[0] {
		t.Errorf("a steady state produced a new split %v (prev %v)", again, prev)
	}
}

// A step-by-step run: queue 1 turns busy while queue 0 holds nearly all;
// within two ticks both have half, and the sum never exceeds the bandwidth.
func TestRebalanceConverges(t *testing.T) {
	bw := 100 * tbf.Mbit
	qs := model.RebalanceQueues(bw, nil, []tbf.Rate{50 * tbf.Mbit, 0}, nil)
	for tick := 0; tick < 3; tick++ {
		// Both queues send all they are allowed.
		qs = model.RebalanceQueues(bw, qs, []tbf.Rate{qs[0].Ceil, qs[1].Ceil}, nil)
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

// A tier's users busy on one queue get its whole ceil; busy on every queue
// they share it; the ceils always add up to the tier's ceil and the rates
// to its rate, each rate within its ceil.
func TestRebalanceTierHoldsTheAggregate(t *testing.T) {
	tier := model.TierTarget{Name: "gold", Rate: 20 * tbf.Mbit, Ceil: 60 * tbf.Mbit}
	even := model.EvenTierTargets(tier, 3)
	check := func(what string, got []model.QueueTarget) {
		t.Helper()
		var rate tbf.Rate
		for q, g := range got {
			rate += g.Rate
			if g.Rate > g.Ceil || g.Rate < 8 {
				t.Errorf("%s: queue %d rate %s ceil %s", what, q, g.Rate, g.Ceil)
			}
		}
		if s := sumCeil(got); s != tier.Ceil {
			t.Errorf("%s: ceils add up to %s, want the tier's %s", what, s, tier.Ceil)
		}
		if d := float64(rate) - float64(tier.Rate); d > 16 || d < -16 {
			t.Errorf("%s: rates add up to %s, want the tier's %s", what, rate, tier.Rate)
		}
	}
	check("even", even)
	one := model.RebalanceTier(tier, even, []tbf.Rate{0, 20 * tbf.Mbit, 0}, nil)
	check("one busy", one)
	if one[1].Ceil < tier.Ceil*95/100 {
		t.Errorf("the busy queue gets %s of the tier's %s, want at least 95%%", one[1].Ceil, tier.Ceil)
	}
	all := model.RebalanceTier(tier, one, []tbf.Rate{tbf.Mbit, 59 * tbf.Mbit, tbf.Mbit}, nil)
	check("all busy", all)
	for q, g := range all {
		if g.Ceil < tier.Ceil/3-4 || g.Ceil > tier.Ceil/3+4 {
			t.Errorf("all busy: queue %d ceil %s, want a third of %s", q, g.Ceil, tier.Ceil)
		}
	}
	if again := model.RebalanceTier(tier, all, []tbf.Rate{20 * tbf.Mbit, 20 * tbf.Mbit, 20 * tbf.Mbit}, nil); &again[0] != &all[0] {
		t.Errorf("an unchanged demand moved the split: %v -> %v", all, again)
	}
}

// A queue never gets less than its floor (the largest guaranteed rate in
// its tree), idle or not; the floors are met before demand is shared, and
// scaled down when they add up to more than the bandwidth.
func TestRebalanceKeepsFloors(t *testing.T) {
	bw := 40 * tbf.Mbit
	floors := []tbf.Rate{2 * tbf.Mbit, 0, 5 * tbf.Mbit, 0}
	got := model.RebalanceQueues(bw, nil, []tbf.Rate{0, 40 * tbf.Mbit, 0, 0}, floors)
	if s := sumCeil(got); s != bw {
		t.Fatalf("ceils add up to %s, want %s", s, bw)
	}
	for q, f := range floors {
		if got[q].Ceil < f {
			t.Errorf("idle queue %d: ceil %s below its floor %s", q, got[q].Ceil, f)
		}
	}
	if least := bw - 2*tbf.Mbit - 5*tbf.Mbit - 2*bw/200; got[1].Ceil < least {
		t.Errorf("busy queue: %s, want what the floors leave, %s", got[1].Ceil, least)
	}
	over := model.RebalanceQueues(bw, nil, []tbf.Rate{0, 0}, []tbf.Rate{30 * tbf.Mbit, 30 * tbf.Mbit})
	if s := sumCeil(over); s != bw || over[0].Ceil != bw/2 {
		t.Errorf("floors above the bandwidth: %v (sum %s), want it halved", over, s)
	}
}

// The two levels do not hold each other back: four busy queues, two of
// them limited by a tier's aggregate (20 of 40mbit), starting from a split
// that gave everything to a third queue, reach the fair split (10mbit each,
// the tier's classes 10mbit each) within three ticks, not the dozen that
// growing by QueueHeadroom per tick would take.
func TestRebalanceMQConvergesAcrossLevels(t *testing.T) {
	bw, n := 40*tbf.Mbit, 4
	tier := model.TierTarget{Name: "agg", Rate: 5 * tbf.Mbit, Ceil: 20 * tbf.Mbit}
	floors := model.MQRates{Queues: []tbf.Rate{250 * tbf.Kbit, 250 * tbf.Kbit, 250 * tbf.Kbit, 250 * tbf.Kbit},
		Tiers: map[string][]tbf.Rate{"agg": {250 * tbf.Kbit, 250 * tbf.Kbit, 0, 0}}}
	split := model.MQSplit{Queues: model.RebalanceQueues(bw, nil, []tbf.Rate{0, 0, 40 * tbf.Mbit, 0}, floors.Queues),
		Tiers: map[string][]model.QueueTarget{"agg": model.RebalanceTier(tier, nil, []tbf.Rate{0, 0, 0, 0}, floors.Tiers["agg"])}}
	for tick := 1; tick <= 3; tick++ {
		// Every user sends as much as its queue and (agg users, on queues
		// 0 and 1) its tier's class there let it.
		used := model.MQRates{Queues: make([]tbf.Rate, n), Tiers: map[string][]tbf.Rate{"agg": make([]tbf.Rate, n)}}
		for q := 0; q < n; q++ {
			used.Queues[q] = split.Queues[q].Ceil
			if q < 2 {
				used.Queues[q] = min(split.Queues[q].Ceil, split.Tiers["agg"][q].Ceil)
				used.Tiers["agg"][q] = used.Queues[q]
			}
		}
		split = model.RebalanceMQ(bw, []model.TierTarget{tier}, nil, split, used, floors)
		t.Logf("tick %d: queues %v, agg %v", tick, split.Queues, split.Tiers["agg"])
	}
	if s := sumCeil(split.Queues); s != bw {
		t.Errorf("queue ceils add up to %s, want %s", s, bw)
	}
	if s := sumCeil(split.Tiers["agg"]); s != tier.Ceil {
		t.Errorf("agg's ceils add up to %s, want %s", s, tier.Ceil)
	}
	for q := 0; q < n; q++ {
		got := split.Queues[q].Ceil
		if q < 2 {
			got = min(got, split.Tiers["agg"][q].Ceil)
		}
		if got < 9*tbf.Mbit {
			t.Errorf("after 3 ticks queue %d may send %s, want about 10mbit", q, got)
		}
	}
}

// A node split under a split node (hall under campus, both too big for one
// of two queues) follows a user busy on one queue within a few ticks: the
// user gets hall's whole ceil, as much as campus's and the queue's classes
// there let through, by the third tick.
func TestRebalanceMQNestedNodes(t *testing.T) {
	bw, n := 100*tbf.Mbit, 2
	campus := model.TierTarget{Name: "campus", Rate: 10 * tbf.Mbit, Ceil: 80 * tbf.Mbit}
	hall := model.TierTarget{Name: "hall", Rate: 10 * tbf.Mbit, Ceil: 60 * tbf.Mbit}
	nodes := []model.TierTarget{campus, hall}
	split := model.MQSplit{Queues: model.EvenQueueTargets(bw, n),
		Nodes: map[string][]model.QueueTarget{"campus": model.EvenTierTargets(campus, n), "hall": model.EvenTierTargets(hall, n)}}
	got := tbf.Rate(0)
	for tick := 1; tick <= 3; tick++ {
		// The user on queue 0 sends as much as every level lets it.
		got = min(split.Queues[0].Ceil, split.Nodes["campus"][0].Ceil, split.Nodes["hall"][0].Ceil)
		used := model.MQRates{Queues: []tbf.Rate{got, 0}, Nodes: map[string][]tbf.Rate{"campus": {got, 0}, "hall": {got, 0}}}
		split = model.RebalanceMQ(bw, nil, nodes, split, used, model.MQRates{})
		t.Logf("tick %d: user %s; queues %v, campus %v, hall %v", tick, got, split.Queues, split.Nodes["campus"], split.Nodes["hall"])
	}
	got = min(split.Queues[0].Ceil, split.Nodes["campus"][0].Ceil, split.Nodes["hall"][0].Ceil)
	if got < hall.Ceil*97/100 {
		t.Errorf("after 3 ticks the user may send %s, want hall's ceil %s (within 3%%)", got, hall.Ceil)
	}
	for name, s := range split.Nodes {
		want := campus.Ceil
		if name == "hall" {
			want = hall.Ceil
		}
		if sumCeil(s) != want {
			t.Errorf("%s's ceils add up to %s, want %s", name, sumCeil(s), want)
		}
	}
}
