package sim

import (
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

const mbit = float64(tbf.Mbit)

// cls is a class minor under parent minor (0: the qdisc) with rates in
// mbit, an explicit quantum (0: the kernel's default) and prio.
type cls struct {
	minor, parent uint16
	rate, ceil    float64
	quantum, prio uint32
	user          string
}

// htbTree builds an HTB tree from cs.
func htbTree(cs ...cls) *model.Tree {
	t := &model.Tree{Device: "lan0", Root: &model.Qdisc{Kind: model.ShaperHTB, Handle: model.RootQdisc, DefaultMinor: 2}}
	for _, c := range cs {
		parent := model.RootQdisc
		if c.parent != 0 {
			parent = model.MakeHandle(1, c.parent)
		}
		t.Classes = append(t.Classes, model.Class{
			Handle: model.MakeHandle(1, c.minor), Parent: parent,
			Rate: tbf.Rate(c.rate * mbit), Ceil: tbf.Rate(c.ceil * mbit),
			Quantum: c.quantum, Prio: c.prio, Labels: model.Labels{Kind: "user", User: c.user},
		})
	}
	return t
}

// demands maps user labels to demands in mbit; missing users are Max.
func demands(m map[string]float64) DemandFunc {
	return func(c *model.Class) Demand {
		if d, ok := m[c.Labels.User]; ok {
			return Demand(d * mbit)
		}
		return Max
	}
}

// want is a leaf's expected steady state.
type want struct {
	user   string
	rate   float64 // mbit
	reason Reason
	by     uint16 // minor of the limiting class, 0: none
}

func solve(t *testing.T, tree *model.Tree, d DemandFunc) *Result {
	t.Helper()
	res, err := Solve(tree, d, Options{})
	if err != nil {
		t.Fatalf("Solve: %v", err)
	}
	return res
}

func check(t *testing.T, res *Result, total float64, ws ...want) {
	t.Helper()
	got := map[string]ClassResult{}
	for _, c := range res.Classes {
		if c.Leaf && c.Labels.User != "" {
			got[c.Labels.User] = c
		}
	}
	for _, w := range ws {
		c, ok := got[w.user]
		if !ok {
			t.Errorf("%s: no result", w.user)
			continue
		}
		var by model.Handle
		if w.by != 0 {
			by = model.MakeHandle(1, w.by)
		}
		if math.Abs(c.Rate-w.rate*mbit) > 1 || c.LimitedBy != w.reason || c.By != by {
			t.Errorf("%s: %.4f mbit limited by %s %s, want %.4f mbit limited by %s %s",
				w.user, c.Rate/mbit, c.LimitedBy, c.By, w.rate, w.reason, by)
		}
	}
	if math.Abs(res.Total-total*mbit) > 1 {
		t.Errorf("total %.4f mbit, want %.4f", res.Total/mbit, total)
	}
}

// Two backlogged classes of the same prio share the spare 80mbit in
// proportion to their quanta (2000:6000, both above one 1514-byte frame),
// on top of their rates.
func TestShareByQuantum(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 100, ceil: 100},
		cls{minor: 0x10, parent: 1, rate: 10, ceil: 100, quantum: 2000, user: "a"},
		cls{minor: 0x11, parent: 1, rate: 10, ceil: 100, quantum: 6000, user: "b"},
	)
	res := solve(t, tree, demands(nil))
	check(t, res, 100, want{"a", 30, ByShare, 1}, want{"b", 70, ByShare, 1})
	for _, c := range res.Classes {
		if c.Labels.User == "b" && (math.Abs(c.Guaranteed-10*mbit) > 1 || math.Abs(c.Borrowed-60*mbit) > 1) {
			t.Errorf("b: guaranteed %.2f borrowed %.2f mbit, want 10 and 60", c.Guaranteed/mbit, c.Borrowed/mbit)
		}
	}
}

