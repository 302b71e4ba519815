package sim

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// benchTree is an n-user interface: three tiers of different prio, one of
// them with an aggregate class, on a link below the sum of the ceilings.
func benchTree(b testing.TB, n int) *model.Tree {
	b.Helper()
	tg := model.Targets{
		Interface: model.InterfaceSpec{Name: "lan0", Bandwidth: tbf.Rate(n) * 5 * tbf.Mbit},
		Tiers:     []model.TierTarget{{Name: "gold", Rate: tbf.Rate(n) * tbf.Mbit, Ceil: tbf.Rate(n) * 3 * tbf.Mbit}},
	}
	tiers := []struct {
		name       string
		rate, ceil tbf.Rate
		prio       uint32
	}{{"bronze", 1 * tbf.Mbit, 10 * tbf.Mbit, 4}, {"silver", 3 * tbf.Mbit, 20 * tbf.Mbit, 2}, {"gold", 5 * tbf.Mbit, 50 * tbf.Mbit, 0}}
	for i := range n {
		tr := tiers[i%3]
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		tg.Users = append(tg.Users, model.UserTarget{Name: fmt.Sprintf("u%d", i), Tier: tr.name,
			Prefixes: []netip.Prefix{netip.PrefixFrom(a, 32)}, Rate: tr.rate, Ceil: tr.ceil, Prio: tr.prio})
	}
	tree, err := model.Build(tg, nil)
	if err != nil {
		b.Fatal(err)
	}
	return &tree
}

// BenchmarkSolve is the steady-state solve of an n-user HTB interface with
// every user backlogged except every fifth (idle) and seventh (2mbit).
func BenchmarkSolve(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("users=%d", n), func(b *testing.B) {
			tree := benchTree(b, n)
			demand := func(c *model.Class) Demand {
				switch {
				case c.Labels.Kind != "user":
					return 0
				case c.Handle.Minor()%5 == 0:
					return 0
				case c.Handle.Minor()%7 == 0:
					return Demand(2 * tbf.Mbit)
				}
				return Max
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Solve(tree, demand, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRun is the packet-level mode on benchTree's interface (n users,
// the link at 5mbit per user) with the demands of BenchmarkSolve, 1514-byte
// packets, over simulated seconds. It reports how many simulated seconds
// one wall-clock second simulates (sim-s/s) and the packets per simulated
// second.
func BenchmarkRun(b *testing.B) {
	for _, c := range []struct {
		n   int
		dur time.Duration
	}{{10, 10 * time.Second}, {1000, 200 * time.Millisecond}} {
		b.Run(fmt.Sprintf("users=%d", c.n), func(b *testing.B) {
			tree := benchTree(b, c.n)
			demand := map[model.Handle]Demand{}
			for _, cl := range tree.Classes {
				switch {
				case cl.Labels.Kind != "user", cl.Handle.Minor()%5 == 0:
				case cl.Handle.Minor()%7 == 0:
					demand[cl.Handle] = Demand(2 * tbf.Mbit)
				default:
					demand[cl.Handle] = Max
				}
			}
			var pkts int64
			for b.Loop() {
				s, err := Run(tree, RunOptions{Demand: demand, Duration: c.dur})
				if err != nil {
					b.Fatal(err)
				}
				pkts = s.Packets
			}
			perOp := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(c.dur.Seconds()/perOp, "sim-s/s")
			b.ReportMetric(float64(pkts)/c.dur.Seconds(), "pkts/sim-s")
		})
	}
}
