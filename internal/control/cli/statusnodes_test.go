package cli_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/control/controltest"
	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// nodesStatus is a status with nodes on lan0's download side: north
// (40mbit of 500mbit), ap-1 behind it (30mbit of 200mbit, three users)
// and ap-2 (10mbit at its 10mbit override: the most loaded), carol
// behind no node, and wan0's upload side without nodes.
func nodesStatus() control.Status {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	user := func(name, tier, node string, eff, ceil, through tbf.Rate) control.UserStatus {
		return control.UserStatus{Name: name, Tier: tier, Node: node, Interface: "lan0", Direction: "download", Device: "lan0",
			Rate: eff, Ceil: ceil, EffectiveRate: eff, EffectiveCeil: ceil, Reason: "tier " + tier, Throughput: through}
	}
	return control.Status{
		Interfaces: []control.InterfaceStatus{
			{Name: "lan0", Device: "lan0", Shaper: "htb", Direction: "egress", Bandwidth: 1_000_000_000, State: control.StateOK,
				Users: []string{"alice", "bob", "carol", "dave", "erin"},
				Tiers: []control.TierStatus{{Name: "bronze", Rate: 5e6, Ceil: 20e6}, {Name: "gold", Rate: 50e6, Ceil: 100e6}},
				Nodes: []control.NodeStatus{
					{Name: "north", Path: "north", Rate: 500e6, Ceil: 500e6, EffectiveRate: 500e6, EffectiveCeil: 500e6, Reason: "node north",
						Throughput: 40e6, Bytes: 5_000_000_000, Drops: 7, Users: 0, TotalUsers: 4},
					{Name: "ap-1", Parent: "north", Path: "north/ap-1", Rate: 100e6, Ceil: 200e6, EffectiveRate: 100e6, EffectiveCeil: 200e6, Reason: "node ap-1",
						Throughput: 30e6, Bytes: 4_000_000_000, Drops: 5, Users: 3, TotalUsers: 3},
					{Name: "ap-2", Parent: "north", Path: "north/ap-2", Rate: 100e6, Ceil: 100e6, EffectiveRate: 10e6, EffectiveCeil: 10e6, Reason: "node override (ap-2)",
						Throughput: 10e6, Bytes: 1_000_000_000, Drops: 2, Users: 1, TotalUsers: 1,
						Ramp: &control.RampStatus{From: 100e6, To: 10e6, Until: t0.Add(2 * time.Second)}},
				}},
			{Name: "wan0", Device: "ifb-wan0", Shaper: "htb", Direction: "ingress", Bandwidth: 100_000_000, State: control.StateOK,
				Users: []string{"alice"}, Tiers: []control.TierStatus{{Name: "gold", Rate: 10e6, Ceil: 20e6}}},
		},
		Users: []control.UserStatus{
			user("alice", "gold", "ap-1", 50e6, 100e6, 20e6),
			user("dave", "bronze", "ap-1", 5e6, 20e6, 6e6),
			user("erin", "bronze", "ap-1", 5e6, 20e6, 4e6),
			user("bob", "bronze", "ap-2", 5e6, 10e6, 10e6),
			user("carol", "bronze", "", 5e6, 20e6, 1e6),
			{Name: "alice", Tier: "gold", Interface: "wan0", Direction: "upload", Device: "ifb-wan0", Rate: 10e6, Ceil: 20e6,
				EffectiveRate: 10e6, EffectiveCeil: 20e6, Reason: "tier gold", Throughput: 2e6},
		},
	}
}

func serveNodes(t *testing.T) string {
	return controltest.Serve(t, &controltest.Fake{State: nodesStatus()})
}

