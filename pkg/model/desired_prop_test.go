package model_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/model/modeltest"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// desiredUniverse draws users and tiers for the Desired property test
// from a small universe, so that operations meet users that exist.
type desiredUniverse struct {
	rng   *rand.Rand
	tiers []model.TierTarget
	// nodes are a small hierarchy (single trees only): n0 > n1,
	// n2 > n3 > n4.
	nodes []model.NodeTarget
}

// nodeNames are the nodes users may be under ("": none).
var nodeNames = []string{"", "n0", "n1", "n2", "n3", "n4"}

// universeNodes is the hierarchy of desiredUniverse.nodes.
func universeNodes() []model.NodeTarget {
	return []model.NodeTarget{
		{Name: "n0", Rate: 200 * tbf.Mbit, Ceil: 300 * tbf.Mbit},
		{Name: "n1", Parent: "n0", Rate: 50 * tbf.Mbit, Ceil: 100 * tbf.Mbit},
		{Name: "n2", Rate: 100 * tbf.Mbit, Ceil: 100 * tbf.Mbit},
		{Name: "n3", Parent: "n2", Rate: 60 * tbf.Mbit, Ceil: 80 * tbf.Mbit},
		{Name: "n4", Parent: "n3", Rate: 20 * tbf.Mbit, Ceil: 40 * tbf.Mbit},
	}
}

// user draws user i with random rates, tier and a subset of the user's own
// prefixes (each user's prefixes are its own: no two users collide).
func (u *desiredUniverse) user(i int) model.UserTarget {
	rng := u.rng
	ut := model.UserTarget{Name: fmt.Sprintf("user%02d", i), Tier: fmt.Sprintf("tier%d", rng.IntN(4)),
		Rate: tbf.Rate(1+rng.IntN(4)) * tbf.Mbit, Prio: uint32(rng.IntN(2))}
	ut.Ceil = ut.Rate * tbf.Rate(1+rng.IntN(3))
	if rng.IntN(4) == 0 {
		ut.Burst = tbf.Size(20000 + rng.IntN(2)*20000)
	}
	if rng.IntN(2) == 0 {
		ut.Prefixes = append(ut.Prefixes, netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 3, byte(i)}), 32))
	}
	if rng.IntN(2) == 0 || len(ut.Prefixes) == 0 {
		ut.Prefixes = append(ut.Prefixes, netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 3, 0, byte(i)}), 64))
	}
	if rng.IntN(6) == 0 {
		ut.Leaf = &model.LeafQdisc{Kind: "pfifo", Limit: 100}
	}
	if len(u.nodes) > 0 {
		ut.Node = nodeNames[rng.IntN(len(nodeNames))]
	}
	return ut
}

// targets draws a whole set of targets on spec.
func (u *desiredUniverse) targets(spec model.InterfaceSpec) model.Targets {
	tg := model.Targets{Interface: spec, Tiers: u.tiers, Nodes: u.nodes}
	for i := 0; i < 30; i++ {
		if u.rng.IntN(2) == 0 {
			tg.Users = append(tg.Users, u.user(i))
		}
	}
	return tg
}

// split draws a split of spec's bandwidth and the tiers over n queues.
func (u *desiredUniverse) split(bw tbf.Rate, n int) model.MQSplit {
	s := model.MQSplit{Queues: make([]model.QueueTarget, n), Tiers: map[string][]model.QueueTarget{}}
	for q := range s.Queues {
		r := bw / tbf.Rate(n) / 2 * tbf.Rate(1+u.rng.IntN(2))
		s.Queues[q] = model.QueueTarget{Rate: r, Ceil: r}
	}
	for _, t := range u.tiers {
		qs := model.EvenTierTargets(t, n)
		for q := range qs {
			qs[q].Ceil += tbf.Rate(u.rng.IntN(3)) * tbf.Mbit
		}
		s.Tiers[t.Name] = qs
	}
	spec := model.InterfaceSpec{Bandwidth: bw, Queues: n}
	for name := range model.SplitNodes(spec, u.nodes) {
		if s.Nodes == nil {
			s.Nodes = map[string][]model.QueueTarget{}
		}
		i := slices.IndexFunc(u.nodes, func(nt model.NodeTarget) bool { return nt.Name == name })
		qs := model.EvenTierTargets(model.TierTarget{Name: name, Rate: u.nodes[i].Rate, Ceil: u.nodes[i].Ceil}, n)
		for q := range qs {
			qs[q].Ceil += tbf.Rate(u.rng.IntN(3)) * tbf.Mbit
		}
		s.Nodes[name] = qs
	}
	return s
}

