package migrate

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func readNetwork(t *testing.T, name string) (*Network, []error) {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return ReadNetwork(data, name)
}

func errStrings(errs []error) string {
	var s []string
	for _, e := range errs {
		s = append(s, e.Error())
	}
	return strings.Join(s, "\n")
}

// The nested fixture: file order with parents first, shaperd names,
// parents, depths, lines, and capacities (a minimum where given).
func TestReadNetworkNested(t *testing.T) {
	net, errs := readNetwork(t, "network.json")
	if errs != nil {
		t.Fatal(errStrings(errs))
	}
	var got []string
	for _, n := range net.Nodes {
		got = append(got, strings.Join([]string{n.Name, n.Original, n.Parent, n.Path, itoa(n.Depth), itoa(n.Line)}, "|"))
	}
	want := []string{
		"site-1|Site 1||Site 1|1|2",
		"building_north|Building_North|site-1|Site 1/Building_North|2|9",
		"ap_a|AP_A|building_north|Site 1/Building_North/AP_A|3|17",
		"ap_b|AP_B|building_north|Site 1/Building_North/AP_B|3|23",
		"site2|site2||site2|1|35",
	}
	if !slices.Equal(got, want) {
		t.Errorf("nodes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	rates := func(n NetworkNode) [4]tbf.Rate { return [4]tbf.Rate{n.Rate, n.Ceil, n.UploadRate, n.UploadCeil} }
	if r := rates(net.Nodes[1]); r != [4]tbf.Rate{400 * tbf.Mbit, 600 * tbf.Mbit, 200 * tbf.Mbit, 200 * tbf.Mbit} {
		t.Errorf("building_north: rate, ceil, upload_rate, upload_ceil %v: the minimum is the rate", r)
	}
	if r := rates(net.Nodes[3]); r != [4]tbf.Rate{250_500_000, 250_500_000, 100 * tbf.Mbit, 100 * tbf.Mbit} {
		t.Errorf("ap_b: %v: rate = ceil = the capacity, decimals kept", r)
	}
	var renamed []string
	for _, n := range net.Renamed() {
		renamed = append(renamed, n.Original+"->"+n.Name)
	}
	if got := strings.Join(renamed, " "); got != "Site 1->site-1 Building_North->building_north AP_A->ap_a AP_B->ap_b" {
		t.Errorf("renamed: %s", got)
	}
}

// LibreQoS's flat network: {} has no nodes, and circuits without a
// parent node (empty or "none") get none.
func TestReadNetworkFlat(t *testing.T) {
	net, errs := readNetwork(t, "network-flat.json")
	if errs != nil || len(net.Nodes) != 0 {
		t.Fatalf("flat network: %v, %v", net, errStrings(errs))
	}
	cs, errs := readLibreQoS(t, "ShapedDevices-flat.csv")
	if errs != nil {
		t.Fatal(errStrings(errs))
	}
	tiers, users := AutoTiers(cs)
	if errs := AssignNodes(cs, users, net, "ShapedDevices-flat.csv"); errs != nil {
		t.Fatal(errStrings(errs))
	}
	for _, u := range users {
		if u.Node != "" {
			t.Errorf("user %s has node %q in a flat network", u.Name, u.Node)
		}
	}
	if _, errs := Validate("shaperd.toml", []byte(MinimalMain+TiersTOML("", tiers)), UsersTOML("", users), "ShapedDevices-flat.csv", users, tiers); errs != nil {
		t.Error(errStrings(errs))
	}
	// A Parent Node in a flat network is not in network.json.
	cs[0].ParentNode = "AP_A"
	errs = AssignNodes(cs, users, net, "ShapedDevices-flat.csv")
	if want := `ShapedDevices-flat.csv:3: circuit 201: the Parent Node "AP_A" is not in network-flat.json, which has no nodes (a flat network: leave Parent Node empty or "none")`; errStrings(errs) != want {
		t.Errorf("errors:\n%s\nwant:\n%s", errStrings(errs), want)
	}
}

// Keys other than the capacities, children and virtual are skipped,
// whatever their values.
func TestReadNetworkUnknownKeys(t *testing.T) {
	net, errs := ReadNetwork([]byte("\ufeff"+`{"Tower": {"type": "Site", "id": 7, "downloadBandwidthMbps": 100,
		"coords": {"lat": 1, "lon": [2, {"x": null}]}, "tags": ["a", "b"], "uploadBandwidthMbps": "50",
		"children": {"AP": {"maxDownload": 80, "maxUpload": 40, "minDownload": 0, "parent_site": "Tower"}}}}`), "n.json")
	if errs != nil {
		t.Fatal(errStrings(errs))
	}
	if len(net.Nodes) != 2 || net.Nodes[0].UploadCeil != 50*tbf.Mbit || net.Nodes[1].Parent != "tower" ||
		net.Nodes[1].Ceil != 80*tbf.Mbit || net.Nodes[1].Rate != 80*tbf.Mbit || net.Nodes[1].UploadRate != 40*tbf.Mbit {
		t.Errorf("nodes %+v", net.Nodes)
	}
}

// A branch of more than config.MaxNodeDepth shaped nodes is an error at
// the first node too deep, with its path; a virtual node does not count.
func TestReadNetworkTooDeep(t *testing.T) {
	_, errs := readNetwork(t, "network-deep.json")
	want := `network-deep.json:9: node "AP 7" is 7 levels deep (L1/L2/L3/L4/Group/L5/L6/AP 7) (and 1 node below it): shaperd's hierarchy has at most 6 (the kernel's HTB tree is 8 classes deep, and the interface's root and the user take two); hang it from a node higher up`
	if errStrings(errs) != want {
		t.Errorf("errors:\n%s\nwant:\n%s", errStrings(errs), want)
	}
	if config.MaxNodeDepth != 6 {
		t.Fatalf("the fixture is 8 levels for a limit of 6, not %d", config.MaxNodeDepth)
	}
}

// Virtual nodes are not shaped: their children and circuits hang from the
// nearest shaped node above them (none for a top-level one).
func TestReadNetworkVirtual(t *testing.T) {
	net, errs := ReadNetwork([]byte(`{
  "Region": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000, "children": {
    "Town": {"virtual": true, "downloadBandwidthMbps": 500, "uploadBandwidthMbps": 500, "children": {
      "AP_A": {"downloadBandwidthMbps": 200, "uploadBandwidthMbps": 200}}}}},
  "Group": {"virtual": true, "children": {"AP_B": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}}
}`), "n.json")
	if errs != nil {
		t.Fatal(errStrings(errs))
	}
	var got []string
	for _, n := range net.Nodes {
		got = append(got, n.Name+"<"+n.Parent+":"+itoa(n.Depth))
	}
	if g := strings.Join(got, " "); g != "region<:1 ap_a<region:2 ap_b<:1" {
		t.Errorf("nodes %s", g)
	}
	for parent, want := range map[string]string{"Town": "region", "Group": "", "AP_A": "ap_a", "none": "", "NONE": ""} {
		if got, err := net.nodeFor(parent); err != nil || got != want {
			t.Errorf("Parent Node %q: %q, %v; want %q", parent, got, err, want)
		}
	}
}

// Names that are not shaperd names are mapped deterministically; names
// that are valid keep theirs, and collisions get -2, -3...
func TestNodeNames(t *testing.T) {
	long := strings.Repeat("X", 70)
	in := []string{"AP A", "Site 1", "ap-a", "AP_A", "ap-a", "!!!", "", long, long, "Ünï Tower"}
	want := []string{"ap-a-2", "site-1", "ap-a", "ap_a", "ap-a-3", "node", "node-2", strings.Repeat("x", 64), strings.Repeat("x", 62) + "-2", "n-tower"}
	got := nodeNames(in)
	if !slices.Equal(got, want) {
		t.Errorf("nodeNames:\n%q\nwant:\n%q", got, want)
	}
	for _, n := range got {
		if !config.ValidName(n) {
			t.Errorf("%q does not follow the name rule", n)
		}
	}
	if again := nodeNames(in); !slices.Equal(again, got) {
		t.Errorf("not deterministic: %q then %q", got, again)
	}
}

// Bad files: one clear error each, naming the line.
func TestReadNetworkErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{"", `n.json: empty (a flat network, without nodes, is {})`},
		{"{\n  \"A\": {\"downloadBandwidthMbps\": 10,\n  \"uploadBandwidthMbps\": 10\n}", `n.json:4: unexpected end of file: an object is not closed`},
		{"{\n  \"A\": {\"downloadBandwidthMbps\": 10,,\n}}", `n.json:2: invalid character ',' looking for beginning of object key string (not valid JSON)`},
		{"[]", `n.json:1: the top level is an array, not an object of nodes keyed by name (a flat network is {})`},
		{"{} {}", `n.json:1: an object after the top-level object`},
		{"{\"A\": 5}", `n.json:1: node "A" is the number 5, not an object`},
		{"{\"A\": {\"uploadBandwidthMbps\": 5}}", `n.json:1: node "A" has no downloadBandwidthMbps (its capacity in Mbit/s)`},
		{"{\"A\": {\"downloadBandwidthMbps\": \"fast\", \"uploadBandwidthMbps\": 5}}", `n.json:1: node "A": downloadBandwidthMbps: "fast" is not a number of Mbit/s`},
		{"{\"A\": {\"downloadBandwidthMbps\": true, \"uploadBandwidthMbps\": 5}}", `n.json:1: node "A": downloadBandwidthMbps: true, not a number of Mbit/s`},
		{"{\"A\": {\"downloadBandwidthMbps\": 10, \"uploadBandwidthMbps\": 5,\n \"downloadBandwidthMbpsMin\": 20}}", `n.json:2: node "A": downloadBandwidthMbpsMin 20mbit is above its capacity 10mbit`},
		{"{\"A\": {\"downloadBandwidthMbps\": 10, \"maxDownload\": 10, \"uploadBandwidthMbps\": 5}}", `n.json:1: node "A": maxDownload: the value is already given on line 1`},
		{"{\"A\": {\"downloadBandwidthMbps\": 10, \"uploadBandwidthMbps\": 5, \"children\": []}}", `n.json:1: node "A": children: an array, not an object of nodes`},
		{"{\"A\": {\"downloadBandwidthMbps\": 10, \"uploadBandwidthMbps\": 5},\n\"A\": {\"downloadBandwidthMbps\": 10, \"uploadBandwidthMbps\": 5}}", `n.json:2: node "A" is already on line 1 in the same object`},
	} {
		_, errs := ReadNetwork([]byte(tc.json), "n.json")
		if got := errStrings(errs); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.json, got, tc.want)
		}
	}
}

