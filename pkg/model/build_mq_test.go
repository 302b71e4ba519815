package model_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func mqSpec(n int) model.InterfaceSpec {
	s := egressSpec()
	s.Queues = n
	return s
}

func TestBuildMQLayout(t *testing.T) {
	users := manyUsers(40)
	tiers := []model.TierTarget{{Name: "gold", Rate: 300 * tbf.Mbit, Ceil: 600 * tbf.Mbit}}
	ids := model.NewAssignment()
	tree := mustBuild(t, model.Targets{Interface: mqSpec(4), Users: users, Tiers: tiers}, ids)
	if tree.Root == nil || tree.Root.Kind != model.ShaperMQ || tree.Root.Handle != model.MQHandle {
		t.Fatalf("root = %+v, want mq %s", tree.Root, model.MQHandle)
	}
	if len(tree.Queues) != 4 {
		t.Fatalf("%d queue qdiscs, want 4", len(tree.Queues))
	}
	load := make([]tbf.Rate, 4)
	fl := model.QueueFloors(&tree)
	floors, tierFloors := fl.Queues, fl.Tiers
	var rootSum tbf.Rate
	for q, qd := range tree.Queues {
		if qd.Handle != model.QueueHandle(q) || qd.Parent != model.QueueParent(q) || qd.Kind != model.ShaperHTB || qd.DefaultMinor != 2 {
			t.Errorf("queue %d qdisc = %+v", q, qd)
		}
		root := findClass(t, tree, model.MakeHandle(model.QueueHandle(q).Major(), 1))
		// An idle interface: each queue its floor (its largest user's
		// rate) and a quarter of the rest.
		rootSum += root.Ceil
		if root.Parent != model.QueueHandle(q) || root.Rate != root.Ceil || root.Ceil < floors[q] || root.Ceil > tbf.Gbit/4+floors[q] {
			t.Errorf("queue %d root class %+v, want rate=ceil about %s (floor %s) under %s", q, root, tbf.Gbit/4, floors[q], model.QueueHandle(q))
		}
		if def := findClass(t, tree, model.MakeHandle(model.QueueHandle(q).Major(), 2)); def.Parent != root.Handle {
			t.Errorf("queue %d default class under %s", q, def.Parent)
		}
	}
	if rootSum != tbf.Gbit {
		t.Errorf("queue root ceils add up to %s, want the bandwidth", rootSum)
	}
	for _, u := range users {
		c := classOfUser(t, tree, u.Name)
		q, ok := ids.Queue(u.Name)
		if !ok || model.QueueOf(c.Handle) != q {
			t.Fatalf("user %s: class %s, assigned queue %d (%v)", u.Name, c.Handle, q, ok)
		}
		load[q] += u.Rate
		if u.Tier == "gold" && c.Parent.Minor() < model.FirstTierMinor {
			t.Errorf("gold user %s under %s, want its queue's tier class", u.Name, c.Parent)
		}
	}
	// Gold has a class in every queue (even before it has users there),
	// each with its floor and a quarter of the rest of its rate and ceil
	// until the policy loop rebalances them: together they never exceed
	// the tier's.
	var goldRate, goldCeil tbf.Rate
	goldIn := 0
	for _, c := range tree.Classes {
		if c.Labels.Kind == "tier" {
			goldIn++
			goldRate += c.Rate
			goldCeil += c.Ceil
			fl := tierFloors["gold"][model.QueueOf(c.Handle)]
			if c.Ceil < fl || c.Ceil > 150*tbf.Mbit+fl || c.Rate*2 != c.Ceil {
				t.Errorf("tier class %s rate %s ceil %s, want about a quarter of gold's (75mbit, 150mbit)", c.Handle, c.Rate, c.Ceil)
			}
		}
	}
	if goldIn != 4 || goldRate < 300*tbf.Mbit-4 || goldRate > 300*tbf.Mbit+4 || goldCeil != 600*tbf.Mbit {
		t.Errorf("gold: %d classes, rates add up to %s, ceils to %s; want 4, 300mbit, 600mbit", goldIn, goldRate, goldCeil)
	}
	lo, hi := load[0], load[0]
	for _, l := range load {
		lo, hi = min(lo, l), max(hi, l)
	}
	if hi-lo > 50*tbf.Mbit { // at most one user's rate apart
		t.Errorf("queue loads %v: not balanced", load)
	}
	for _, f := range tree.Filters {
		if f.ClassID != classOfUser(t, tree, f.Labels.User).Handle {
			t.Errorf("filter %v -> %s, not its user's class", f.Prefix, f.ClassID)
		}
	}
	got := applyOK(t, model.Tree{Device: "lan0"}, tree, model.Diff(model.Tree{Device: "lan0"}, tree))
	if len(got.Queues) != 4 {
		t.Errorf("memory kernel holds %d queue qdiscs", len(got.Queues))
	}
}