// Without an explicit quantum the kernel's rate/r2q applies: 400kbit ->
// 5000 B, 800kbit -> 10000 B, so the 8.8mbit spare splits 1:2.
func TestKernelDefaultQuantum(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 10, ceil: 10},
		cls{minor: 0x10, parent: 1, rate: 0.4, ceil: 10, user: "a"},
		cls{minor: 0x11, parent: 1, rate: 0.8, ceil: 10, user: "b"},
	)
	res := solve(t, tree, demands(nil))
	check(t, res, 10, want{"a", 0.4 + 8.8/3, ByShare, 1}, want{"b", 0.8 + 2*8.8/3, ByShare, 1})
	for _, tc := range []struct {
		rate tbf.Rate
		q    uint32
	}{{8 * tbf.Kbit, 1000}, {400 * tbf.Kbit, 5000}, {16 * tbf.Mbit, 200000}, {tbf.Gbit, 200000}} {
		if q := kernelQuantum(&model.Class{Rate: tc.rate}); q != tc.q {
			t.Errorf("kernelQuantum(%s) = %d, want %d", tc.rate, q, tc.q)
		}
	}
}

// Prio 0 borrows before prio 7: with unlimited ceils prio 0 takes the
// whole spare; with a ceil of 60mbit it stops there and prio 7 gets the rest.
func TestPrioBorrowsFirst(t *testing.T) {
	mk := func(ceilA float64) *model.Tree {
		return htbTree(
			cls{minor: 1, rate: 100, ceil: 100},
			cls{minor: 0x10, parent: 1, rate: 10, ceil: ceilA, quantum: 1000, prio: 0, user: "a"},
			cls{minor: 0x11, parent: 1, rate: 10, ceil: 100, quantum: 200000, prio: 7, user: "b"},
		)
	}
	check(t, solve(t, mk(100), demands(nil)), 100, want{"a", 90, ByParent, 1}, want{"b", 10, ByPrio, 1})
	check(t, solve(t, mk(60), demands(nil)), 100, want{"a", 60, ByCeil, 0}, want{"b", 40, ByPrio, 1})
}

// A class stops at its ceil; the other takes the rest of the spare.
func TestCeilCaps(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 100, ceil: 100},
		cls{minor: 0x10, parent: 1, rate: 10, ceil: 20, quantum: 1000, user: "a"},
		cls{minor: 0x11, parent: 1, rate: 10, ceil: 100, quantum: 1000, user: "b"},
	)
	check(t, solve(t, tree, demands(nil)), 100, want{"a", 20, ByCeil, 0}, want{"b", 80, ByParent, 1})
}

// Guaranteed rates that add up to more than the interface are all granted:
// HTB sends a leaf's rate without asking its parent, so three users with
// 50+50+43mbit of guarantees get 143mbit through a 100mbit root, and
// nobody borrows (the root's tokens are used up).
func TestOversubscribedGuarantees(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 100, ceil: 100},
		cls{minor: 0x100, parent: 1, rate: 50, ceil: 200, user: "a"},
		cls{minor: 0x101, parent: 1, rate: 50, ceil: 200, user: "b"},
		cls{minor: 0x102, parent: 1, rate: 43, ceil: 200, user: "c"},
	)
	res := solve(t, tree, demands(nil))
	check(t, res, 143, want{"a", 50, ByRate, 1}, want{"b", 50, ByRate, 1}, want{"c", 43, ByRate, 1})
	if res.Guaranteed != 143*mbit || res.Bandwidth != 100*mbit {
		t.Errorf("guaranteed %.1f bandwidth %.1f mbit, want 143 and 100", res.Guaranteed/mbit, res.Bandwidth/mbit)
	}
	// With b idle the 7mbit left over from a and c is shared (both quanta
	// are the kernel's 200000).
	check(t, solve(t, tree, demands(map[string]float64{"b": 0})), 100,
		want{"a", 53.5, ByShare, 1}, want{"b", 0, ByDemand, 0}, want{"c", 46.5, ByShare, 1})
}

