package policy

import (
	"cmp"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
)

const nodeSetMain = `
[[interface]]
name = "lan0"
bandwidth = "1gbit"

[[interface]]
name = "lan0"
direction = "ingress"
bandwidth = "1gbit"

[[interface]]
name = "lan1"
bandwidth = "100mbit"

[tiers.gold]
rate = "10mbit"
ceil = "100mbit"

[nodes.north]
rate = "600mbit"
upload_rate = "300mbit"
interfaces = ["lan0"]

[nodes.ap-1]
parent = "north"
rate = "150mbit"
upload_rate = "100mbit"
`

const nodeSetUsers = `
[[user]]
name = "alice"
tier = "gold"
node = "ap-1"
addresses = ["198.18.0.1"]

[[user]]
name = "carol"
tier = "gold"
addresses = ["198.18.0.3"]
`

// sortedNodes are ir's node targets and explanations, by name.
func sortedNodes(ir *InterfaceResult) ([]model.NodeTarget, []Explanation) {
	ts, xs := slices.Clone(ir.Targets.Nodes), slices.Clone(ir.Nodes)
	slices.SortFunc(ts, func(a, b model.NodeTarget) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(xs, func(a, b Explanation) int { return cmp.Compare(a.Node, b.Node) })
	return ts, xs
}

// sameAsEvaluate fails t unless r holds, interface by interface, the node
// classes Evaluate(plan) gives (in any order) and the same user classes.
func sameAsEvaluate(t *testing.T, what string, r *Result, plan *config.Plan, now time.Time) {
	t.Helper()
	want := Evaluate(plan, Overrides{}, nil, now)
	for i := range want.Interfaces {
		gt, gx := sortedNodes(&r.Interfaces[i])
		wt, wx := sortedNodes(&want.Interfaces[i])
		if !reflect.DeepEqual(gt, wt) || !reflect.DeepEqual(gx, wx) {
			t.Errorf("%s: interface %d nodes %+v, Evaluate gives %+v", what, i, gt, wt)
		}
		if !reflect.DeepEqual(r.Interfaces[i].Targets.Users, want.Interfaces[i].Targets.Users) {
			t.Errorf("%s: interface %d users changed: %+v, Evaluate gives %+v", what, i, r.Interfaces[i].Targets.Users, want.Interfaces[i].Targets.Users)
		}
	}
}

// TestAddRemoveNodeIsEvaluate: a node added under room in its parent and
// then removed changes only its own class, the same as evaluating the
// plan with and without it.
func TestAddRemoveNodeIsEvaluate(t *testing.T) {
	plan := loadPlan(t, nodeSetMain, nodeSetUsers)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	res := Evaluate(plan, Overrides{}, nil, now)
	for _, spec := range []config.NodeSpec{
		{Name: "ap-0", Parent: "north", Rate: mbit(100), Ceil: mbit(300), UploadRate: mbit(50)},
		{Name: "south", Rate: mbit(50)}, // top level: on every interface
	} {
		with, err := plan.WithNode(spec)
		if err != nil {
			t.Fatal(err)
		}
		if !res.AddNode(with, Overrides{}, now, spec.Name) {
			t.Fatalf("%s not added alone", spec.Name)
		}
		sameAsEvaluate(t, "after adding "+spec.Name, res, with, now)
		if !res.RemoveNode(spec.Name) {
			t.Fatalf("%s not removed alone", spec.Name)
		}
		sameAsEvaluate(t, "after removing "+spec.Name, res, plan, now)
	}
}

// TestAddNodeRefusesWhatMovesOthers: a node whose ceil would be capped or
// whose guarantee oversubscribes its parent is not added alone, and the
// result stays as it was; a node with users is not removed alone.
func TestAddNodeRefusesWhatMovesOthers(t *testing.T) {
	plan := loadPlan(t, nodeSetMain, nodeSetUsers)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	res := Evaluate(plan, Overrides{}, nil, now)
	before := Evaluate(plan, Overrides{}, nil, now)
	for _, spec := range []config.NodeSpec{
		{Name: "big", Parent: "north", Rate: mbit(100), Ceil: mbit(700)},         // ceil above north's 600mbit
		{Name: "greedy", Parent: "north", Rate: mbit(500)},                       // 150+500 > 600
		{Name: "upload", Parent: "north", Rate: mbit(10), UploadRate: mbit(250)}, // 100+250 > 300 on ingress
	} {
		with, err := plan.WithNode(spec)
		if err != nil {
			t.Fatal(err)
		}
		if res.AddNode(with, Overrides{}, now, spec.Name) {
			t.Errorf("%s added alone, though other classes change", spec.Name)
		}
		if !reflect.DeepEqual(res, before) {
			t.Fatalf("a refused AddNode(%s) changed the result", spec.Name)
		}
	}
	if res.RemoveNode("ap-1") {
		t.Error("ap-1, with alice behind it, removed alone")
	}
	if res.RemoveNode("north") {
		t.Error("north, with ap-1 behind it, removed alone")
	}
}