func TestAssignQueuesStableAndBalanced(t *testing.T) {
	a := model.NewAssignment()
	rates := map[string]tbf.Rate{"a": 100, "b": 50, "c": 50, "d": 10}
	a.AssignQueues(2, rates)
	before := map[string]int{}
	for u := range rates {
		before[u], _ = a.Queue(u)
	}
	if before["a"] == before["b"] || before["b"] != before["c"] || before["d"] != before["a"] {
		t.Errorf("placement %v: want a (100) and d (10) on one queue, b and c (50 each) on the other", before)
	}
	// A new heavy user moves nobody, and lands on the lighter queue.
	rates["e"] = 1000
	delete(rates, "d")
	a.AssignQueues(2, rates)
	for u := range rates {
		if q, _ := a.Queue(u); u != "e" && q != before[u] {
			t.Errorf("user %s moved from queue %d to %d when e joined", u, before[u], q)
		}
	}
	if _, ok := a.Queue("d"); ok {
		t.Error("d was removed but keeps a queue")
	}
	// A different queue count starts over.
	a.AssignQueues(3, rates)
	if a.QueueCount() != 3 {
		t.Errorf("QueueCount %d after AssignQueues(3)", a.QueueCount())
	}
	seen := map[int]bool{}
	for u := range rates {
		q, _ := a.Queue(u)
		seen[q] = true
	}
	if len(seen) != 3 {
		t.Errorf("4 users on 3 queues use %d queues", len(seen))
	}
}

func TestBuildMQNewUserMovesNobody(t *testing.T) {
	users := manyUsers(30)
	ids := model.NewAssignment()
	old := mustBuild(t, model.Targets{Interface: mqSpec(4), Users: users}, ids)
	users = append(users, model.UserTarget{Name: "zz-new", Prefixes: []netipPrefix{pfx(t, "198.19.9.9/32")}, Rate: tbf.Mbit})
	tree := mustBuild(t, model.Targets{Interface: mqSpec(4), Users: users}, ids)
	cs := model.Diff(old, tree)
	if len(cs) != 2 || cs[0].Class == nil || cs[0].Class.Labels.User != "zz-new" || cs[1].Filter == nil {
		t.Fatalf("adding one user: changes\n%s", changesText(cs))
	}
	applyOK(t, old, tree, cs)
}

func TestBuildMQBeyondOneQdisc(t *testing.T) {
	n := model.MaxUsers + 1000
	users := make([]model.UserTarget, n)
	for i := range users {
		a := [4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)}
		users[i] = model.UserTarget{Name: fmt.Sprintf("u%06d", i), Prefixes: []netipPrefix{prefix4(a)}, Rate: tbf.Mbit}
	}
	if _, err := model.Build(model.Targets{Interface: egressSpec(), Users: users}, nil); !errors.Is(err, model.ErrTooManyUsers) {
		t.Fatalf("single tree with %d users: %v, want model.ErrTooManyUsers", n, err)
	}
	tree := mustBuild(t, model.Targets{Interface: mqSpec(2), Users: users}, nil)
	if got := len(tree.Classes); got != n+4 {
		t.Errorf("%d classes, want %d users + 2 root + 2 default", got, n)
	}
}

// Per-queue trees get the single tree's leaves (sized per class), up to
// MaxMQUserLeaves users; beyond, the kernel's defaults.
func TestBuildMQLeaves(t *testing.T) {
	s := mqSpec(2)
	s.Leaf = &model.LeafQdisc{Kind: model.LeafBfifo, Latency: 50 * time.Millisecond}
	tree := mustBuild(t, model.Targets{Interface: s, Users: manyUsers(4)}, nil)
	leaves := 0
	for _, c := range tree.Classes {
		switch c.Labels.Kind {
		case "user", "default":
			if c.Leaf == nil || (c.Leaf.Kind != model.LeafTBF && c.Leaf.Kind != model.LeafBfifo) || c.Leaf.Limit == 0 {
				t.Errorf("%s %s: leaf %+v, want a sized bfifo or segmenting tbf", c.Labels.Kind, c.Handle, c.Leaf)
			}
			leaves++
		default:
			if c.Leaf != nil {
				t.Errorf("inner class %s has leaf %+v", c.Handle, c.Leaf)
			}
		}
	}
	if leaves != 4+2 {
		t.Errorf("%d leaves, want 4 users + 2 default classes", leaves)
	}
	many := mustBuild(t, model.Targets{Interface: s, Users: manyUsers(model.MaxMQUserLeaves + 1)}, nil)
	for _, c := range many.Classes {
		if c.Leaf != nil {
			t.Fatalf("%d users on 2 queues: class %s has leaf %+v, want the kernel's default", model.MaxMQUserLeaves+1, c.Handle, c.Leaf)
		}
	}
}

