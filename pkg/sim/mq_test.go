package sim

import (
	"fmt"
	"math"
	"net/netip"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// mqTree is 4 queue trees for 8 users of 1mbit (ceil: the interface).
func mqTree(t *testing.T, bw tbf.Rate) (model.Tree, *model.Assignment) {
	t.Helper()
	tg := model.Targets{Interface: model.InterfaceSpec{Name: "lan0", Bandwidth: bw, Queues: 4}}
	for i := 0; i < 8; i++ {
		tg.Users = append(tg.Users, model.UserTarget{Name: fmt.Sprintf("u%d", i), Rate: tbf.Mbit, Ceil: bw,
			Prefixes: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)}), 32)}})
	}
	ids := model.NewAssignment()
	tree, err := model.Build(tg, ids)
	if err != nil {
		t.Fatal(err)
	}
	return tree, ids
}

func TestSolveMQRebalances(t *testing.T) {
	bw := 100 * tbf.Mbit
	tree, ids := mqTree(t, bw)
	busyQueue, _ := ids.Queue("u0")
	onlyU0 := func(c *model.Class) Demand {
		if c.Labels.User == "u0" {
			return Max
		}
		return 0
	}
	res, err := Solve(&tree, onlyU0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != model.ShaperMQ || len(res.Queues) != 4 {
		t.Fatalf("kind %s with %d queues", res.Kind, len(res.Queues))
	}
	if res.Total < 0.95*float64(bw) || res.Total > float64(bw) {
		t.Errorf("one busy user: total %.0f, want the interface's %d within 5%%", res.Total, bw)
	}
	if q := res.Queues[busyQueue]; q.Sent < 0.95*float64(bw) {
		t.Errorf("busy queue %d sends %.0f (ceil %.0f)", busyQueue, q.Sent, q.Ceil)
	}
	all := func(c *model.Class) Demand {
		if c.Labels.Kind == "user" {
			return Max
		}
		return 0
	}
	if res, err = Solve(&tree, all, Options{}); err != nil {
		t.Fatal(err)
	}
	var ceils float64
	for _, q := range res.Queues {
		ceils += q.Ceil
		if math.Abs(q.Sent-float64(bw)/4) > 0.01*float64(bw) {
			t.Errorf("all busy: queue %d sends %.0f, want a quarter of %d", q.Queue, q.Sent, bw)
		}
	}
	if ceils > float64(bw) || res.Total > float64(bw)*1.0001 {
		t.Errorf("all busy: ceils %.0f, total %.0f, above %d", ceils, res.Total, bw)
	}
}

// A tier's aggregate holds across queues in the prediction as in the
// daemon: two gold users on different queues, both busy, share gold's 30mbit
// ceil (not 30mbit each); one of them alone gets all of it. So does the
// ceil of a node too big for one queue (model.SplitNodes: 60mbit of 100 on
// two queues), split over the queues as a tier is, also under another
// split node.
func TestSolveMQTierAggregate(t *testing.T) {
	bw := 100 * tbf.Mbit
	for _, c := range []struct {
		name string
		tg   model.Targets
		node string // the users' node
		ceil tbf.Rate
	}{
		{"tier gold", model.Targets{Interface: model.InterfaceSpec{Name: "lan0", Bandwidth: bw, Queues: 2},
			Tiers: []model.TierTarget{{Name: "gold", Rate: 10 * tbf.Mbit, Ceil: 30 * tbf.Mbit}}}, "", 30 * tbf.Mbit},
		{"node campus", model.Targets{Interface: model.InterfaceSpec{Name: "lan0", Bandwidth: bw, Queues: 2},
			Nodes: []model.NodeTarget{{Name: "campus", Rate: 10 * tbf.Mbit, Ceil: 60 * tbf.Mbit}}}, "campus", 60 * tbf.Mbit},
		{"node hall split under campus", model.Targets{Interface: model.InterfaceSpec{Name: "lan0", Bandwidth: bw, Queues: 2},
			Nodes: []model.NodeTarget{{Name: "campus", Rate: 10 * tbf.Mbit, Ceil: 80 * tbf.Mbit},
				{Name: "hall", Parent: "campus", Rate: 10 * tbf.Mbit, Ceil: 60 * tbf.Mbit}}}, "hall", 60 * tbf.Mbit},
	} {
		tg := c.tg
		for i := 0; i < 2; i++ {
			u := model.UserTarget{Name: fmt.Sprintf("g%d", i), Rate: tbf.Mbit, Ceil: bw,
				Prefixes: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)}), 32)}}
			if len(tg.Tiers) > 0 {
				u.Tier = "gold"
			} else {
				u.Node, u.Ceil = c.node, c.ceil
			}
			tg.Users = append(tg.Users, u)
		}
		ids := model.NewAssignment()
		tree, err := model.Build(tg, ids)
		if err != nil {
			t.Fatal(err)
		}
		if q0, _ := ids.Queue("g0"); q0 == func() int { q, _ := ids.Queue("g1"); return q }() {
			t.Fatalf("%s: g0 and g1 on one queue: the test needs them apart", c.name)
		}
		busy := func(names ...string) DemandFunc {
			return func(c *model.Class) Demand {
				for _, n := range names {
					if c.Labels.User == n {
						return Max
					}
				}
				return 0
			}
		}
		ceil := float64(c.ceil)
		res, err := Solve(&tree, busy("g0", "g1"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Total > ceil*1.0001 || res.Total < ceil*0.97 {
			t.Errorf("%s: both users busy on different queues: %.0f, want the ceil %.0f", c.name, res.Total, ceil)
		}
		if res, err = Solve(&tree, busy("g1"), Options{}); err != nil {
			t.Fatal(err)
		}
		if res.Total > ceil*1.0001 || res.Total < ceil*0.95 {
			t.Errorf("%s: one user busy: %.0f, want the ceil %.0f", c.name, res.Total, ceil)
		}
	}
}