// A tier class lends its spare to its users first; the root then lends
// until the tier reaches its ceil, and the rest goes to a user outside the
// tier. Level 0: g1 5, g2 5, b 10; gold lends 30-10 = 20 (10 each); the
// root has 100-40 = 60: gold's ceil 40 leaves 10 (5 each), b takes 50.
func TestTierLendsThenRoot(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 100, ceil: 100},
		cls{minor: 0x10, parent: 1, rate: 30, ceil: 40},
		cls{minor: 0x100, parent: 0x10, rate: 5, ceil: 100, quantum: 1000, user: "g1"},
		cls{minor: 0x101, parent: 0x10, rate: 5, ceil: 100, quantum: 1000, user: "g2"},
		cls{minor: 0x102, parent: 1, rate: 10, ceil: 100, quantum: 1000, user: "b"},
	)
	res := solve(t, tree, demands(nil))
	check(t, res, 100, want{"g1", 20, ByParent, 0x10}, want{"g2", 20, ByParent, 0x10}, want{"b", 60, ByParent, 1})
	for _, c := range res.Classes {
		if c.Handle == model.MakeHandle(1, 0x10) && (c.LimitedBy != ByCeil || math.Abs(c.Rate-40*mbit) > 1) {
			t.Errorf("tier: %.2f mbit limited by %q, want 40 at its ceil", c.Rate/mbit, c.LimitedBy)
		}
	}
}

// Users whose guarantees exceed their tier's ceil still get them, and the
// tier (CANT_SEND) keeps them from borrowing from the root.
func TestTierOversubscribedBlocksBorrowing(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 100, ceil: 100},
		cls{minor: 0x10, parent: 1, rate: 10, ceil: 10},
		cls{minor: 0x100, parent: 0x10, rate: 8, ceil: 100, user: "g1"},
		cls{minor: 0x101, parent: 0x10, rate: 8, ceil: 100, user: "g2"},
		cls{minor: 0x102, parent: 1, rate: 10, ceil: 100, user: "b"},
	)
	check(t, solve(t, tree, demands(nil)), 100,
		want{"g1", 8, ByParent, 0x10}, want{"g2", 8, ByParent, 0x10}, want{"b", 84, ByParent, 1})
}

// A demand below the rate is met; an idle class sends nothing.
func TestDemandMet(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 100, ceil: 100},
		cls{minor: 0x10, parent: 1, rate: 10, ceil: 100, user: "a"},
		cls{minor: 0x11, parent: 1, rate: 10, ceil: 100, user: "b"},
		cls{minor: 0x12, parent: 1, rate: 10, ceil: 100, user: "c"},
	)
	check(t, solve(t, tree, demands(map[string]float64{"a": 3, "b": 0, "c": 50})), 53,
		want{"a", 3, ByDemand, 0}, want{"b", 0, ByDemand, 0}, want{"c", 50, ByDemand, 0})
}