func TestMQDiffQueueCountRebuilds(t *testing.T) {
	users := manyUsers(8)
	ids := model.NewAssignment()
	four := mustBuild(t, model.Targets{Interface: mqSpec(4), Users: users}, ids)
	two := mustBuild(t, model.Targets{Interface: mqSpec(2), Users: users}, ids)
	cs := model.Diff(four, two)
	if len(cs) < 3 || cs[0].Op != model.OpDelete || cs[0].Qdisc == nil || cs[0].Qdisc.Kind != model.ShaperMQ {
		t.Fatalf("4 -> 2 queues: changes\n%s", changesText(cs))
	}
	applyOK(t, four, two, cs)
	// From a single tree to queues: the root is replaced.
	single := mustBuild(t, model.Targets{Interface: egressSpec(), Users: users}, model.NewAssignment())
	applyOK(t, single, four, model.Diff(single, four))
}

func TestMQQueueRatesChangeInPlace(t *testing.T) {
	users := manyUsers(8)
	ids := model.NewAssignment()
	even := mustBuild(t, model.Targets{Interface: mqSpec(2), Users: users}, ids)
	skew := mustBuild(t, model.Targets{Interface: mqSpec(2), Users: users,
		Queues: []model.QueueTarget{{Rate: 900 * tbf.Mbit, Ceil: 900 * tbf.Mbit}, {Rate: 100 * tbf.Mbit, Ceil: 100 * tbf.Mbit}}}, ids)
	cs := model.Diff(even, skew)
	if len(cs) != 2 || cs[0].Op != model.OpChange || cs[1].Op != model.OpChange {
		t.Fatalf("queue rates: changes\n%s", changesText(cs))
	}
	applyOK(t, even, skew, cs)
}

func TestAssignmentJSONKeepsQueues(t *testing.T) {
	ids := model.NewAssignment()
	mustBuild(t, model.Targets{Interface: mqSpec(3), Users: manyUsers(20)}, ids)
	b, err := json.Marshal(ids)
	if err != nil {
		t.Fatal(err)
	}
	var back model.Assignment
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, u := range manyUsers(20) {
		q1, _ := ids.Queue(u.Name)
		q2, ok := back.Queue(u.Name)
		m1, _ := ids.QueueIDs(q1).User(u.Name)
		m2, _ := back.QueueIDs(q2).User(u.Name)
		if !ok || q1 != q2 || m1 != m2 {
			t.Errorf("user %s: queue %d minor %x, after JSON %d %x", u.Name, q1, m1, q2, m2)
		}
	}
}

// Queue qdisc handles avoid the kernel's qdisc hash bucket 0 (where HTB's
// default leaves are), start at 1: and map back to their queue.
func TestQueueHandles(t *testing.T) {
	if model.QueueHandle(0) != model.RootQdisc {
		t.Errorf("queue 0's qdisc %s, want 1: like the single tree", model.QueueHandle(0))
	}
	seen := map[model.Handle]bool{}
	for q := 0; q < model.MaxQueues; q++ {
		h := model.QueueHandle(q)
		if model.QdiscHashBucket(uint32(h)) == 0 || h == model.MQHandle || h.Minor() != 0 || seen[h] {
			t.Fatalf("queue %d: handle %s (bucket %d, seen %v)", q, h, model.QdiscHashBucket(uint32(h)), seen[h])
		}
		seen[h] = true
		if model.QueueOf(model.MakeHandle(h.Major(), 0x123)) != q {
			t.Fatalf("model.QueueOf(%x:123) = %d, want %d", h.Major(), model.QueueOf(model.MakeHandle(h.Major(), 0x123)), q)
		}
	}
	if model.QdiscHashBucket(2<<16) != 0 || model.QueueOf(model.MakeHandle(2, 1)) != -1 {
		t.Errorf("2: is in bucket %d and queue %d; the kernel puts it with handle 0", model.QdiscHashBucket(2<<16), model.QueueOf(model.MakeHandle(2, 1)))
	}
}