// TestDesiredOperationsMatchBuild drives a Desired through random
// sequences of operations, single trees and per-queue trees, both
// directions, and checks after every operation that (1) its tree is what
// Build makes of its targets with its class ids, and (2) the kernel (an
// in-memory one) that got every operation's changes holds that tree.
func TestDesiredOperationsMatchBuild(t *testing.T) {
	splitInPlace, nestedInPlace := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		u := &desiredUniverse{rng: rng}
		for i := 0; i < 3; i++ {
			if rng.IntN(2) == 0 {
				r := tbf.Rate(20+rng.IntN(3)*20) * tbf.Mbit
				u.tiers = append(u.tiers, model.TierTarget{Name: fmt.Sprintf("tier%d", i), Rate: r, Ceil: 2 * r})
			}
		}
		spec := model.InterfaceSpec{Name: "lan0", Shaper: model.ShaperHTB, Bandwidth: 500 * tbf.Mbit}
		if seed%3 == 0 {
			spec.Direction, spec.IFB = model.Ingress, "ifb0"
		}
		if seed%2 == 0 {
			spec.Queues = 2 + int(seed%3)
		}
		if seed%5 == 0 {
			spec.Leaf = &model.LeafQdisc{Kind: "bfifo"}
		}
		if seed%4 != 1 {
			u.nodes = universeNodes()
		}
		t.Run(fmt.Sprintf("seed%d-queues%d-%s", seed, spec.Queues, spec.Direction), func(t *testing.T) {
			s, n := runDesiredOps(t, u, spec, 60)
			splitInPlace, nestedInPlace = splitInPlace+s, nestedInPlace+n
		})
	}
	t.Logf("%d operations in place beside a split node, %d beside one split under another", splitInPlace, nestedInPlace)
	if splitInPlace < 50 || nestedInPlace < 10 {
		t.Errorf("%d operations done in place beside a node split over every queue, %d beside one split under another; want 50 and 10 or more", splitInPlace, nestedInPlace)
	}
}