// Solve works on what model.Build makes from targets: its quanta and the
// default class (here idle) included.
func TestBuiltTree(t *testing.T) {
	u := func(name, tier string, addr string, rate, ceil tbf.Rate, prio uint32) model.UserTarget {
		a := netip.MustParseAddr(addr)
		return model.UserTarget{Name: name, Tier: tier, Prefixes: []netip.Prefix{netip.PrefixFrom(a, 32)}, Rate: rate, Ceil: ceil, Prio: prio}
	}
	tree, err := model.Build(model.Targets{
		Interface: model.InterfaceSpec{Name: "lan0", Bandwidth: 50 * tbf.Mbit},
		Users: []model.UserTarget{
			u("alice", "bronze", "198.18.0.10", 2*tbf.Mbit, 10*tbf.Mbit, 2),
			u("bob", "gold", "198.18.0.11", 20*tbf.Mbit, 50*tbf.Mbit, 0),
			u("carol", "gold", "198.18.0.12", 20*tbf.Mbit, 50*tbf.Mbit, 0),
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := solve(t, &tree, func(c *model.Class) Demand {
		if c.Labels.Kind == "default" {
			return 0
		}
		return Max
	})
	// Spare 50-42 = 8mbit goes to prio 0 (bob and carol, same quantum).
	check(t, res, 50, want{"alice", 2, ByPrio, 1}, want{"bob", 24, ByShare, 1}, want{"carol", 24, ByShare, 1})
}

func TestErrors(t *testing.T) {
	tree := htbTree(cls{minor: 0x10, parent: 1, rate: 10, ceil: 10, user: "a"})
	if _, err := Solve(tree, nil, Options{}); err == nil || !strings.Contains(err.Error(), "1:10: parent 1:1 not in the tree") {
		t.Errorf("missing parent: %v", err)
	}
	if _, err := Solve(&model.Tree{Device: "eth9"}, nil, Options{}); err == nil || !strings.Contains(err.Error(), "eth9") {
		t.Errorf("no root: %v", err)
	}
}

// A TBF shares its rate max-min fair among flows.
func TestTBF(t *testing.T) {
	tree := &model.Tree{Device: "wan0", Root: &model.Qdisc{Kind: model.ShaperTBF, Handle: model.RootQdisc,
		TBF: &model.TBFParams{Rate: 10 * tbf.Mbit, Burst: 20000}}}
	res, err := Solve(tree, nil, Options{Flows: []Flow{{"a", Demand(2 * mbit)}, {"b", Max}, {"c", Max}}})
	if err != nil {
		t.Fatal(err)
	}
	wants := []FlowResult{{"a", Demand(2 * mbit), 2 * mbit, ByDemand}, {"b", Max, 4 * mbit, ByFIFO}, {"c", Max, 4 * mbit, ByFIFO}}
	for i, w := range wants {
		if g := res.Flows[i]; math.Abs(g.Rate-w.Rate) > 1 || g.LimitedBy != w.LimitedBy {
			t.Errorf("flow %s: %.2f mbit by %s, want %.2f by %s", w.Name, g.Rate/mbit, g.LimitedBy, w.Rate/mbit, w.LimitedBy)
		}
	}
	if math.Abs(res.Total-10*mbit) > 1 {
		t.Errorf("total %.2f mbit, want 10", res.Total/mbit)
	}
	res, _ = Solve(tree, nil, Options{Flows: []Flow{{"a", Demand(2 * mbit)}, {"b", Max}}})
	if g := res.Flows[1]; math.Abs(g.Rate-8*mbit) > 1 || g.LimitedBy != ByBandwidth {
		t.Errorf("one limited flow: %.2f mbit by %s, want 8 by bandwidth", g.Rate/mbit, g.LimitedBy)
	}
}

func TestParseDemand(t *testing.T) {
	for in, w := range map[string]Demand{"max": Max, "MAX": Max, "0": 0, "10mbit": Demand(10 * mbit), "1kbps": 8000} {
		if d, err := ParseDemand(in); err != nil || d != w {
			t.Errorf("ParseDemand(%q) = %v, %v; want %v", in, d, err, w)
		}
	}
	for _, in := range []string{"", "10", "fast", "-1mbit"} {
		if _, err := ParseDemand(in); err == nil {
			t.Errorf("ParseDemand(%q): no error", in)
		}
	}
	if Max.String() != "max" || Demand(10*mbit).String() != "10mbit" {
		t.Errorf("String: %s %s", Max, Demand(10*mbit))
	}
}

// Invariants on a 300-user plan with a tier aggregate, three prios and a
// link below the sum of ceilings: every leaf gets at least min(demand,
// rate) and at most min(demand, ceil); the aggregate stays within its
// ceil; the link is full (the demand exceeds it) but not exceeded (the
// guarantees fit).
func TestInvariants(t *testing.T) {
	tree := benchTree(t, 300)
	res := solve(t, tree, func(c *model.Class) Demand {
		if c.Labels.Kind != "user" || c.Handle.Minor()%5 == 0 {
			return 0
		}
		return Max
	})
	for i, c := range res.Classes {
		k := &tree.Classes[i]
		if c.Leaf {
			lo := min(float64(c.Demand), float64(k.Rate))
			hi := min(float64(c.Demand), float64(k.Ceil))
			if c.Rate < lo-1 || c.Rate > hi+1 {
				t.Errorf("%s %s: %.3f mbit outside [%.3f, %.3f]", c.Handle, c.Labels.User, c.Rate/mbit, lo/mbit, hi/mbit)
			}
		} else if c.Rate > float64(k.Ceil)+1 {
			t.Errorf("%s: %.3f mbit above its ceil %s", c.Handle, c.Rate/mbit, k.Ceil)
		}
	}
	if math.Abs(res.Total-res.Bandwidth) > 1 {
		t.Errorf("total %.3f mbit, want the bandwidth %.3f", res.Total/mbit, res.Bandwidth/mbit)
	}
}

// HTB ends a DRR turn only after the packet that overdraws the deficit:
// with 64 KiB GSO packets two classes with quanta 1000 and 3000 send one
// packet per round and share the spare equally; with 2000-byte packets
// the weights are 2000:3000; with the default 1514-byte frames 1514:3000.
func TestPacketSizeWeighsDRR(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 100, ceil: 100},
		cls{minor: 0x10, parent: 1, rate: 10, ceil: 100, quantum: 1000, user: "a"},
		cls{minor: 0x11, parent: 1, rate: 10, ceil: 100, quantum: 3000, user: "b"},
	)
	for _, tc := range []struct {
		pkt  tbf.Size
		a, b float64
	}{{64 * tbf.Kibibyte, 50, 50}, {2000, 10 + 80*2.0/5, 10 + 80*3.0/5}, {0, 10 + 80*1514.0/4514, 10 + 80*3000.0/4514}} {
		res, err := Solve(tree, demands(nil), Options{PacketSize: tc.pkt})
		if err != nil {
			t.Fatal(err)
		}
		check(t, res, 100, want{"a", tc.a, ByShare, 1}, want{"b", tc.b, ByShare, 1})
	}
}

// The root's spare is shared flat over the borrowing leaves (one quantum
// per leaf per round), not per subtree: three users under a tier aggregate
// and one user beside it split 28mbit 7/7/7/7 (the kernel agrees, see
// internal/lab/simlab).
func TestFlatShareAcrossSubtrees(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 60, ceil: 60},
		cls{minor: 0x10, parent: 1, rate: 20, ceil: 50},
		cls{minor: 0x100, parent: 0x10, rate: 6, ceil: 40, quantum: 75000, prio: 1, user: "g1"},
		cls{minor: 0x101, parent: 0x10, rate: 6, ceil: 40, quantum: 75000, prio: 1, user: "g2"},
		cls{minor: 0x102, parent: 0x10, rate: 6, ceil: 40, quantum: 75000, prio: 1, user: "g3"},
		cls{minor: 0x103, parent: 1, rate: 6, ceil: 40, quantum: 75000, prio: 1, user: "s1"},
		cls{minor: 0x104, parent: 1, rate: 6, ceil: 40, quantum: 75000, prio: 5, user: "b1"},
	)
	g := 6 + 2.0/3 + 7
	check(t, solve(t, tree, demands(nil)), 60,
		want{"g1", g, ByShare, 1}, want{"g2", g, ByShare, 1}, want{"g3", g, ByShare, 1},
		want{"s1", 13, ByShare, 1}, want{"b1", 6, ByPrio, 1})
}