// Targets.TierQueues gives each queue's tier class its share; a split of
// another length is ignored (the idle split: floors and even shares).
func TestBuildMQTierQueues(t *testing.T) {
	users := manyUsers(8)
	tiers := []model.TierTarget{{Name: "gold", Rate: 40 * tbf.Mbit, Ceil: 100 * tbf.Mbit}}
	split := model.RebalanceTier(tiers[0], nil, []tbf.Rate{100 * tbf.Mbit, 0}, nil)
	tree := mustBuild(t, model.Targets{Interface: mqSpec(2), Users: users, Tiers: tiers,
		TierQueues: map[string][]model.QueueTarget{"gold": split}}, nil)
	for _, c := range tree.Classes {
		if c.Labels.Kind != "tier" {
			continue
		}
		q := model.QueueOf(c.Handle)
		if c.Rate != split[q].Rate || c.Ceil != split[q].Ceil {
			t.Errorf("queue %d tier class rate %s ceil %s, want %s %s", q, c.Rate, c.Ceil, split[q].Rate, split[q].Ceil)
		}
	}
	tree = mustBuild(t, model.Targets{Interface: mqSpec(2), Users: users, Tiers: tiers,
		TierQueues: map[string][]model.QueueTarget{"gold": split[:1]}}, nil)
	idle := model.RebalanceTier(tiers[0], nil, []tbf.Rate{0, 0}, model.QueueFloors(&tree).Tiers["gold"])
	for _, c := range tree.Classes {
		if q := model.QueueOf(c.Handle); c.Labels.Kind == "tier" && c.Ceil != idle[q].Ceil {
			t.Errorf("split of 1 for 2 queues: tier class %s ceil %s, want the idle split's %s", c.Handle, c.Ceil, idle[q].Ceil)
		}
	}
}

// PlaceUser places one new user as AssignQueues would, moving nobody;
// SetQueue pins a placement.
func TestPlaceUser(t *testing.T) {
	a := model.NewAssignment()
	if _, ok := a.PlaceUser("x", 1); ok {
		t.Fatal("PlaceUser without queues: ok")
	}
	rates := map[string]tbf.Rate{"a": 100, "b": 30, "c": 30}
	a.AssignQueues(2, rates)
	qa, _ := a.Queue("a")
	qb, _ := a.Queue("b")
	if q, ok := a.PlaceUser("d", 50); !ok || q != qb {
		t.Errorf("d (50) on queue %d, want b's and c's lighter queue %d", q, qb)
	}
	if q, _ := a.PlaceUser("e", 10); q != qa {
		t.Errorf("e on queue %d, want a's queue %d (100 against 110)", q, qa)
	}
	if q, _ := a.PlaceUser("a", 1000); q != qa {
		t.Errorf("a placed again: queue %d, want its own %d", q, qa)
	}
	if err := a.SetQueue("z", 2, 2); err == nil {
		t.Error("SetQueue on queue 2 of 2: no error")
	}
	if err := a.SetQueue("z", 2, 1); err != nil {
		t.Fatal(err)
	}
	if q, ok := a.Queue("z"); !ok || q != 1 || a.QueueCount() != 2 {
		t.Errorf("z on queue %d (%v) of %d after SetQueue", q, ok, a.QueueCount())
	}
}

// SplitOf reads back the split SplitClasses (and Build) wrote.
func TestSplitOfIsSplitClassesInverse(t *testing.T) {
	tiers := []model.TierTarget{{Name: "gold", Rate: 40 * tbf.Mbit, Ceil: 100 * tbf.Mbit}}
	tg := model.Targets{Interface: mqSpec(2), Users: manyUsers(8), Tiers: tiers,
		Queues:     model.RebalanceQueues(tbf.Gbit, nil, []tbf.Rate{tbf.Gbit, 0}, nil),
		TierQueues: map[string][]model.QueueTarget{"gold": model.RebalanceTier(tiers[0], nil, []tbf.Rate{0, 100 * tbf.Mbit}, nil)}}
	ids := model.NewAssignment()
	tree := mustBuild(t, tg, ids)
	got, ok := model.SplitOf(&tree, ids)
	if !ok || !slices.Equal(got.Queues, tg.Queues) || !slices.Equal(got.Tiers["gold"], tg.TierQueues["gold"]) || len(got.Tiers) != 1 {
		t.Errorf("SplitOf = %+v (%v), want queues %v, gold %v", got, ok, tg.Queues, tg.TierQueues["gold"])
	}
	tg.Interface.Queues = 1
	single := mustBuild(t, tg, model.NewAssignment())
	if _, ok := model.SplitOf(&single, ids); ok {
		t.Error("SplitOf of a single tree: ok")
	}
}

