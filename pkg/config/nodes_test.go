package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestNodes loads a three-level hierarchy on two interfaces: parents come
// first, paths and depths are filled in, interfaces and upload rates
// default as documented, and a user may name its node by name or path.
func TestNodes(t *testing.T) {
	plan := mustLoad(t, `
[[interface]]
name = "lan0"
bandwidth = "1gbit"

[[interface]]
name = "lan1"
bandwidth = "1gbit"

[tiers.gold]
rate = "10mbit"

[nodes.ap-3]
parent = "dorm-a"
rate = "300mbit"
upload_rate = "100mbit"
[[nodes.ap-3.schedule]]
days = ["all"]
from = "19:00"
to = "23:00"
rate = "200mbit"

[nodes.dorm-a]
parent = "north"
rate = "1gbit"

[nodes.north]
rate = "1gbit"
ceil = "2gbit"
interfaces = ["lan1"]

[nodes.south]
rate = "1gbit"
`, `
[[user]]
name = "alice"
tier = "gold"
node = "north/dorm-a/ap-3"
addresses = ["198.18.0.1"]

[[user]]
name = "bob"
tier = "gold"
node = "south"
addresses = ["198.18.0.2"]

[[user]]
name = "carol"
tier = "gold"
addresses = ["198.18.0.3"]
`)
	var names []string
	for _, n := range plan.Nodes {
		names = append(names, n.Name)
	}
	if want := []string{"north", "south", "dorm-a", "ap-3"}; !slices.Equal(names, want) {
		t.Fatalf("nodes in order %q, want %q", names, want)
	}
	ap, ok := plan.Node("ap-3")
	if !ok || ap.Path != "north/dorm-a/ap-3" || ap.Depth != 3 || ap.Parent != "dorm-a" {
		t.Fatalf("ap-3: %+v", ap)
	}
	if !slices.Equal(ap.Interfaces, []string{"lan1"}) || !ap.On("lan1") || ap.On("lan0") {
		t.Errorf("ap-3 inherits its interfaces: %q", ap.Interfaces)
	}
	if r, c := ap.Rates(Ingress); r != 100*tbf.Mbit || c != 300*tbf.Mbit {
		t.Errorf("ap-3 upload: %v/%v, want 100mbit/300mbit", r, c)
	}
	if len(ap.Schedules) != 1 || ap.Schedules[0].Rate != 200*tbf.Mbit {
		t.Errorf("ap-3 schedules: %+v", ap.Schedules)
	}
	if s, _ := plan.Node("south"); !s.On("lan0") || !s.On("lan1") {
		t.Error("a top-level node without interfaces is on every interface")
	}
	if n, ok := plan.Node("north/dorm-a"); !ok || n.Name != "dorm-a" {
		t.Error("a node by its path")
	}
	if _, ok := plan.Node("south/dorm-a"); ok {
		t.Error("a node by a wrong path")
	}
	nodes := map[string]string{}
	for _, u := range plan.Users {
		nodes[u.Name] = u.Node
	}
	if nodes["alice"] != "ap-3" || nodes["bob"] != "south" || nodes["carol"] != "" {
		t.Errorf("users' nodes: %v", nodes)
	}
}

// TestNodesInTheSharedPlan: a fleet's shared plan carries the hierarchy;
// a node behind another router's interface is no error here, and stays
// off this router's interfaces (with its users).
func TestNodesInTheSharedPlan(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(local, []byte(fleetIfaces+"[fleet]\nendpoints = [\"http://127.0.0.1:2379\"]\nrouter = \"r1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh := &Shared{Name: "fleet:shared.toml", UsersName: "fleet:users.toml",
		Main: []byte(`[tiers.basic]
rate = "1mbit"
[nodes.here]
rate = "100mbit"
[nodes.there]
rate = "100mbit"
interfaces = ["wan9"]
`),
		Users: []byte("[[user]]\nname = \"alice\"\ntier = \"basic\"\nnode = \"there\"\naddresses = [\"198.18.0.10\"]\n")}
	plan, err := LoadShared(local, sh)
	if err != nil {
		t.Fatal(err)
	}
	there, ok := plan.Node("there")
	if !ok || len(plan.Nodes) != 2 || there.On(plan.Interfaces[0].Name) {
		t.Errorf("nodes %+v", plan.Nodes)
	}
	if e := plan.Errorf("nodes.there.rate", "x"); e.File != "fleet:shared.toml" || e.Line != 6 {
		t.Errorf("Errorf(nodes.there.rate) = %v", e)
	}
	if _, err := LoadFS(mapFS(fleetIfaces+"[tiers.basic]\nrate = \"1mbit\"\n[nodes.there]\nrate = \"1mbit\"\ninterfaces = [\"wan9\"]\n", ""), "etc/shaperd.toml"); err == nil ||
		!strings.Contains(err.Error(), `node "there" is on interface "wan9", which no [[interface]]`) {
		t.Errorf("a local node on no interface: %v", err)
	}
}