// A borrowing class whose cburst is below four packets is flagged; one
// that only uses its rate, or has room for four packets, is not.
func TestShortBurst(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 100, ceil: 100},
		cls{minor: 0x10, parent: 1, rate: 10, ceil: 100, user: "a"},
		cls{minor: 0x11, parent: 1, rate: 10, ceil: 100, user: "b"},
		cls{minor: 0x12, parent: 1, rate: 10, ceil: 100, user: "idle"},
	)
	tree.Classes[1].CBurst = 15140
	tree.Classes[2].CBurst = 256 * tbf.Kibibyte
	tree.Classes[3].CBurst = 1514
	for _, tc := range []struct {
		pkt  tbf.Size
		want map[string]bool
	}{
		{0, map[string]bool{"a": false, "b": false, "idle": false}},
		{64 * tbf.Kibibyte, map[string]bool{"a": true, "b": false, "idle": false}},
	} {
		res, err := Solve(tree, demands(map[string]float64{"idle": 5}), Options{PacketSize: tc.pkt})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Classes {
			if w, ok := tc.want[c.Labels.User]; ok && c.ShortBurst != w {
				t.Errorf("packet %d: %s ShortBurst %v, want %v", tc.pkt, c.Labels.User, c.ShortBurst, w)
			}
		}
	}
}

