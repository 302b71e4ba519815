package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/shaperd/shaperd/pkg/tbf"
)

func mqSpec(n int) InterfaceSpec {
	s := egressSpec()
	s.Queues = n
	return s
}

func TestBuildMQLayout(t *testing.T) {
	users := manyUsers(40)
	tiers := []TierTarget{{Name: "gold", Rate: 300 * tbf.Mbit, Ceil: 600 * tbf.Mbit}}
	ids := NewAssignment()
	tree := mustBuild(t, Targets{Interface: mqSpec(4), Users: users, Tiers: tiers}, ids)
	if tree.Root == nil || tree.Root.Kind != ShaperMQ || tree.Root.Handle != MQHandle {
		t.Fatalf("root = %+v, want mq %s", tree.Root, MQHandle)
	}
	if len(tree.Queues) != 4 {
		t.Fatalf("%d queue qdiscs, want 4", len(tree.Queues))
	}
	load := make([]tbf.Rate, 4)
	for q, qd := range tree.Queues {
		if qd.Handle != QueueHandle(q) || qd.Parent != QueueParent(q) || qd.Kind != ShaperHTB || qd.DefaultMinor != 2 {
			t.Errorf("queue %d qdisc = %+v", q, qd)
		}
		root := findClass(t, tree, MakeHandle(QueueHandle(q).Major(), 1))
		if root.Parent != QueueHandle(q) || root.Rate != tbf.Gbit/4 || root.Ceil != tbf.Gbit/4 {
			t.Errorf("queue %d root class %+v, want rate=ceil=%s under %s", q, root, tbf.Gbit/4, QueueHandle(q))
		}
		if def := findClass(t, tree, MakeHandle(QueueHandle(q).Major(), 2)); def.Parent != root.Handle {
			t.Errorf("queue %d default class under %s", q, def.Parent)
		}
	}
	for _, u := range users {
		c := classOfUser(t, tree, u.Name)
		q, ok := ids.Queue(u.Name)
		if !ok || QueueOf(c.Handle) != q {
			t.Fatalf("user %s: class %s, assigned queue %d (%v)", u.Name, c.Handle, q, ok)
		}
		load[q] += u.Rate
		if u.Tier == "gold" && c.Parent.Minor() < FirstTierMinor {
			t.Errorf("gold user %s under %s, want its queue's tier class", u.Name, c.Parent)
		}
	}
	var goldRate tbf.Rate
	for _, c := range tree.Classes {
		if c.Labels.Kind == "tier" {
			goldRate += c.Rate
			if c.Ceil != 600*tbf.Mbit {
				t.Errorf("tier class %s ceil %s, want the tier's 600mbit", c.Handle, c.Ceil)
			}
		}
	}
	if d := float64(goldRate) - float64(300*tbf.Mbit); d > 4 || d < -4*8 {
		t.Errorf("gold's per-queue rates add up to %s, want 300mbit", goldRate)
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
	got := applyOK(t, Tree{Device: "lan0"}, tree, Diff(Tree{Device: "lan0"}, tree))
	if len(got.Queues) != 4 {
		t.Errorf("memory kernel holds %d queue qdiscs", len(got.Queues))
	}
}

func TestAssignQueuesStableAndBalanced(t *testing.T) {
	a := NewAssignment()
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
	ids := NewAssignment()
	old := mustBuild(t, Targets{Interface: mqSpec(4), Users: users}, ids)
	users = append(users, UserTarget{Name: "zz-new", Prefixes: []netipPrefix{pfx(t, "198.19.9.9/32")}, Rate: tbf.Mbit})
	tree := mustBuild(t, Targets{Interface: mqSpec(4), Users: users}, ids)
	cs := Diff(old, tree)
	if len(cs) != 2 || cs[0].Class == nil || cs[0].Class.Labels.User != "zz-new" || cs[1].Filter == nil {
		t.Fatalf("adding one user: changes\n%s", changesText(cs))
	}
	applyOK(t, old, tree, cs)
}

func TestBuildMQBeyondOneQdisc(t *testing.T) {
	n := MaxUsers + 1000
	users := make([]UserTarget, n)
	for i := range users {
		a := [4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)}
		users[i] = UserTarget{Name: fmt.Sprintf("u%06d", i), Prefixes: []netipPrefix{prefix4(a)}, Rate: tbf.Mbit}
	}
	if _, err := Build(Targets{Interface: egressSpec(), Users: users}, nil); !errors.Is(err, ErrTooManyUsers) {
		t.Fatalf("single tree with %d users: %v, want ErrTooManyUsers", n, err)
	}
	tree := mustBuild(t, Targets{Interface: mqSpec(2), Users: users}, nil)
	if got := len(tree.Classes); got != n+4 {
		t.Errorf("%d classes, want %d users + 2 root + 2 default", got, n)
	}
}