// status prints a NODES table, most loaded first, before the users,
// and the users table a NODE column.
func TestStatusNodesTable(t *testing.T) {
	sock := serveNodes(t)
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "status")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	head := indexOf(lines, "NODE ")
	if head < 0 || head > indexOf(lines, "USER ") {
		t.Fatalf("no NODES table before the users:\n%s", out)
	}
	for i, want := range [][]string{
		{"NODE", "INTERFACE", "DIRECTION", "RATE/CEIL", "EFFECTIVE", "THROUGHPUT", "%CEIL", "USERS", "DIRECT", "BYTES", "DROPS", "REASON"},
		{"north/ap-2", "lan0", "download", "100mbit/100mbit", "10mbit/10mbit", "10mbit", "100%", "1", "1", "954mb", "2", "node", "override", "(ap-2);", "ramping", "100mbit", "->", "10mbit", "until", "12:00:02"},
		{"north/ap-1", "lan0", "download", "100mbit/200mbit", "100mbit/200mbit", "30mbit", "15%", "3", "3", "3.73gb", "5", "node", "ap-1"},
		{"north", "lan0", "download", "500mbit/500mbit", "500mbit/500mbit", "40mbit", "8%", "4", "0", "4.66gb", "7", "node", "north"},
	} {
		if got := strings.Fields(lines[head+i]); !reflect.DeepEqual(got, want) {
			t.Errorf("nodes table line %d:\n got %q\nwant %q", i, got, want)
		}
	}
	if lines[head+4] != "" {
		t.Errorf("more than the three nodes: %q", lines[head+4])
	}
	for _, want := range [][]string{
		{"USER", "INTERFACE", "DIRECTION", "DEVICE", "TIER", "NODE", "RATE/CEIL", "EFFECTIVE", "THROUGHPUT", "BYTES", "DROPS", "DELAY", "REASON"},
		{"alice", "lan0", "download", "lan0", "gold", "ap-1", "50mbit/100mbit", "50mbit/100mbit", "20mbit", "0b", "0", "-", "tier", "gold"},
		{"carol", "lan0", "download", "lan0", "bronze", "-", "5mbit/20mbit", "5mbit/20mbit", "1mbit", "0b", "0", "-", "tier", "bronze"},
	} {
		if !hasRow(lines, want) {
			t.Errorf("no row %q in\n%s", want, out)
		}
	}

	// Without nodes: neither the table nor the column.
	_, sock = serve(t)
	_, out, _ = run(t, cli.Env{}, "--socket", sock, "status")
	if strings.Contains(out, "NODE") {
		t.Errorf("status without nodes shows them:\n%s", out)
	}
}

// status --json has each interface's nodes and each user's node.
func TestStatusNodesJSON(t *testing.T) {
	sock := serveNodes(t)
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "status", "--json")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got control.Status
	if err := jsonout.Decode([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := nodesStatus()
	if !reflect.DeepEqual(got.Interfaces[0].Nodes, want.Interfaces[0].Nodes) || got.Users[0].Node != "ap-1" {
		t.Errorf("nodes %+v\nwant %+v", got.Interfaces[0].Nodes, want.Interfaces[0].Nodes)
	}
	for _, key := range []string{`"nodes": [`, `"path": "north/ap-1"`, `"parent": "north"`, `"effective_ceil": 200000000`,
		`"total_users": 4`, `"throughput": 40000000`, `"node": "ap-1"`} {
		if !strings.Contains(out, key) {
			t.Errorf("no %s in\n%s", key, out)
		}
	}
	if strings.Count(out, `"nodes"`) != 1 {
		t.Errorf("an interface without nodes has a nodes key:\n%s", out)
	}
}

// status --tree draws root > nodes > users, siblings most loaded first,
// the heaviest users of each node and a line for the rest.
func TestStatusTree(t *testing.T) {
	sock := serveNodes(t)
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "status", "--tree", "--users", "2")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := `shaperd status at 2026-12-02 12:00:00 UTC: 2 interfaces, 5 users

TREE                      RATE/CEIL        THROUGHPUT  %CEIL  USERS
lan0 download (ok)        1gbit            41mbit      4%     5
├─ north                  500mbit/500mbit  40mbit      8%     4
│  ├─ ap-2                10mbit/10mbit    10mbit      100%   1
│  │  └─ bob (bronze)     5mbit/10mbit     10mbit      100%
│  └─ ap-1                100mbit/200mbit  30mbit      15%    3
│     ├─ alice (gold)     50mbit/100mbit   20mbit      20%
│     ├─ dave (bronze)    5mbit/20mbit     6mbit       30%
│     └─ ... 1 more user
└─ carol (bronze)         5mbit/20mbit     1mbit       5%

TREE              RATE/CEIL      THROUGHPUT  %CEIL  USERS
wan0 upload (ok)  100mbit        2mbit       2%     1
└─ alice (gold)   10mbit/20mbit  2mbit       10%
`
	if out != want {
		t.Errorf("status --tree --users 2:\n%s\nwant\n%s", out, want)
	}
}

