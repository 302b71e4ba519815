package cli_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/migrate"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

const (
	libreqosNetwork = "../../migrate/testdata/network.json"
	flatNetwork     = "../../migrate/testdata/network-flat.json"
	flatDevices     = "../../migrate/testdata/ShapedDevices-flat.csv"
)

// exampleDir is a directory with the example shaperd.toml (users_file
// users.toml, not there yet); it returns the directory and the file.
func exampleDir(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	main := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(main, []byte(readFile(t, exampleConfig)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, main
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// load is config.Load that fails the test on errors, and runs the policy
// check shaperd --check runs after loading.
func load(t *testing.T, main string) *config.Plan {
	t.Helper()
	plan, err := config.Load(main)
	if err != nil {
		t.Fatalf("shaperd --check: %v", err)
	}
	if errs := policy.Check(plan); errs != nil {
		t.Fatalf("shaperd --check (policy): %v", errs)
	}
	return plan
}

// The import end to end: the nodes go into --config's block, the users
// with their nodes into its users file, shaperd loads the result as it is;
// a second import changes nothing, a changed network.json is updated in
// place.
func TestImportLibreQoSNetwork(t *testing.T) {
	dir, main := exampleDir(t)
	usersPath := filepath.Join(dir, "users.toml")
	code, stdout, stderr := run(t, cli.Env{}, "import", "libreqos", libreqosSample, "--network", libreqosNetwork, "--config", main)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{
		"wrote 5 users to " + usersPath + "\n",
		"wrote 5 nodes and 4 tiers to " + main + " (between its \"# >>> shaperctl import libreqos >>>\"",
		"renamed 4 nodes of network.json (shaperd's names are 1 to 64 characters of a-z, 0-9, '_' and '-'):\n" +
			"  \"Site 1\" -> site-1\n  \"Building_North\" -> building_north\n  \"AP_A\" -> ap_a\n  \"AP_B\" -> ap_b\n",
	} {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
	text := readFile(t, main)
	if !strings.HasPrefix(text, readFile(t, exampleConfig)) {
		t.Error("the import changed shaperd.toml outside its block")
	}
	if !strings.Contains(text, "[nodes.site-1] # network.json: \"Site 1\"\nrate = \"1gbit\"\nceil = \"1gbit\"\nupload_rate = \"500mbit\"\nupload_ceil = \"500mbit\"\n") ||
		!strings.Contains(text, "[nodes.site2]\nrate = \"500mbit\"\n") {
		t.Errorf("shaperd.toml's nodes:\n%s", text)
	}

	plan := load(t, main)
	var paths []string
	for _, n := range plan.Nodes {
		paths = append(paths, n.Path)
	}
	if want := []string{"site-1", "site2", "site-1/building_north", "site-1/building_north/ap_a", "site-1/building_north/ap_b"}; !slices.Equal(paths, want) {
		t.Errorf("nodes %q, want %q", paths, want)
	}
	if n, _ := plan.Node("building_north"); n.Rate != 400*tbf.Mbit || n.Ceil != 600*tbf.Mbit || n.UploadRate != 200*tbf.Mbit || n.UploadCeil != 200*tbf.Mbit {
		t.Errorf("building_north: %+v", n)
	}
	nodes := map[string]string{}
	for _, u := range plan.Users {
		nodes[u.Name] = u.Node
	}
	if nodes["alice-example-1-main-st"] != "ap_a" || nodes["carol"] != "ap_b" || nodes["unassigned-device"] != "ap_b" || len(nodes) != 5 {
		t.Errorf("users' nodes: %v", nodes)
	}

	// Again: nothing changes, nothing is duplicated.
	users := readFile(t, usersPath)
	code, stdout, stderr = run(t, cli.Env{}, "import", "libreqos", libreqosSample, "--network", libreqosNetwork, "--config", main)
	if code != cli.ExitOK || !strings.Contains(stdout, usersPath+" already holds these 5 users: not written") ||
		!strings.Contains(stdout, main+" already holds these 5 nodes and 4 tiers: not written") {
		t.Errorf("second import: exit %d\n%s%s", code, stdout, stderr)
	}
	if readFile(t, main) != text || readFile(t, usersPath) != users {
		t.Error("a second import of the same files changed them")
	}

	// shaperd.toml readable by its group only stays so.
	if err := os.Chmod(main, 0o640); err != nil {
		t.Fatal(err)
	}
	// network.json changes: AP_B moves under site2 with another capacity,
	// AP_A goes, its circuits move to the new "AP C"; the block is replaced.
	netJSON := filepath.Join(dir, "network.json")
	writeFile(t, netJSON, `{"Site 1": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 500},
 "site2": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 500, "children": {
   "AP_B": {"downloadBandwidthMbps": 200, "uploadBandwidthMbps": 50},
   "AP C": {"downloadBandwidthMbps": 200, "uploadBandwidthMbps": 50}}}}`)
	devices := filepath.Join(dir, "ShapedDevices.csv")
	writeFile(t, devices, strings.ReplaceAll(readFile(t, libreqosSample), ",AP_A,", ",AP C,"))
	code, stdout, stderr = run(t, cli.Env{}, "import", "libreqos", devices, "--network", netJSON, "--config", main, "--json")
	if code != cli.ExitOK || !strings.Contains(stdout, `"files": [`) || !strings.Contains(stdout, `"network_json": "AP C"`) {
		t.Fatalf("re-import: exit %d\n%s%s", code, stdout, stderr)
	}
	text = readFile(t, main)
	if strings.Count(text, migrate.BlockBegin) != 1 || strings.Count(text, "[tiers.lqos-5-1]") != 1 || strings.Contains(text, "building_north") {
		t.Errorf("re-import: one block with the new nodes only:\n%s", text)
	}
	if fi, err := os.Stat(main); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("shaperd.toml's mode after the re-import: %v %v", fi.Mode(), err)
	}
	plan = load(t, main)
	if n, ok := plan.Node("site2/ap_b"); !ok || n.Ceil != 200*tbf.Mbit || n.UploadCeil != 50*tbf.Mbit {
		t.Errorf("ap_b after the re-import: %+v", n)
	}
	for _, u := range plan.Users {
		if u.Name == "bob-s-bakery" && u.Node != "ap-c" {
			t.Errorf("bob's node %q, want ap-c", u.Node)
		}
	}
}

// What an import with --network refuses, writing nothing: a Parent Node
// that is not in network.json, a hierarchy too deep, a hand-written users
// file (without --force), a hand-written node of the same name.
func TestImportLibreQoSNetworkErrors(t *testing.T) {
	dir, main := exampleDir(t)
	usersPath := filepath.Join(dir, "users.toml")
	devices := filepath.Join(dir, "ShapedDevices.csv")
	writeFile(t, devices, strings.Replace(readFile(t, libreqosSample), "Dave router,AP_B,", "Dave router,AP_C,", 1))
	code, stdout, stderr := run(t, cli.Env{}, "import", "libreqos", devices, "--network", libreqosNetwork, "--config", main)
	if code != cli.ExitError || stdout != "" ||
		!strings.Contains(stderr, `ShapedDevices.csv:8: circuit 104: Parent Node "AP_C" is not a node of network.json (did you mean "AP_A"?)`) ||
		!strings.Contains(stderr, "nothing written") {
		t.Errorf("unknown parent: exit %d\n%s", code, stderr)
	}
	code, _, stderr = run(t, cli.Env{}, "import", "libreqos", libreqosSample, "--network", "../../migrate/testdata/network-deep.json", "--config", main)
	if code != cli.ExitError || !strings.Contains(stderr, `network-deep.json:9: node "AP 7" is 7 levels deep (L1/L2/L3/L4/Group/L5/L6/AP 7)`) {
		t.Errorf("too deep: exit %d\n%s", code, stderr)
	}
	if readFile(t, main) != readFile(t, exampleConfig) {
		t.Error("a refused import changed shaperd.toml")
	}
	if _, err := os.Stat(usersPath); err == nil {
		t.Error("a refused import wrote the users file")
	}

	// A users file the import did not write needs --force.
	writeFile(t, usersPath, readFile(t, "../../../configs/users.toml"))
	code, _, stderr = run(t, cli.Env{}, "import", "libreqos", libreqosSample, "--network", libreqosNetwork, "--config", main)
	if code != cli.ExitError || !strings.Contains(stderr, usersPath+" exists and was not written by shaperctl import libreqos; nothing written (--force replaces it)") {
		t.Errorf("hand-written users file: exit %d\n%s", code, stderr)
	}
	if readFile(t, main) != readFile(t, exampleConfig) {
		t.Error("an import refused for its users file changed shaperd.toml")
	}
	if code, _, stderr := run(t, cli.Env{}, "import", "libreqos", libreqosSample, "--network", libreqosNetwork, "--config", main, "--force"); code != cli.ExitOK {
		t.Errorf("--force: exit %d\n%s", code, stderr)
	}

	// A node of the same name written by hand outside the block.
	writeFile(t, main, readFile(t, exampleConfig)+"\n[nodes.ap_a]\nrate = \"100mbit\"\n")
	code, _, stderr = run(t, cli.Env{}, "import", "libreqos", libreqosSample, "--network", libreqosNetwork, "--config", main, "--force")
	if code != cli.ExitError || !strings.Contains(stderr, "shaperd.toml:") || !strings.Contains(stderr, ": [nodes.ap_a] is written here by hand and is also one the import writes") {
		t.Errorf("hand-written node: exit %d\n%s", code, stderr)
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"csv", "x.csv", "--network", "n.json"}, "--network is for import libreqos"},
		{[]string{"libreqos", "x.csv", "--network", "n.json"}, "--network needs the shaperd.toml to write the nodes into"},
		{[]string{"libreqos", "x.csv", "--network", "n.json", "--config", main, "--tiers-out", "t.toml"}, "--tiers-out is for imports without it"},
		{[]string{"libreqos", "x.csv", "--network", "n.json", "--config", main, "-o", "-"}, "-o - is for imports without it"},
	} {
		code, _, stderr := run(t, cli.Env{}, append([]string{"import"}, tc.args...)...)
		if code != cli.ExitUsage || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%q: exit %d, %s", tc.args, code, stderr)
		}
	}
}