// Aggregates lend on their own rates without asking the root: two 20mbit
// aggregates under a 30mbit root pass 40mbit (the kernel agrees, see
// internal/lab/simlab).
func TestAggregatesOversubscribed(t *testing.T) {
	tree := htbTree(
		cls{minor: 1, rate: 30, ceil: 30},
		cls{minor: 0x10, parent: 1, rate: 20, ceil: 20},
		cls{minor: 0x11, parent: 1, rate: 20, ceil: 20},
		cls{minor: 0x100, parent: 0x10, rate: 2, ceil: 20, user: "g1"},
		cls{minor: 0x101, parent: 0x10, rate: 2, ceil: 20, user: "g2"},
		cls{minor: 0x102, parent: 0x11, rate: 2, ceil: 20, user: "s1"},
		cls{minor: 0x103, parent: 0x11, rate: 2, ceil: 20, user: "s2"},
	)
	check(t, solve(t, tree, demands(nil)), 40,
		want{"g1", 10, ByShare, 0x10}, want{"g2", 10, ByShare, 0x10}, want{"s1", 10, ByShare, 0x11}, want{"s2", 10, ByShare, 0x11})
}

// A bfifo leaf smaller than one aggregate (a tree dumped from a kernel that
// an older version or a hand-written script shaped) is flagged; the leaves
// Build makes (a segmenting tbf for the small queue, a large bfifo) are not.
func TestSolveFlagsShortQueues(t *testing.T) {
	tree := htbTree(cls{minor: 1, rate: 100, ceil: 100},
		cls{minor: 100, parent: 1, rate: 1, ceil: 2, user: "small"},
		cls{minor: 101, parent: 1, rate: 1, ceil: 2, user: "segmented"},
		cls{minor: 102, parent: 1, rate: 50, ceil: 50, user: "large"})
	tree.Classes[1].Leaf = &model.LeafQdisc{Kind: model.LeafBfifo, Limit: 12500}
	tree.Classes[2].Leaf = &model.LeafQdisc{Kind: model.LeafTBF, Limit: 12500, Segment: 1536}
	tree.Classes[3].Leaf = &model.LeafQdisc{Kind: model.LeafBfifo, Limit: 312500}
	res, err := Solve(tree, demands(nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range res.Classes {
		if c.Leaf {
			got[c.Labels.User] = c.ShortQueue
		}
	}
	if !got["small"] || got["segmented"] || got["large"] {
		t.Errorf("short queues %v, want only small", got)
	}
	res, err = Solve(tree, demands(nil), Options{Aggregate: 8 << 10}) // a link without GSO/GRO aggregates above 8 KiB
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Classes {
		if c.ShortQueue {
			t.Errorf("%s flagged with 8 KiB aggregates", c.Labels.User)
		}
	}
}