// Circuits get the node their Parent Node names; an unknown one is an
// error at the circuit's row with a near name, an ambiguous one names
// both places, and a circuit's devices must agree.
func TestAssignNodes(t *testing.T) {
	net, errs := readNetwork(t, "network.json")
	if errs != nil {
		t.Fatal(errStrings(errs))
	}
	cs, errs := readLibreQoS(t, "ShapedDevices.csv")
	if errs != nil {
		t.Fatal(errStrings(errs))
	}
	_, users := AutoTiers(cs)
	if errs := AssignNodes(cs, users, net, "ShapedDevices.csv"); errs != nil {
		t.Fatal(errStrings(errs))
	}
	var got []string
	for _, u := range users {
		got = append(got, u.Name+":"+u.Node)
	}
	if g := strings.Join(got, " "); g != "alice-example-1-main-st:ap_a bob-s-bakery:ap_a carol:ap_b dave:ap_b unassigned-device:ap_b" {
		t.Errorf("users' nodes: %s", g)
	}
	if AssignNodes(cs, users, nil, "x.csv") != nil {
		t.Error("no network.json: no nodes, no errors")
	}

	csv := "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n" +
		"1,One,1,d1,AP-A,,198.18.20.1,,10,2,50,10,\n" +
		"2,Two,2,d2,Nowhere,,198.18.20.2,,10,2,50,10,\n" +
		"3,Three,3,d3,ap_a,,198.18.20.3,,10,2,50,10,\n" +
		"3,Three,4,d4,AP_B,,198.18.20.4,,10,2,50,10,\n" +
		"5,Five,5,d5,Dup,,198.18.20.5,,10,2,50,10,\n"
	cs, errs = ReadLibreQoS(strings.NewReader(csv), "in.csv")
	if errs != nil {
		t.Fatal(errStrings(errs))
	}
	net, errs = ReadNetwork([]byte(`{"AP_A": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100},
"AP_B": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100, "children": {
  "Dup": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}},
"Dup": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}`), "network.json")
	if errs != nil {
		t.Fatal(errStrings(errs))
	}
	_, users = AutoTiers(cs)
	want := strings.Join([]string{
		`in.csv:2: circuit 1: Parent Node "AP-A" is not a node of network.json (did you mean "AP_A"?)`,
		`in.csv:3: circuit 2: Parent Node "Nowhere" is not a node of network.json`,
		`in.csv:5: circuit 3: Parent Node "AP_B", but "ap_a" on line 4; a circuit's devices share one parent node`,
		`in.csv:6: circuit 5: the Parent Node "Dup" is ambiguous: network.json has 2 nodes of that name, at AP_B/Dup (line 3), Dup (line 4)`,
	}, "\n")
	if got := errStrings(AssignNodes(cs, users, net, "in.csv")); got != want {
		t.Errorf("errors:\n%s\nwant:\n%s", got, want)
	}
}

