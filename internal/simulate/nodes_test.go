package simulate

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/sim"
)

// nodesPlan is a 1gbit download (no limit from the root) and a 20mbit
// upload with north (70mbit ceil) and behind it ap-1 (50mbit ceil: a1
// and a2) and ap-2 (30mbit ceil: b1); c1 is behind no node.
const nodesPlan = `
[daemon]
state_dir = "/nonexistent"

[policy]
timezone = "UTC"

[[interface]]
name = "lan0"
direction = "egress"
bandwidth = "1gbit"
default_rate = "1mbit"

[[interface]]
name = "lan0"
direction = "ingress"
bandwidth = "20mbit"
default_rate = "1mbit"

[tiers.gold]
rate = "10mbit"
ceil = "60mbit"

[tiers.silver]
rate = "5mbit"
ceil = "50mbit"

[tiers.bronze]
rate = "5mbit"
ceil = "40mbit"

[nodes.north]
rate = "40mbit"
ceil = "70mbit"
upload_rate = "10mbit"

[nodes.ap-1]
parent = "north"
rate = "20mbit"
ceil = "50mbit"

[nodes.ap-2]
parent = "north"
rate = "20mbit"
ceil = "30mbit"
`

const nodesUsers = `
[[user]]
name = "a1"
tier = "gold"
node = "ap-1"
addresses = ["198.18.0.10"]

[[user]]
name = "a2"
tier = "gold"
node = "north/ap-1"
addresses = ["198.18.0.11"]

[[user]]
name = "b1"
tier = "silver"
node = "ap-2"
addresses = ["198.18.0.12"]

[[user]]
name = "c1"
tier = "bronze"
addresses = ["198.18.0.14"]
`