// A flat network ({}) imports users without nodes; --tiers FILE maps the
// circuits to FILE's tiers and writes only the nodes into FILE.
func TestImportLibreQoSNetworkFlatAndMappedTiers(t *testing.T) {
	dir, main := exampleDir(t)
	code, stdout, stderr := run(t, cli.Env{}, "import", "libreqos", flatDevices, "--network", flatNetwork, "--config", main)
	if code != cli.ExitOK || !strings.Contains(stdout, "wrote no nodes (a flat network) and 1 tier to "+main) {
		t.Fatalf("flat: exit %d\n%s%s", code, stdout, stderr)
	}
	plan := load(t, main)
	if len(plan.Nodes) != 0 || len(plan.Users) != 2 || plan.Users[0].Node != "" || plan.Users[1].Node != "" {
		t.Errorf("flat: nodes %v, users %+v", plan.Nodes, plan.Users)
	}

	// Tiers of the operator's own: the circuits map to them.
	main = filepath.Join(dir, "own.toml")
	writeFile(t, main, "[daemon]\nusers_file = \"own-users.toml\"\n\n"+migrate.MinimalMain+`
[tiers.home]
rate = "25mbit"
ceil = "100mbit"
upload_rate = "5mbit"
upload_ceil = "20mbit"

[tiers.small]
rate = "2500kbit"
ceil = "10500kbit"
upload_rate = "500kbit"
upload_ceil = "2500kbit"

[tiers.tiny]
rate = "1mbit"
ceil = "5mbit"
upload_ceil = "1mbit"
`)
	code, stdout, stderr = run(t, cli.Env{}, "import", "libreqos", libreqosSample, "--network", libreqosNetwork, "--tiers", main)
	if code != cli.ExitOK || !strings.Contains(stdout, "wrote 5 nodes to "+main) || !strings.Contains(stdout, "wrote 5 users to "+filepath.Join(dir, "own-users.toml")) {
		t.Fatalf("--tiers FILE: exit %d\n%s%s", code, stdout, stderr)
	}
	plan = load(t, main)
	if len(plan.Nodes) != 5 || len(plan.Tiers) != 3 {
		t.Errorf("--tiers FILE: %d nodes, %d tiers", len(plan.Nodes), len(plan.Tiers))
	}
	for _, u := range plan.Users {
		if u.Name == "dave" && (u.Tier != "home" || u.Node != "ap_b" || u.Rate != 50*tbf.Mbit) {
			t.Errorf("dave: %+v", u)
		}
	}
}