// runDesiredOps runs ops random operations on a Desired of u's targets for
// spec and checks each (TestDesiredOperationsMatchBuild). It returns how
// many were done in place (not rebuilt) with a node split over the queues,
// and with a node split under a split node.
func runDesiredOps(t *testing.T, u *desiredUniverse, spec model.InterfaceSpec, ops int) (splitInPlace, nestedInPlace int) {
	rng := u.rng
	d := model.NewDesired(nil)
	edits := 0
	d.Watch(func(es []model.ClassEdit) { edits += len(es) })
	if _, err := d.Set(u.targets(spec)); err != nil {
		t.Fatal(err)
	}
	k := modeltest.NewMemKernel()
	k.Load(*d.Tree())
	for op := 0; op < ops; op++ {
		var step model.Step
		var err error
		var what string
		switch n := rng.IntN(10); {
		case n < 3:
			ut := u.user(rng.IntN(30))
			what = "put " + ut.Name
			step, err = d.PutUser(ut)
		case n < 5:
			name := fmt.Sprintf("user%02d", rng.IntN(30))
			what = "remove " + name
			step, err = d.RemoveUser(name)
		case n < 7:
			var rs []model.UserRates
			for _, x := range d.Targets().Users {
				if rng.IntN(3) == 0 {
					r := tbf.Rate(1+rng.IntN(6)) * tbf.Mbit
					rs = append(rs, model.UserRates{Name: x.Name, Rate: r, Ceil: r * 2})
				}
			}
			what = fmt.Sprintf("rates of %d users", len(rs))
			step, err = d.SetUserRates(rs)
		case n < 8 && spec.Queues > 1:
			what = "split"
			step, err = d.SetSplit(u.split(spec.Bandwidth, spec.Queues))
		case n < 9 && len(u.nodes) > 0:
			// A spare node, under a node or at the top, small or too big
			// for one queue (split over every queue).
			nt := model.NodeTarget{Name: "spare", Parent: nodeNames[rng.IntN(len(nodeNames))], Rate: 5 * tbf.Mbit, Ceil: 10 * tbf.Mbit}
			if (nt.Parent == "" || nt.Parent == "n0") && rng.IntN(2) == 0 {
				nt.Ceil = 400 * tbf.Mbit // split at the top or under n0 (split itself on 2 queues)
			}
			switch rng.IntN(4) {
			case 0:
				nt = u.nodes[rng.IntN(len(u.nodes))]
				nt.Ceil += tbf.Rate(1+rng.IntN(5)) * tbf.Mbit
				switch rng.IntN(3) {
				case 0:
					nt.Ceil = nt.Rate // n0 joins again on two queues
				case 1:
					nt.Ceil = 300 * tbf.Mbit // n1 splits under n0 on two queues
				}
			case 1:
				what = "remove node spare"
				step, err = d.RemoveNode("spare")
			case 2:
				nt = u.nodes[4]
				nt.Parent = []string{"n3", "n1", ""}[rng.IntN(3)] // moved
			}
			if what == "" {
				what = fmt.Sprintf("put node %s under %q", nt.Name, nt.Parent)
				step, err = d.PutNode(nt)
			}
		default:
			what = "set"
			tg := u.targets(spec)
			if spec.Queues > 1 && rng.IntN(2) == 0 {
				s := u.split(spec.Bandwidth, spec.Queues)
				tg.Queues, tg.TierQueues, tg.NodeQueues = s.Queues, s.Tiers, s.Nodes
			}
			step, err = d.Set(tg)
		}
		if err != nil {
			t.Fatalf("op %d (%s): %v", op, what, err)
		}
		if err := k.Apply(step.Changes); err != nil {
			t.Fatalf("op %d (%s): the kernel refused a change: %v\n%s", op, what, err, changesText(step.Changes))
		}
		tg := *d.Targets()
		tg.Users = slices.Clone(tg.Users)
		want, err := model.Build(tg, d.IDs().Clone())
		if err != nil {
			t.Fatalf("op %d (%s): Build of the targets: %v", op, what, err)
		}
		if m := model.Mismatches(*d.Tree(), want); len(m) != 0 {
			t.Fatalf("op %d (%s): the tree differs from Build of its targets: %q", op, what, m)
		}
		if m := model.Mismatches(k.Tree(want.Device), want); len(m) != 0 {
			t.Fatalf("op %d (%s): the kernel differs after the changes: %q", op, what, m)
		}
		for i, c := range d.Tree().Classes {
			if j, ok := d.Index(c.Handle); !ok || j != i {
				t.Fatalf("op %d (%s): class %s at %d indexed at %d", op, what, c.Handle, i, j)
			}
		}
		if sp := model.SplitNodes(spec, d.Targets().Nodes); !step.Rebuilt && len(step.Changes) > 0 && len(sp) > 0 {
			splitInPlace++
			for _, nt := range d.Targets().Nodes {
				if sp[nt.Name] && nt.Parent != "" {
					nestedInPlace++
					break
				}
			}
		}
	}
	if edits == 0 {
		t.Error("the watcher saw no class edits")
	}
	return splitInPlace, nestedInPlace
}

