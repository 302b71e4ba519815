package policy

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
)

const nodesMain = `
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
rate = "100mbit"
ceil = "500mbit"
aggregate_rate = "300mbit"

[nodes.north]
rate = "600mbit"
upload_rate = "200mbit"
interfaces = ["lan0"]

[nodes.ap-1]
parent = "north"
rate = "150mbit"
ceil = "800mbit"

[nodes.ap-2]
parent = "north"
rate = "150mbit"
`

const nodesUsers = `
[[user]]
name = "alice"
tier = "gold"
node = "ap-1"
addresses = ["198.18.0.1"]

[[user]]
name = "bob"
tier = "gold"
node = "ap-1"
addresses = ["198.18.0.2"]

[[user]]
name = "carol"
tier = "gold"
addresses = ["198.18.0.3"]
`

// TestEvaluateNodes: a node's users hang from it on the node's
// interfaces only; ceilings are capped to the parent's; guarantees under
// a node are scaled to its rate; upload rates apply on ingress.
func TestEvaluateNodes(t *testing.T) {
	plan := loadPlan(t, nodesMain, nodesUsers)
	res := Evaluate(plan, Overrides{}, nil, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	down := res.Interfaces[0]
	if len(down.Targets.Nodes) != 3 || down.Targets.Nodes[0].Name != "north" {
		t.Fatalf("lan0 nodes: %+v", down.Targets.Nodes)
	}
	ap1 := down.Targets.Nodes[1]
	if ap1.Name != "ap-1" || ap1.Ceil != mbit(600) {
		t.Errorf("ap-1's ceil 800mbit is capped to north's 600mbit: %+v", ap1)
	}
	if x, _ := down.NodeOf("ap-1"); !x.CeilCapped || !strings.Contains(x.Reason, "capped to node north's ceil 600mbit") {
		t.Errorf("ap-1's explanation: %+v", x)
	}
	for j, u := range down.Targets.Users {
		switch u.Name {
		case "alice", "bob":
			if u.Node != "ap-1" || u.Ceil != mbit(500) {
				t.Errorf("%s: node %q ceil %v", u.Name, u.Node, u.Ceil)
			}
			// 2 x 100mbit under ap-1's 150mbit: scaled by 1.5 (in 1/256 steps).
			if u.Rate < mbit(74) || u.Rate > mbit(75) || !down.Users[j].Oversubscribed {
				t.Errorf("%s's guarantee under ap-1: %v (%s)", u.Name, u.Rate, down.Users[j].Reason)
			}
		case "carol":
			if u.Node != "" || u.Rate != mbit(100) {
				t.Errorf("carol: %+v", u)
			}
		}
	}
	var overAP bool
	for _, o := range down.Oversubscriptions {
		overAP = overAP || o.Node == "ap-1" && strings.HasPrefix(o.String(), "node ap-1 rate 150mbit")
	}
	if !overAP {
		t.Errorf("oversubscriptions: %v", down.Oversubscriptions)
	}
	if len(down.Targets.Tiers) != 1 { // carol keeps gold's aggregate
		t.Errorf("tiers: %+v", down.Targets.Tiers)
	}
	up := res.Interfaces[1]
	if n := up.Targets.Nodes[0]; n.Name != "north" || n.Rate != mbit(200) {
		t.Errorf("north's upload: %+v", n)
	}
	other := res.Interfaces[2]
	if len(other.Targets.Nodes) != 0 || len(other.Targets.Users) != 1 || other.Targets.Users[0].Name != "carol" {
		t.Errorf("lan1 has north's users: %+v / %+v", other.Targets.Nodes, other.Targets.Users)
	}
	if _, err := model.Build(down.Targets, nil); err != nil {
		t.Errorf("build: %v", err)
	}
}

// TestNodeOverride: set-rate node:NAME replaces the node's rates.
func TestNodeOverride(t *testing.T) {
	plan := loadPlan(t, nodesMain, nodesUsers)
	tgt, err := ParseTarget("node:ap-2")
	if err != nil || tgt.Kind != TargetNode {
		t.Fatalf("ParseTarget: %v %v", tgt, err)
	}
	o := Override{Target: tgt, Rate: mbit(50), Ceil: mbit(80)}
	if err := CheckOverride(plan, o); err != nil {
		t.Fatal(err)
	}
	if err := CheckOverride(plan, Override{Target: Target{TargetNode, "ap-9"}, Rate: mbit(1)}); err == nil {
		t.Error("an unknown node: no error")
	}
	var ov Overrides
	if err := ov.Set(o); err != nil {
		t.Fatal(err)
	}
	res := Evaluate(plan, ov, nil, time.Now())
	x, ok := res.Interfaces[0].NodeOf("ap-2")
	if !ok || x.Rate != mbit(50) || x.Ceil != mbit(80) || x.Source != SourceNodeOverride {
		t.Errorf("ap-2 with an override: %+v", x)
	}
}

// TestNodeDepthFitsTheModel: the config's and the model's depth limits
// are the same number.
func TestNodeDepthFitsTheModel(t *testing.T) {
	if config.MaxNodeDepth != model.MaxNodeDepth {
		t.Errorf("config allows %d node levels, the model builds %d", config.MaxNodeDepth, model.MaxNodeDepth)
	}
}

// TestUsersOnTheirInterfaces: a tier's users are shaped only on its
// interfaces, a user's own list replaces the tier's, so that a 100mbit
// tier does not block a 50mbit port none of its users is on.
func TestUsersOnTheirInterfaces(t *testing.T) {
	plan := loadPlan(t, `
[[interface]]
name = "lan0"
bandwidth = "1gbit"

[[interface]]
name = "lan1"
bandwidth = "50mbit"

[tiers.staff]
rate = "100mbit"
interfaces = ["lan0"]

[tiers.student]
rate = "10mbit"
`, `
[[user]]
name = "alice"
tier = "staff"
addresses = ["198.18.0.1"]

[[user]]
name = "bob"
tier = "staff"
interfaces = ["lan1"]
addresses = ["198.18.0.2"]

[[user]]
name = "carol"
tier = "student"
addresses = ["198.18.0.3"]
`)
	res := Evaluate(plan, Overrides{}, nil, time.Now())
	names := func(i int) []string {
		var out []string
		for _, u := range res.Interfaces[i].Targets.Users {
			out = append(out, u.Name)
		}
		return out
	}
	if got := strings.Join(names(0), ","); got != "alice,carol" {
		t.Errorf("lan0 users: %s, want alice,carol", got)
	}
	if got := strings.Join(names(1), ","); got != "bob,carol" {
		t.Errorf("lan1 users: %s, want bob,carol", got)
	}
	if len(res.Interfaces[1].Oversubscriptions) != 1 {
		// bob's 100mbit on a 50mbit port is still scaled: his own choice.
		t.Errorf("lan1: %v", res.Interfaces[1].Oversubscriptions)
	}
}

// TestUpdateNodeIsEvaluate: one node's override updated in place gives
// what Evaluate gives, and is refused where it would reach other classes
// (the node's children's guarantees above its new rate).
func TestUpdateNodeIsEvaluate(t *testing.T) {
	plan := loadPlan(t, nodesMain, nodesUsers)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	res := Evaluate(plan, Overrides{}, nil, now)
	var ov Overrides
	// Downloads only: on uploads north's guarantees are oversubscribed
	// (its two access points' 150mbit under its 200), which a change of
	// either would move.
	if err := ov.Set(Override{Target: Target{TargetNode, "ap-2"}, Direction: DirDownload, Rate: mbit(120), Ceil: mbit(140)}); err != nil {
		t.Fatal(err)
	}
	if !res.UpdateNode(plan, ov, now, "ap-2") {
		t.Fatal("ap-2 (no users, room under north) not updated alone")
	}
	want := Evaluate(plan, ov, nil, now)
	for i := range want.Interfaces {
		if !slices.Equal(res.Interfaces[i].Targets.Nodes, want.Interfaces[i].Targets.Nodes) {
			t.Errorf("interface %d: %+v, Evaluate gives %+v", i, res.Interfaces[i].Targets.Nodes, want.Interfaces[i].Targets.Nodes)
		}
	}
	// ap-1's users are oversubscribed under it already: every child changes.
	if err := ov.Set(Override{Target: Target{TargetNode, "ap-1"}, Direction: DirDownload, Rate: mbit(100)}); err != nil {
		t.Fatal(err)
	}
	if res.UpdateNode(plan, ov, now, "ap-1") {
		t.Error("ap-1, whose users' guarantees are scaled, updated alone")
	}
}

// TestCapToNodeSaysNode: a user's ceil capped to its node's is reported as
// such, not as the bandwidth.
func TestCapToNodeSaysNode(t *testing.T) {
	plan := loadPlan(t, `
[[interface]]
name = "lan0"
bandwidth = "1gbit"

[tiers.gold]
rate = "10mbit"
ceil = "200mbit"

[nodes.ap-1]
rate = "50mbit"
`, `
[[user]]
name = "alice"
tier = "gold"
node = "ap-1"
addresses = ["198.18.0.1"]
`)
	res := Evaluate(plan, Overrides{}, nil, time.Now())
	notes := strings.Join(res.CapNotes(), "\n")
	if !strings.Contains(notes, "tier gold: ceil 200mbit capped to node ap-1's ceil 50mbit (1 user)") {
		t.Errorf("cap notes:\n%s", notes)
	}
}