// A top-level node whose ceil is more than one queue's share of the
// bandwidth is split as tiers are: a class in every queue (shares adding up
// to its ceil), its own users spread over the queues, and each node under
// it placed whole, under its class in that queue, unless it is too big for
// a queue too (then it is split under it). A smaller top-level node stays
// whole on one queue.
func TestBuildMQSplitsANodeTooBigForOneQueue(t *testing.T) {
	nodes := []model.NodeTarget{
		{Name: "campus", Rate: 600 * tbf.Mbit, Ceil: tbf.Gbit},
		{Name: "dorm", Parent: "campus", Rate: 200 * tbf.Mbit, Ceil: 400 * tbf.Mbit},
		{Name: "ap", Parent: "dorm", Rate: 100 * tbf.Mbit, Ceil: 300 * tbf.Mbit},
		{Name: "lab", Parent: "campus", Rate: 200 * tbf.Mbit, Ceil: 400 * tbf.Mbit},
		{Name: "shop", Rate: 50 * tbf.Mbit, Ceil: 200 * tbf.Mbit},
		// Too big for a queue itself, under a split node: split too.
		{Name: "hall", Parent: "campus", Rate: 100 * tbf.Mbit, Ceil: 600 * tbf.Mbit},
	}
	users := manyUsers(18)
	for i := range users {
		users[i].Node = []string{"campus", "campus", "ap", "lab", "shop", "", "hall", "hall", "hall"}[i%9]
		users[i].Rate, users[i].Ceil = 30*tbf.Mbit, 100*tbf.Mbit
	}
	spec := mqSpec(2)
	if got := model.SplitNodes(spec, nodes); len(got) != 2 || !got["campus"] || !got["hall"] {
		t.Fatalf("SplitNodes = %v, want campus and hall (ceils 1gbit and 600mbit > 500mbit a queue; shop 200mbit, dorm 400mbit)", got)
	}
	ids := model.NewAssignment()
	tree := mustBuild(t, model.Targets{Interface: spec, Nodes: nodes, Users: users}, ids)
	byNode := map[string][]model.Class{}
	for _, c := range tree.Classes {
		if c.Labels.Kind == "node" {
			byNode[c.Labels.Node] = append(byNode[c.Labels.Node], c)
		}
	}
	campus := byNode["campus"]
	if len(campus) != 2 || model.QueueOf(campus[0].Handle) == model.QueueOf(campus[1].Handle) {
		t.Fatalf("campus classes %+v, want one in each queue", campus)
	}
	inQueue := map[int]model.Handle{}
	var ceils, rates tbf.Rate
	for _, c := range campus {
		q := model.QueueOf(c.Handle)
		if c.Parent != model.MakeHandle(model.QueueHandle(q).Major(), model.RootClass.Minor()) {
			t.Errorf("campus class %s under %s, want queue %d's root class", c.Handle, c.Parent, q)
		}
		inQueue[q] = c.Handle
		ceils += c.Ceil
		rates += c.Rate
	}
	if ceils != tbf.Gbit || rates < 590*tbf.Mbit || rates > 610*tbf.Mbit {
		t.Errorf("campus shares: ceils add up to %s, rates to %s; want 1gbit and about 600mbit", ceils, rates)
	}
	for _, c := range byNode["hall"] {
		if q := model.QueueOf(c.Handle); len(byNode["hall"]) != 2 || c.Parent != inQueue[q] {
			t.Errorf("hall's classes %+v: want one in each queue, under campus's class there", byNode["hall"])
		}
	}
	for _, name := range []string{"dorm", "ap", "lab", "shop"} {
		if len(byNode[name]) != 1 {
			t.Fatalf("node %s has %d classes, want 1", name, len(byNode[name]))
		}
	}
	dorm, ap, lab := byNode["dorm"][0], byNode["ap"][0], byNode["lab"][0]
	if dorm.Parent != inQueue[model.QueueOf(dorm.Handle)] || lab.Parent != inQueue[model.QueueOf(lab.Handle)] {
		t.Errorf("dorm under %s, lab under %s: want campus's class in their queue", dorm.Parent, lab.Parent)
	}
	if model.QueueOf(dorm.Handle) == model.QueueOf(lab.Handle) {
		t.Errorf("dorm and lab (200mbit each) both on queue %d: want them balanced", model.QueueOf(dorm.Handle))
	}
	if ap.Parent != dorm.Handle {
		t.Errorf("ap under %s, want dorm %s (its whole subtree on dorm's queue)", ap.Parent, dorm.Handle)
	}
	queuesOfCampusUsers := map[int]bool{}
	for _, u := range users {
		c := classOfUser(t, tree, u.Name)
		q := model.QueueOf(c.Handle)
		switch u.Node {
		case "campus":
			queuesOfCampusUsers[q] = true
			if c.Parent != inQueue[q] {
				t.Errorf("user %s under %s, want campus's class in queue %d", u.Name, c.Parent, q)
			}
		case "ap":
			if c.Parent != ap.Handle {
				t.Errorf("user %s under %s, want ap %s", u.Name, c.Parent, ap.Handle)
			}
		case "shop":
			if c.Parent != byNode["shop"][0].Handle {
				t.Errorf("user %s under %s, want shop", u.Name, c.Parent)
			}
		}
	}
	if len(queuesOfCampusUsers) != 2 {
		t.Errorf("campus's own users on queues %v, want both", queuesOfCampusUsers)
	}
	hallIn := map[int]model.Handle{}
	for _, c := range byNode["hall"] {
		hallIn[model.QueueOf(c.Handle)] = c.Handle
	}
	hallQueues := map[int]bool{}
	for _, u := range users {
		if c := classOfUser(t, tree, u.Name); u.Node == "hall" {
			hallQueues[model.QueueOf(c.Handle)] = true
			if c.Parent != hallIn[model.QueueOf(c.Handle)] {
				t.Errorf("user %s under %s, want hall's class in its queue", u.Name, c.Parent)
			}
		}
	}
	if len(hallQueues) != 2 {
		t.Errorf("hall's users on queues %v, want both", hallQueues)
	}
	// The floors of campus's classes: the largest guarantee right under
	// it in each queue (dorm's and lab's 200mbit, above any user's 30mbit).
	fl := model.QueueFloors(&tree)
	for q := 0; q < 2; q++ {
		if fl.Nodes["campus"][q] != 200*tbf.Mbit {
			t.Errorf("campus's floor in queue %d = %s, want 200mbit", q, fl.Nodes["campus"][q])
		}
	}
	// SplitOf reads back what SplitClasses writes, campus included; shop
	// (one queue) is not a split.
	split, ok := model.SplitOf(&tree, ids)
	if !ok || len(split.Nodes) != 2 || len(split.Nodes["campus"]) != 2 || len(split.Nodes["hall"]) != 2 {
		t.Fatalf("SplitOf = %+v (%v), want campus's and hall's classes", split, ok)
	}
	tg := model.Targets{Interface: spec, Nodes: nodes, Users: users, Queues: split.Queues, TierQueues: split.Tiers,
		NodeQueues: map[string][]model.QueueTarget{"campus": {{Rate: 500 * tbf.Mbit, Ceil: 900 * tbf.Mbit}, {Rate: 100 * tbf.Mbit, Ceil: 100 * tbf.Mbit}},
			"hall": {{Rate: 50 * tbf.Mbit, Ceil: 300 * tbf.Mbit}, {Rate: 50 * tbf.Mbit, Ceil: 300 * tbf.Mbit}}}}
	cs, err := model.SplitClasses(tg, ids)
	if err != nil {
		t.Fatal(err)
	}
	again := tree
	again.Classes = slices.Clone(tree.Classes)
	for _, c := range cs {
		for i := range again.Classes {
			if again.Classes[i].Handle == c.Handle {
				again.Classes[i] = c
			}
		}
	}
	if got, _ := model.SplitOf(&again, ids); !slices.Equal(got.Nodes["campus"], tg.NodeQueues["campus"]) || !slices.Equal(got.Nodes["hall"], tg.NodeQueues["hall"]) {
		t.Errorf("SplitOf after SplitClasses: %v, want %v", got.Nodes, tg.NodeQueues)
	}
}