func simulateNodes(t *testing.T, spec string) *Report {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{"shaperd.toml": nodesPlan, "users.toml": nodesUsers} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := config.Load(filepath.Join(dir, "shaperd.toml"))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Simulate(plan, sp, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC), sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// nodeRow finds node's row on iface in direction d.
func nodeRow(t *testing.T, rep *Report, node, iface string, d model.Direction) NodeRow {
	t.Helper()
	for _, n := range rep.Nodes {
		if n.Node == node && n.Interface == iface && n.Direction == d {
			return n
		}
	}
	t.Fatalf("no row for node %s on %s %s", node, iface, d)
	return NodeRow{}
}

// The report has a row per node and direction, parents first: what
// passes through it (its users' rates summed), its class's rates, the
// users behind it and their demand; a node at its ceil says so with the
// rule that set it, and its users are limited by it.
func TestSimulateNodes(t *testing.T) {
	rep := simulateNodes(t, "*=max,b1=10mbit/0")
	var order []string
	for _, n := range rep.Nodes {
		order = append(order, string(n.Direction)+":"+n.Path)
	}
	if got := strings.Join(order, " "); got != "egress:north egress:north/ap-1 egress:north/ap-2 ingress:north ingress:north/ap-1 ingress:north/ap-2" {
		t.Errorf("node rows %s", got)
	}
	a1, a2 := row(t, rep, "a1", "lan0", model.Egress), row(t, rep, "a2", "lan0", model.Egress)
	b1, c1 := row(t, rep, "b1", "lan0", model.Egress), row(t, rep, "c1", "lan0", model.Egress)
	if a1.Node != "ap-1" || a2.Node != "ap-1" || b1.Node != "ap-2" || c1.Node != "" {
		t.Errorf("users' nodes: a1 %q a2 %q b1 %q c1 %q", a1.Node, a2.Node, b1.Node, c1.Node)
	}
	// ap-1's 50mbit ceil holds a1 and a2 (who ask for max) to 25 each;
	// b1 asks for 10; c1 behind no node gets its tier's 40mbit ceil.
	ap1, ap2, north := nodeRow(t, rep, "ap-1", "lan0", model.Egress), nodeRow(t, rep, "ap-2", "lan0", model.Egress), nodeRow(t, rep, "north", "lan0", model.Egress)
	if math.Abs(ap1.Rate-50*mbit) > 1 || ap1.LimitedBy != "ceil" || ap1.Detail != "node ap-1" || ap1.Users != 2 || !math.IsInf(ap1.Demand, 1) ||
		ap1.ClassRate != 20*mbit || ap1.ClassCeil != 50*mbit || ap1.Parent != "north" || ap1.Depth != 2 {
		t.Errorf("ap-1: %+v", ap1)
	}
	if math.Abs(ap2.Rate-10*mbit) > 1 || ap2.LimitedBy != "" || ap2.Users != 1 || math.Abs(ap2.Demand-10*mbit) > 1 {
		t.Errorf("ap-2: %+v, want b1's 10mbit demand met, not at its ceil", ap2)
	}
	if math.Abs(north.Rate-(ap1.Rate+ap2.Rate)) > 1 || north.Users != 3 || north.LimitedBy != "" || north.Depth != 1 || north.Path != "north" {
		t.Errorf("north: %+v, want its children's 60mbit", north)
	}
	if math.Abs(a1.Rate-25*mbit) > 1 || a1.LimitedBy != "parent" || a1.Detail != "node ap-1" {
		t.Errorf("a1: %+v, want 25mbit limited by its parent node ap-1", a1)
	}
	if math.Abs(c1.Rate-40*mbit) > 1 || c1.LimitedBy != "ceil" {
		t.Errorf("c1: %+v", c1)
	}

	// Upload: north's upload rate 10mbit, its ceil capped to the 20mbit
	// bandwidth, which it shares with c1.
	up, c1up := nodeRow(t, rep, "north", "lan0", model.Ingress), row(t, rep, "c1", "lan0", model.Ingress)
	if up.ClassRate != 10*mbit || up.ClassCeil != 20*mbit || up.LimitedBy != "" || math.Abs(up.Rate+c1up.Rate-20*mbit) > 1 || up.Rate < 10*mbit {
		t.Errorf("upload north: %+v, c1 %+v; want at least its 10mbit, the rest of the 20mbit to c1", up, c1up)
	}
}

// The table puts each node's row above its branch, indented by depth,
// with its class's rate/ceil; the users of no node come first.
func TestTableNodes(t *testing.T) {
	rep := simulateNodes(t, "*=max,b1=10mbit/0")
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(b.String(), "\n")[3:] {
		if l == "" {
			break // the end of the users table
		}
		if strings.Contains(l, " egress ") {
			f := strings.Fields(l)
			rows = append(rows, l[:strings.Index(l, f[0])]+f[0]+" "+f[1])
		}
	}
	want := []string{"c1 bronze", "node north", "  node ap-1", "    a1 gold", "    a2 gold", "  node ap-2", "    b1 silver"}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("download rows %q, want %q in\n%s", rows, want, b.String())
	}
	// Rows compared by indentation and fields: column widths follow the
	// widest value.
	row := func(l string) string {
		return l[:len(l)-len(strings.TrimLeft(l, " "))] + strings.Join(strings.Fields(l), " ")
	}
	var got []string
	for _, l := range strings.Split(b.String(), "\n") {
		got = append(got, row(l))
	}
	for _, s := range []string{
		"  node ap-1 (20mbit/50mbit) - lan0 egress max 50mbit ceil (node ap-1)",
		"    a1 gold lan0 egress max 25mbit parent (node ap-1)",
	} {
		if !slices.Contains(got, s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}

	// A plan without nodes has no node rows.
	b.Reset()
	if err := simulateAt(t, DefaultSpec, "2026-12-04 18:30").WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "node ") {
		t.Errorf("node rows without nodes:\n%s", b.String())
	}
}

// --json has a "nodes" list and each user's "node"; none without nodes.
func TestJSONNodes(t *testing.T) {
	var b bytes.Buffer
	if err := simulateNodes(t, "*=max,b1=10mbit/0").WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Users []map[string]any `json:"users"`
		Nodes []map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6:\n%s", len(out.Nodes), b.String())
	}
	ap1 := out.Nodes[1]
	want := map[string]any{"node": "ap-1", "parent": "north", "path": "north/ap-1", "interface": "lan0", "direction": "download", "interface_direction": "egress", "user_count": 2.0,
		"demand_bits_per_second": nil, "bits_per_second": 50e6, "rate_bits_per_second": 20e6, "ceil_bits_per_second": 50e6,
		"limited_by": "ceil", "detail": "node ap-1"}
	for k, v := range want {
		if got, ok := ap1[k]; !ok || got != v {
			t.Errorf("ap-1's %s: %v, want %v", k, got, v)
		}
	}
	if out.Users[0]["node"] != "ap-1" {
		t.Errorf("a1: %v", out.Users[0])
	}
	b.Reset()
	if err := simulateAt(t, DefaultSpec, "2026-12-04 18:30").WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `"node`) {
		t.Errorf("node keys without nodes:\n%s", b.String())
	}
}