// The import's block in shaperd.toml: appended once, replaced in place by
// the next import, removable; a broken block and a hand-written table the
// import also writes are errors naming their lines.
func TestBlock(t *testing.T) {
	main := "[daemon]\nlog_level = \"info\"\n\n[tiers.gold]\nrate = \"10mbit\"\n"
	one, err := SetBlock([]byte(main), "s.toml", "[nodes.a]\nrate = \"1mbit\"\n")
	if err != nil {
		t.Fatal(err)
	}
	want := main + "\n" + BlockBegin + "\n[nodes.a]\nrate = \"1mbit\"\n" + BlockEnd + "\n"
	if string(one) != want {
		t.Fatalf("appended:\n%s\nwant:\n%s", one, want)
	}
	// After the block, the operator adds a table of their own.
	one = append(one, "\n[fleet]\nendpoints = [\"http://e:2379\"]\n"...)
	two, err := SetBlock(one, "s.toml", "[nodes.b]\nrate = \"2mbit\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(two), BlockBegin) != 1 || strings.Contains(string(two), "nodes.a") ||
		!strings.Contains(string(two), "[nodes.b]") || !strings.HasSuffix(string(two), "[fleet]\nendpoints = [\"http://e:2379\"]\n") {
		t.Errorf("replaced:\n%s", two)
	}
	if none, _ := WithoutBlock(two, "s.toml"); strings.Contains(string(none), "nodes.b") || !strings.Contains(string(none), "[fleet]") {
		t.Errorf("without the block:\n%s", none)
	}
	if _, err := SetBlock([]byte(main+BlockBegin+"\n"), "s.toml", ""); err == nil || err.Error() != `s.toml:6: the "`+BlockBegin+`" line has no "`+BlockEnd+`" line after it` {
		t.Errorf("an unclosed block: %v", err)
	}
	errs := Clashes([]byte("[nodes.ap_a]\nrate = \"1mbit\"\n[[nodes.ap_a.schedule]]\n[nodes.other]\n"+string(two)), "s.toml", "nodes", []string{"ap_a", "b"})
	if len(errs) != 2 || !strings.HasPrefix(errs[0].Error(), "s.toml:1: [nodes.ap_a] is written here by hand and is also one the import writes") ||
		!strings.HasPrefix(errs[1].Error(), "s.toml:3: [nodes.ap_a]") {
		t.Errorf("clashes: %s", errStrings(errs))
	}
}