// import -> export -> compare: the exported network.json has the imported
// tree (shaperd's names, the same parents and capacities), the exported
// ShapedDevices.csv the circuits with their parent nodes, rates and
// addresses; importing the export again gives the same plan.
func TestExportLibreQoSRoundTrip(t *testing.T) {
	dir, main := exampleDir(t)
	if code, _, stderr := run(t, cli.Env{}, "import", "libreqos", libreqosSample, "--network", libreqosNetwork, "--config", main); code != cli.ExitOK {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	outCSV, outJSON := filepath.Join(dir, "out.csv"), filepath.Join(dir, "out.json")
	if code, stdout, stderr := run(t, cli.Env{}, "export", "libreqos", "--config", main, "-o", outCSV, "--network", outJSON); code != cli.ExitOK || stdout != "" {
		t.Fatalf("export: exit %d: %s%s", code, stdout, stderr)
	}

	orig, errs := migrate.ReadNetwork([]byte(readFile(t, libreqosNetwork)), "network.json")
	if errs != nil {
		t.Fatal(errs)
	}
	back, errs := migrate.ReadNetwork([]byte(readFile(t, outJSON)), "out.json")
	if errs != nil {
		t.Fatalf("the exported network.json does not read back: %v\n%s", errs, readFile(t, outJSON))
	}
	tree := func(net *migrate.Network) map[string]string {
		m := map[string]string{}
		for _, n := range net.Nodes {
			m[n.Name] = n.Parent + " " + n.Rate.String() + "/" + n.Ceil.String() + " " + n.UploadRate.String() + "/" + n.UploadCeil.String()
		}
		return m
	}
	if a, b := tree(orig), tree(back); len(a) != 5 || !maps.Equal(a, b) {
		t.Errorf("trees differ:\nimported %v\nexported %v", a, b)
	}
	if len(back.Renamed()) != 0 {
		t.Errorf("the export writes shaperd's names, which need no renaming: %v", back.Renamed())
	}

	circuits, errs := migrate.ReadLibreQoS(strings.NewReader(readFile(t, libreqosSample)), "ShapedDevices.csv")
	if errs != nil {
		t.Fatal(errs)
	}
	exported, errs := migrate.ReadLibreQoS(strings.NewReader(readFile(t, outCSV)), "out.csv")
	if errs != nil {
		t.Fatalf("the exported ShapedDevices.csv does not read back: %v\n%s", errs, readFile(t, outCSV))
	}
	circuitOf := func(c migrate.Circuit, parent string) string {
		return strings.Join([]string{parent, strings.Join(c.Addresses, " "), c.DownMin.String(), c.DownMax.String(), c.UpMin.String(), c.UpMax.String()}, "|")
	}
	_, users := migrate.AutoTiers(circuits)
	nodeName := map[string]string{}
	for _, n := range orig.Nodes {
		nodeName[n.Original] = n.Name
	}
	want, got := map[string]string{}, map[string]string{}
	for i, c := range circuits {
		want[users[i].Name] = circuitOf(c, nodeName[c.ParentNode])
	}
	for _, c := range exported {
		got[c.ID] = circuitOf(c, c.ParentNode)
	}
	if !maps.Equal(want, got) {
		t.Errorf("circuits differ:\nimported %v\nexported %v", want, got)
	}

	// The export imports again into the same plan.
	_, main2 := exampleDir(t)
	if code, _, stderr := run(t, cli.Env{}, "import", "libreqos", outCSV, "--network", outJSON, "--config", main2); code != cli.ExitOK {
		t.Fatalf("import of the export: exit %d: %s", code, stderr)
	}
	p1, p2 := load(t, main), load(t, main2)
	if !slices.EqualFunc(p1.Nodes, p2.Nodes, func(a, b config.Node) bool {
		return a.Path == b.Path && a.Rate == b.Rate && a.Ceil == b.Ceil && a.UploadRate == b.UploadRate && a.UploadCeil == b.UploadCeil
	}) {
		t.Errorf("nodes after a round trip:\n%+v\n%+v", p1.Nodes, p2.Nodes)
	}
	if !slices.EqualFunc(p1.Users, p2.Users, func(a, b config.User) bool {
		return a.Name == b.Name && a.Tier == b.Tier && a.Node == b.Node && slices.Equal(a.Prefixes, b.Prefixes)
	}) {
		t.Errorf("users after a round trip differ")
	}

	// A plan with nodes needs --network; without nodes, network.json is {}.
	if code, _, stderr := run(t, cli.Env{}, "export", "libreqos", "--config", main); code != cli.ExitUsage || !strings.Contains(stderr, "has 5 nodes: --network FILE names where network.json goes") {
		t.Errorf("no --network: exit %d, %s", code, stderr)
	}
	code, stdout, _ := run(t, cli.Env{}, "export", "libreqos", "--config", exampleConfig, "-o", filepath.Join(dir, "flat.csv"), "--network", "-")
	if code != cli.ExitOK || stdout != "{}\n" {
		t.Errorf("flat: exit %d, %q", code, stdout)
	}
	if code, _, stderr := run(t, cli.Env{}, "export", "--config", main); code != cli.ExitUsage || !strings.Contains(stderr, "--config and --network are for export libreqos") {
		t.Errorf("--config without libreqos: exit %d, %s", code, stderr)
	}
}