func TestBuildMQRefusesLeaves(t *testing.T) {
	s := mqSpec(2)
	s.Leaf = &LeafQdisc{Kind: LeafBfifo, Limit: 10000}
	var fe *FieldError
	if _, err := Build(Targets{Interface: s, Users: manyUsers(2)}, nil); !errors.As(err, &fe) || fe.Field != "leaf" {
		t.Fatalf("leaf with queues: %v, want a FieldError on leaf", err)
	}
}

func TestMQDiffQueueCountRebuilds(t *testing.T) {
	users := manyUsers(8)
	ids := NewAssignment()
	four := mustBuild(t, Targets{Interface: mqSpec(4), Users: users}, ids)
	two := mustBuild(t, Targets{Interface: mqSpec(2), Users: users}, ids)
	cs := Diff(four, two)
	if len(cs) < 3 || cs[0].Op != OpDelete || cs[0].Qdisc == nil || cs[0].Qdisc.Kind != ShaperMQ {
		t.Fatalf("4 -> 2 queues: changes\n%s", changesText(cs))
	}
	applyOK(t, four, two, cs)
	// From a single tree to queues: the root is replaced.
	single := mustBuild(t, Targets{Interface: egressSpec(), Users: users}, NewAssignment())
	applyOK(t, single, four, Diff(single, four))
}

func TestMQQueueRatesChangeInPlace(t *testing.T) {
	users := manyUsers(8)
	ids := NewAssignment()
	even := mustBuild(t, Targets{Interface: mqSpec(2), Users: users}, ids)
	skew := mustBuild(t, Targets{Interface: mqSpec(2), Users: users,
		Queues: []QueueTarget{{Rate: 900 * tbf.Mbit, Ceil: 900 * tbf.Mbit}, {Rate: 100 * tbf.Mbit, Ceil: 100 * tbf.Mbit}}}, ids)
	cs := Diff(even, skew)
	if len(cs) != 2 || cs[0].Op != OpChange || cs[1].Op != OpChange {
		t.Fatalf("queue rates: changes\n%s", changesText(cs))
	}
	applyOK(t, even, skew, cs)
}

func TestAssignmentJSONKeepsQueues(t *testing.T) {
	ids := NewAssignment()
	mustBuild(t, Targets{Interface: mqSpec(3), Users: manyUsers(20)}, ids)
	b, err := json.Marshal(ids)
	if err != nil {
		t.Fatal(err)
	}
	var back Assignment
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
	if QueueHandle(0) != RootQdisc {
		t.Errorf("queue 0's qdisc %s, want 1: like the single tree", QueueHandle(0))
	}
	seen := map[Handle]bool{}
	for q := 0; q < MaxQueues; q++ {
		h := QueueHandle(q)
		if qdiscHashBucket(uint32(h)) == 0 || h == MQHandle || h.Minor() != 0 || seen[h] {
			t.Fatalf("queue %d: handle %s (bucket %d, seen %v)", q, h, qdiscHashBucket(uint32(h)), seen[h])
		}
		seen[h] = true
		if QueueOf(MakeHandle(h.Major(), 0x123)) != q {
			t.Fatalf("QueueOf(%x:123) = %d, want %d", h.Major(), QueueOf(MakeHandle(h.Major(), 0x123)), q)
		}
	}
	if qdiscHashBucket(2<<16) != 0 || QueueOf(MakeHandle(2, 1)) != -1 {
		t.Errorf("2: is in bucket %d and queue %d; the kernel puts it with handle 0", qdiscHashBucket(2<<16), QueueOf(MakeHandle(2, 1)))
	}
}