// TestDesiredOneUserTouchesOneUser checks that one user's operations
// change only that user's class and filters (no rebuild) once the split
// of per-queue trees is known.
func TestDesiredOneUserTouchesOneUser(t *testing.T) {
	for _, queues := range []int{1, 4} {
		t.Run(fmt.Sprint("queues", queues), func(t *testing.T) {
			spec := model.InterfaceSpec{Name: "lan0", Shaper: model.ShaperHTB, Bandwidth: tbf.Gbit, Queues: queues}
			d := model.NewDesired(nil)
			if _, err := d.Set(model.Targets{Interface: spec, Users: manyUsers(200)}); err != nil {
				t.Fatal(err)
			}
			bob := model.UserTarget{Name: "bob", Rate: 2 * tbf.Mbit, Ceil: 2 * tbf.Mbit,
				Prefixes: []netip.Prefix{netip.MustParsePrefix("198.19.1.1/32")}}
			step, err := d.PutUser(bob)
			if err != nil || step.Rebuilt {
				t.Fatalf("put: %v, rebuilt %v", err, step.Rebuilt)
			}
			if got := opKinds(step.Changes); !slices.Equal(got, []string{"add class", "add filter"}) {
				t.Fatalf("put bob: %q", got)
			}
			step, err = d.SetUserRates([]model.UserRates{{Name: "bob", Rate: 3 * tbf.Mbit, Ceil: 3 * tbf.Mbit}})
			if err != nil || len(step.Changes) != 1 || step.Changes[0].Class.Labels.User != "bob" {
				t.Fatalf("rates: %v %s", err, changesText(step.Changes))
			}
			step, err = d.RemoveUser("bob")
			if err != nil || step.Rebuilt {
				t.Fatalf("remove: %v, rebuilt %v", err, step.Rebuilt)
			}
			if got := opKinds(step.Changes); !slices.Equal(got, []string{"delete filter", "delete class"}) {
				t.Fatalf("remove bob: %q", got)
			}
			if step, err = d.RemoveUser("bob"); err != nil || len(step.Changes) != 0 {
				t.Fatalf("remove again: %v %s", err, changesText(step.Changes))
			}
		})
	}
}

// TestDesiredBeforeSet refuses incremental operations without a tree.
func TestDesiredBeforeSet(t *testing.T) {
	d := model.NewDesired(nil)
	if _, err := d.PutUser(model.UserTarget{Name: "a", Rate: tbf.Mbit}); err == nil {
		t.Error("PutUser before Set: no error")
	}
	if _, err := d.SetUserRates([]model.UserRates{{Name: "a", Rate: tbf.Mbit}}); err == nil {
		t.Error("SetUserRates before Set: no error")
	}
	if d.Built() || d.Tree().Root != nil {
		t.Error("a tree without Set")
	}
}

// opKinds is opsOf without the objects' names: "add class".
func opKinds(cs []model.Change) []string {
	out := opsOf(cs)
	for i, o := range out {
		if f := strings.Fields(o); len(f) >= 2 {
			out[i] = f[0] + " " + f[1]
		}
	}
	return out
}

// TestDesiredSetSeesNodes: Set builds again when only a node's rates or a
// user's node changed (the targets differ although the users' rates do
// not).
func TestDesiredSetSeesNodes(t *testing.T) {
	u := &desiredUniverse{rng: rand.New(rand.NewPCG(1, 2)), nodes: universeNodes()}
	tg := u.targets(model.InterfaceSpec{Name: "lan0", Shaper: model.ShaperHTB, Bandwidth: tbf.Gbit})
	d := model.NewDesired(nil)
	if _, err := d.Set(tg); err != nil {
		t.Fatal(err)
	}
	next := tg
	next.Nodes = slices.Clone(tg.Nodes)
	next.Nodes[1].Ceil += tbf.Mbit
	if step, err := d.Set(next); err != nil || len(step.Changes) != 1 {
		t.Errorf("a node's ceil: %v %s", err, changesText(step.Changes))
	}
	moved := next
	moved.Users = slices.Clone(next.Users)
	moved.Users[0].Node = "n4"
	if moved.Users[0].Node == next.Users[0].Node {
		moved.Users[0].Node = "n1"
	}
	if step, err := d.Set(moved); err != nil || len(step.Changes) == 0 {
		t.Errorf("a user's node: %v %s", err, changesText(step.Changes))
	}
}