// --users all shows every user, 0 none (the USERS column counts them);
// the default is 5 per node.
func TestStatusTreeUsers(t *testing.T) {
	sock := serveNodes(t)
	for _, tc := range []struct {
		args       []string
		has, hasnt []string
	}{
		{[]string{"--tree"}, []string{"erin (bronze)", "bob (bronze)"}, []string{"more user"}},
		{[]string{"--tree", "--users", "all"}, []string{"erin (bronze)", "carol (bronze)"}, []string{"more user"}},
		{[]string{"--tree", "--users", "1"}, []string{"alice (gold)", "... 2 more users", "carol (bronze)"}, []string{"dave"}},
		{[]string{"--tree", "--users=0"}, []string{"ap-1", "north"}, []string{"alice", "carol", "more user"}},
	} {
		code, out, errOut := run(t, cli.Env{}, append([]string{"--socket", sock, "status"}, tc.args...)...)
		if code != cli.ExitOK {
			t.Fatalf("%q: exit %d: %s", tc.args, code, errOut)
		}
		for _, s := range tc.has {
			if !strings.Contains(out, s) {
				t.Errorf("%q: no %q in\n%s", tc.args, s, out)
			}
		}
		for _, s := range tc.hasnt {
			if strings.Contains(out, s) {
				t.Errorf("%q: %q in\n%s", tc.args, s, out)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--tree", "--json"}, "--tree draws the text output"},
		{[]string{"--users", "3"}, "--users goes with --tree"},
		{[]string{"--tree", "--users", "-1"}, `--users "-1": a number of users per node (0: none) or all`},
		{[]string{"--tree", "--users", "many"}, `--users "many"`},
	} {
		code, out, errOut := run(t, cli.Env{}, append([]string{"--socket", sock, "status"}, tc.args...)...)
		if code != cli.ExitUsage || (out != "") != jsonout.Requested(tc.args) || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want a usage error with %q", tc.args, code, out, errOut, tc.msg)
		}
	}
}

// status node:NAME (by name or path) keeps the node, the nodes behind it
// and their users; status USER keeps the nodes on the way to the user.
func TestStatusNodeTarget(t *testing.T) {
	sock := serveNodes(t)
	for _, target := range []string{"node:north", "node:ap-1", "node:north/ap-1"} {
		code, out, errOut := run(t, cli.Env{}, "--socket", sock, "status", target, "--json")
		if code != cli.ExitOK {
			t.Fatalf("status %s: exit %d: %s", target, code, errOut)
		}
		var st control.Status
		if err := jsonout.Decode([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		var ifaces, nodes, users []string
		for _, in := range st.Interfaces {
			ifaces = append(ifaces, in.Name)
			for _, n := range in.Nodes {
				nodes = append(nodes, n.Name)
			}
		}
		for _, u := range st.Users {
			users = append(users, u.Name)
		}
		wantNodes, wantUsers := []string{"ap-1"}, []string{"alice", "dave", "erin"}
		if target == "node:north" {
			wantNodes, wantUsers = []string{"north", "ap-1", "ap-2"}, []string{"alice", "dave", "erin", "bob"}
		}
		if !reflect.DeepEqual(ifaces, []string{"lan0"}) || !reflect.DeepEqual(nodes, wantNodes) || !reflect.DeepEqual(users, wantUsers) {
			t.Errorf("status %s: interfaces %v nodes %v users %v; want [lan0] %v %v", target, ifaces, nodes, users, wantNodes, wantUsers)
		}
	}
	// The tree of a node is its branch.
	code, out, _ := run(t, cli.Env{}, "--socket", sock, "status", "node:ap-1", "--tree")
	if code != cli.ExitOK || !strings.Contains(out, "└─ ap-1 ") || strings.Contains(out, "north") || strings.Contains(out, "carol") || !strings.Contains(out, "erin") {
		t.Errorf("status node:ap-1 --tree: exit %d\n%s", code, out)
	}
	// A user's tree is the way from the root to it.
	code, out, _ = run(t, cli.Env{}, "--socket", sock, "status", "dave", "--tree")
	if code != cli.ExitOK || !strings.Contains(out, "└─ north") || !strings.Contains(out, "   └─ ap-1") || !strings.Contains(out, "      └─ dave (bronze)") ||
		strings.Contains(out, "ap-2") || strings.Contains(out, "alice") {
		t.Errorf("status dave --tree: exit %d\n%s", code, out)
	}
	code, _, errOut := run(t, cli.Env{}, "--socket", sock, "status", "node:ap-9")
	if code != cli.ExitError || !strings.Contains(errOut, `unknown target "node:ap-9"`) {
		t.Errorf("status node:ap-9: exit %d, %q", code, errOut)
	}
}

// top --nodes shows the nodes most loaded first, in plain text and JSON.
func TestTopNodes(t *testing.T) {
	sock := serveNodes(t)
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "top", "--nodes", "--once")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	if lines[0] != "shaperd top at 12:00:00: 3 nodes, total 40mbit" {
		t.Errorf("header %q", lines[0])
	}
	for i, want := range [][]string{
		{"NODE", "INTERFACE", "DIRECTION", "DEVICE", "THROUGHPUT", "CEIL", "%CEIL", "USERS", "BYTES", "DROPS"},
		{"north/ap-2", "lan0", "download", "lan0", "10mbit", "10mbit", "100%", "1", "954mb", "2"},
		{"north/ap-1", "lan0", "download", "lan0", "30mbit", "200mbit", "15%", "3", "3.73gb", "5"},
		{"north", "lan0", "download", "lan0", "40mbit", "500mbit", "8%", "4", "4.66gb", "7"},
	} {
		if got := strings.Fields(lines[2+i]); !reflect.DeepEqual(got, want) {
			t.Errorf("line %d: %q, want %q", 2+i, got, want)
		}
	}
	code, out, errOut = run(t, cli.Env{}, "--socket", sock, "top", "--nodes", "--json", "--once")
	if code != cli.ExitOK {
		t.Fatalf("top --nodes --json: exit %d: %s", code, errOut)
	}
	var snap struct {
		Total int64 `json:"total"`
		Nodes []struct {
			Node       string `json:"node"`
			Interface  string `json:"interface"`
			Direction  string `json:"direction"`
			Throughput int64  `json:"throughput"`
			TotalUsers int    `json:"total_users"`
		} `json:"nodes"`
		Users []any `json:"users"`
	}
	if err := jsonout.Decode([]byte(out), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Total != 40e6 || len(snap.Nodes) != 3 || snap.Nodes[0].Node != "ap-2" || snap.Nodes[0].Interface != "lan0" ||
		snap.Nodes[0].Direction != "download" || snap.Nodes[2].TotalUsers != 4 || snap.Users != nil {
		t.Errorf("top --nodes --json: %+v\n%s", snap, out)
	}
}

// Completion offers node:NAME targets.
func TestNodeCompletion(t *testing.T) {
	sock := serveNodes(t)
	for _, words := range [][]string{{"status", "node:"}, {"set-rate", "node:ap"}} {
		code, out, _ := run(t, cli.Env{}, append([]string{"--socket", sock, "__complete", "--"}, words...)...)
		if code != cli.ExitOK || !strings.Contains(out, "node:ap-1\n") || !strings.Contains(out, "node:ap-2\n") {
			t.Errorf("complete %q: exit %d, %q", words, code, out)
		}
	}
}
