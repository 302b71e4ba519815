package config

import (
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// runtimeNodesPlan is a plan with a two-level hierarchy on lan1 only and a
// user behind its access point.
func runtimeNodesPlan(t *testing.T) *Plan {
	t.Helper()
	return mustLoad(t, `
[[interface]]
name = "lan0"
bandwidth = "1gbit"

[[interface]]
name = "lan1"
bandwidth = "1gbit"

[tiers.gold]
rate = "10mbit"

[nodes.north]
rate = "500mbit"
interfaces = ["lan1"]

[nodes.ap-1]
parent = "north"
rate = "100mbit"
`, `
[[user]]
name = "alice"
tier = "gold"
node = "ap-1"
addresses = ["198.18.0.1"]
`)
}

// TestWithNode adds nodes at run time: parents stay first, paths, depths,
// defaults and inherited interfaces are filled in as Load fills them, the
// index finds the node by name and path, and p itself is not changed.
func TestWithNode(t *testing.T) {
	p := runtimeNodesPlan(t)
	q, err := p.WithNode(NodeSpec{Name: "ap-0", Parent: "north", Rate: 50 * tbf.Mbit})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Node("ap-0"); ok || len(p.Nodes) != 2 {
		t.Fatalf("WithNode changed the plan it was called on: %+v", p.Nodes)
	}
	var names []string
	for _, n := range q.Nodes {
		names = append(names, n.Name)
	}
	if got := strings.Join(names, " "); got != "north ap-0 ap-1" {
		t.Errorf("nodes in order %q, want parents first, then by name: north ap-0 ap-1", got)
	}
	n, ok := q.Node("north/ap-0")
	if !ok {
		t.Fatal("the new node is not found by its path north/ap-0")
	}
	want := Node{Name: "ap-0", Source: RuntimeSource, Parent: "north", Path: "north/ap-0", Depth: 2,
		Rate: 50 * tbf.Mbit, Ceil: 50 * tbf.Mbit, UploadRate: 50 * tbf.Mbit, UploadCeil: 50 * tbf.Mbit, Interfaces: []string{"lan1"}}
	if n.Name != want.Name || n.Source != want.Source || n.Path != want.Path || n.Depth != want.Depth || n.Rate != want.Rate ||
		n.Ceil != want.Ceil || n.UploadRate != want.UploadRate || n.UploadCeil != want.UploadCeil || strings.Join(n.Interfaces, ",") != "lan1" {
		t.Errorf("node %+v, want %+v", *n, want)
	}
	if m, _ := q.Node("ap-1"); m.Path != "north/ap-1" {
		t.Errorf("the index lost ap-1: %+v", m)
	}
	top, err := q.WithNode(NodeSpec{Name: "south", Rate: 100 * tbf.Mbit, Ceil: 200 * tbf.Mbit, UploadRate: 20 * tbf.Mbit})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := top.Node("south")
	if s.Depth != 1 || s.Path != "south" || len(s.Interfaces) != 0 || s.UploadCeil != 200*tbf.Mbit || !s.On("lan0") {
		t.Errorf("top-level node %+v: want depth 1, every interface, upload ceil defaulting to the ceil", *s)
	}
}

// TestWithNodeRefuses: what a [nodes.NAME] table may not hold is refused
// with a message naming the node and what is wrong.
func TestWithNodeRefuses(t *testing.T) {
	p := runtimeNodesPlan(t)
	deep := p
	parent := "ap-1"
	for i := 3; i <= MaxNodeDepth; i++ {
		name := "level-" + string(rune('0'+i))
		var err error
		if deep, err = deep.WithNode(NodeSpec{Name: name, Parent: parent, Rate: tbf.Mbit}); err != nil {
			t.Fatal(err)
		}
		parent = name
	}
	for _, c := range []struct {
		spec NodeSpec
		plan *Plan
		want string
	}{
		{NodeSpec{Name: "bad name", Rate: tbf.Mbit}, p, `node name "bad name" is not valid`},
		{NodeSpec{Name: "ap-1", Rate: tbf.Mbit}, p, "node ap-1 exists already"},
		{NodeSpec{Name: "ap-2", Rate: tbf.Mbit, Parent: "nort"}, p, `node ap-2: unknown parent node "nort" (nodes: north, ap-1)`},
		{NodeSpec{Name: "ap-2"}, p, "node ap-2: no rate given"},
		{NodeSpec{Name: "ap-2", Rate: 2 * tbf.Mbit, Ceil: tbf.Mbit}, p, "node ap-2: ceil 1mbit is below its rate 2mbit"},
		{NodeSpec{Name: "ap-2", Rate: tbf.Mbit, Interfaces: []string{"wan9"}}, p, `node ap-2 is on interface "wan9", which no [[interface]]`},
		{NodeSpec{Name: "ap-2", Rate: tbf.Mbit, Parent: "north", Interfaces: []string{"lan0"}}, p, "node ap-2 is on interface lan0, which its parent north is not on (lan1)"},
		{NodeSpec{Name: "too-deep", Rate: tbf.Mbit, Parent: parent}, deep, "levels deep"},
	} {
		_, err := c.plan.WithNode(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WithNode(%+v): %v, want an error containing %q", c.spec, err, c.want)
		}
	}
}

// TestWithoutNode removes a node nothing is behind, and refuses one with
// child nodes or users, naming them.
func TestWithoutNode(t *testing.T) {
	p := runtimeNodesPlan(t)
	if _, err := p.WithoutNode("north"); err == nil || !strings.Contains(err.Error(), "node north has 1 child nodes (ap-1): remove them first") {
		t.Errorf("removing north: %v, want a refusal naming ap-1", err)
	}
	if _, err := p.WithoutNode("ap-1"); err == nil || !strings.Contains(err.Error(), "node ap-1 has 1 users behind it (alice): move them first") {
		t.Errorf("removing ap-1: %v, want a refusal naming alice", err)
	}
	if _, err := p.WithoutNode("ap-9"); err == nil || !strings.Contains(err.Error(), `unknown node "ap-9"`) {
		t.Errorf("removing ap-9: %v, want unknown node", err)
	}
	q, err := p.WithNode(NodeSpec{Name: "ap-2", Parent: "north", Rate: tbf.Mbit})
	if err != nil {
		t.Fatal(err)
	}
	r, err := q.WithoutNode("north/ap-2")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Node("ap-2"); ok || len(r.Nodes) != 2 {
		t.Errorf("ap-2 still there: %+v", r.Nodes)
	}
	if _, ok := q.Node("ap-2"); !ok {
		t.Error("WithoutNode changed the plan it was called on")
	}
}
