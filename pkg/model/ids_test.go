package model_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestAssignFreshFollowsSortedNames(t *testing.T) {
	a := model.NewAssignment()
	if err := a.Assign([]string{"carol", "alice", "bob", "alice"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint16{"alice": 0x100, "bob": 0x101, "carol": 0x102}
	if got := a.Users(); !maps.Equal(got, want) {
		t.Fatalf("users %v, want %v", got, want)
	}
	if u, ok := a.UserByMinor(0x101); !ok || u != "bob" {
		t.Errorf("UserByMinor(0x101) = %q, %v", u, ok)
	}
}

func TestAssignKeepsReleasesAndDoesNotReuseAtOnce(t *testing.T) {
	a := model.NewAssignment()
	if err := a.Assign([]string{"alice", "bob", "carol"}); err != nil {
		t.Fatal(err)
	}
	bob, _ := a.User("bob")
	if err := a.Assign([]string{"carol", "dave", "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.User("bob"); ok {
		t.Error("bob was not released")
	}
	if m, _ := a.User("alice"); m != 0x100 {
		t.Errorf("alice moved to %x", m)
	}
	if m, _ := a.User("carol"); m != 0x102 {
		t.Errorf("carol moved to %x", m)
	}
	if m, _ := a.User("dave"); m == bob || m != 0x103 {
		t.Errorf("dave got %x; want the next unused minor 103, not bob's %x", m, bob)
	}
}

// TestAssignRandomSequences checks, for random add/remove sequences in any
// order, that a user keeps its minor for as long as it is present and that
// minors are unique and in range.
func TestAssignRandomSequences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 50; round++ {
		a := model.NewAssignment()
		present := map[string]uint16{}
		for step := 0; step < 30; step++ {
			names := slices.Collect(maps.Keys(present))
			rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
			keep := names[:rng.IntN(len(names)+1)]
			for n := rng.IntN(20); n > 0; n-- {
				keep = append(keep, fmt.Sprintf("u%d", rng.IntN(200)))
			}
			rng.Shuffle(len(keep), func(i, j int) { keep[i], keep[j] = keep[j], keep[i] })
			if err := a.Assign(keep); err != nil {
				t.Fatal(err)
			}
			got := a.Users()
			seen := map[uint16]string{}
			for n, m := range got {
				if m < model.FirstUserMinor || m > model.LastUserMinor {
					t.Fatalf("user %s got minor %x out of range", n, m)
				}
				if o, dup := seen[m]; dup {
					t.Fatalf("users %s and %s share minor %x", n, o, m)
				}
				seen[m] = n
				if old, ok := present[n]; ok && old != m {
					t.Fatalf("round %d step %d: user %s moved from %x to %x", round, step, n, old, m)
				}
			}
			if len(got) != model.CountUnique(keep) {
				t.Fatalf("%d users assigned, want %d", len(got), model.CountUnique(keep))
			}
			present = got
		}
	}
}

func TestAssignExhaustion(t *testing.T) {
	names := make([]string, model.MaxUsers+1)
	for i := range names {
		names[i] = fmt.Sprintf("u%d", i)
	}
	a := model.NewAssignment()
	if err := a.Assign(names[:model.MaxUsers]); err != nil {
		t.Fatalf("assigning exactly %d users: %v", model.MaxUsers, err)
	}
	err := a.Assign(names)
	if !errors.Is(err, model.ErrTooManyUsers) || !strings.Contains(err.Error(), "65279") || !strings.Contains(err.Error(), "65280 users") {
		t.Fatalf("error %v, want ErrTooManyUsers naming 65280 users and the limit 65279", err)
	}
	if len(a.Users()) != model.MaxUsers {
		t.Errorf("failed Assign changed the assignment to %d users", len(a.Users()))
	}
}

func TestAssignmentJSONRoundTrip(t *testing.T) {
	a := model.NewAssignment()
	if err := a.Assign([]string{"alice", "bob", "carol"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Assign([]string{"alice", "carol"}); err != nil {
		t.Fatal(err)
	}
	if err := a.AssignTiers([]string{"gold"}); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back model.Assignment
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if !maps.Equal(back.Users(), a.Users()) || !maps.Equal(back.Tiers(), a.Tiers()) {
		t.Fatalf("round trip %s gave users %v tiers %v", b, back.Users(), back.Tiers())
	}
	// The cursor survives: a new user does not get bob's released minor.
	if err := back.Assign([]string{"alice", "carol", "dave"}); err != nil {
		t.Fatal(err)
	}
	if m, _ := back.User("dave"); m != 0x103 {
		t.Errorf("dave got %x after a restart, want 103 (bob's 101 stays unused)", m)
	}
	for _, bad := range []string{
		`{"users":{"alice":5}}`,
		`{"users":{"alice":256,"bob":256}}`,
		`{"tiers":{"gold":4096}}`,
		`[1]`,
	} {
		var x model.Assignment
		if err := json.Unmarshal([]byte(bad), &x); err == nil {
			t.Errorf("unmarshal %s succeeded", bad)
		}
	}
}

func TestAssignmentFromTree(t *testing.T) {
	ids := model.NewAssignment()
	us := manyUsers(30)
	tg := model.Targets{Interface: egressSpec(), Tiers: []model.TierTarget{{Name: "gold", Rate: 100e6}}, Users: us}
	mustBuild(t, tg, ids)
	// Churn so that minors are not simply sorted order.
	mustBuild(t, model.Targets{Interface: egressSpec(), Tiers: tg.Tiers, Users: us[5:]}, ids)
	tree := mustBuild(t, tg, ids)

	users := map[string][]netip.Prefix{}
	tiers := map[string]string{}
	for _, u := range us {
		users[u.Name] = u.Prefixes
		tiers[u.Name] = u.Tier
	}
	got := model.AssignmentFromTree(tree, users)
	got.RecoverTiers(tree, tiers)
	if !maps.Equal(got.Users(), ids.Users()) {
		t.Fatalf("recovered users %v, want %v", got.Users(), ids.Users())
	}
	if !maps.Equal(got.Tiers(), ids.Tiers()) {
		t.Fatalf("recovered tiers %v, want %v", got.Tiers(), ids.Tiers())
	}
	// Rebuilding with the recovered assignment changes nothing.
	if cs := model.Diff(tree, mustBuild(t, tg, got)); len(cs) != 0 {
		t.Fatalf("rebuild after recovery needs changes:\n%s", changesText(cs))
	}
}

func TestAssignmentFromTreeConflictsAndNewUsers(t *testing.T) {
	ids := model.NewAssignment()
	us := manyUsers(3) // u00000 has two prefixes
	tree := mustBuild(t, model.Targets{Interface: egressSpec(), Users: us}, ids)
	// u00000's v4 address now also claimed by "thief" (one prefix), while
	// u00000 keeps two: the stronger claim wins; "new" has no evidence.
	users := map[string][]netip.Prefix{
		"u00000": us[0].Prefixes,
		"thief":  us[0].Prefixes[:1],
		"u00001": us[1].Prefixes,
		"new":    {pfx(t, "198.18.200.1/32")},
	}
	got := model.AssignmentFromTree(tree, users)
	want := map[string]uint16{"u00000": 0x100, "u00001": 0x101}
	if !maps.Equal(got.Users(), want) {
		t.Fatalf("recovered %v, want %v", got.Users(), want)
	}
	if err := got.Assign(slices.Collect(maps.Keys(users))); err != nil {
		t.Fatal(err)
	}
	if m, _ := got.User("new"); m <= 0x102 {
		t.Errorf("new user got %x, want a minor after every class in the tree (1:102 was u00002's)", m)
	}
	if got.Users()["u00000"] != 0x100 || got.Users()["u00001"] != 0x101 {
		t.Errorf("Assign moved recovered users: %v", got.Users())
	}
}

func TestAssignmentZeroValue(t *testing.T) {
	var a model.Assignment
	if _, ok := a.User("alice"); ok {
		t.Fatal("zero Assignment has alice")
	}
	if err := a.Assign([]string{"alice"}); err != nil {
		t.Fatal(err)
	}
	if m, ok := a.User("alice"); !ok || m != model.FirstUserMinor {
		t.Errorf("alice got %x, %v", m, ok)
	}
}

// TestRecoverNodes: a restart without a state file finds every node's
// class from the users' classes and the nodes' own, so that the tree
// built again equals the kernel's (no writes).
func TestRecoverNodes(t *testing.T) {
	tg := model.Targets{Interface: egressSpec(),
		Nodes: []model.NodeTarget{
			{Name: "site", Rate: 500 * tbf.Mbit, Ceil: 500 * tbf.Mbit},
			{Name: "bldg", Parent: "site", Rate: 300 * tbf.Mbit, Ceil: 300 * tbf.Mbit},
			{Name: "ap-1", Parent: "bldg", Rate: 100 * tbf.Mbit, Ceil: 100 * tbf.Mbit},
			{Name: "ap-2", Parent: "bldg", Rate: 100 * tbf.Mbit, Ceil: 100 * tbf.Mbit},
		},
		Users: manyUsers(40),
	}
	userNodes := map[string]string{}
	users := map[string][]netip.Prefix{}
	for i := range tg.Users {
		tg.Users[i].Node = []string{"ap-1", "ap-2"}[i%2]
		userNodes[tg.Users[i].Name] = tg.Users[i].Node
		users[tg.Users[i].Name] = tg.Users[i].Prefixes
	}
	ids := model.NewAssignment()
	if err := ids.Assign([]string{"someone-gone"}); err != nil { // shift the minors
		t.Fatal(err)
	}
	actual := mustBuild(t, tg, ids)
	parents := map[string]string{"site": "", "bldg": "site", "ap-1": "bldg", "ap-2": "bldg"}
	got := model.AssignmentFromTree(actual, users)
	got.RecoverNodes(actual, userNodes, parents)
	for n, m := range ids.Nodes() {
		if g, ok := got.Node(n); !ok || g != m {
			t.Errorf("node %s: recovered %x (%v), want %x", n, g, ok, m)
		}
	}
	again := mustBuild(t, tg, got)
	if cs := model.Diff(actual, again); len(cs) != 0 {
		t.Errorf("the tree built with the recovered ids differs:\n%s", changesText(cs))
	}
}
