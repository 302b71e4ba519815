package migrate

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func readLibreQoS(t *testing.T, name string) ([]Circuit, []error) {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ReadLibreQoS(f, name)
}

func TestReadLibreQoSCircuits(t *testing.T) {
	cs, errs := readLibreQoS(t, "ShapedDevices.csv")
	if errs != nil {
		t.Fatalf("errors: %v", errs)
	}
	if len(cs) != 5 {
		t.Fatalf("%d circuits, want 5 (carol's two devices are one): %+v", len(cs), cs)
	}
	carol := cs[2]
	if carol.ID != "103" || strings.Join(carol.Addresses, " ") != "198.18.12.1/32 198.18.12.2/32 2001:db8:12::/64" ||
		strings.Join(carol.Devices, ",") != "1003,1004" || carol.Line != 6 {
		t.Errorf("carol: %+v", carol)
	}
	if carol.DownMin != 2_500_000 || carol.UpMin != 500_000 || carol.DownMax != 10_500_000 || carol.UpMax != 2_500_000 {
		t.Errorf("carol's rates %v %v %v %v, want 2.5/0.5/10.5/2.5 Mbit/s", carol.DownMin, carol.UpMin, carol.DownMax, carol.UpMax)
	}
	if a := cs[0].Addresses; strings.Join(a, " ") != "198.18.10.1/32 198.18.10.2/32 2001:db8:10::/56" {
		t.Errorf("alice's addresses %v", a)
	}
	if cs[4].ID != "device-1006" || cs[4].Name != "Unassigned device" {
		t.Errorf("a device without a circuit: %+v", cs[4])
	}
}

func TestReadLibreQoSReportsEveryBadRow(t *testing.T) {
	_, errs := readLibreQoS(t, "ShapedDevices-bad.csv")
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`ShapedDevices-bad.csv:3: Download Min Mbps: "ten" is not a number of Mbit/s`,
		`ShapedDevices-bad.csv:4: Download Min Mbps 60 is above Download Max Mbps 50`,
		`ShapedDevices-bad.csv:5: IPv4: "198.18.20.5/30" has host bits set (the prefix is 198.18.20.4/30)`,
		`ShapedDevices-bad.csv:6: IPv4: 2001:db8::1 is not an IPv4 address`,
		`ShapedDevices-bad.csv:7: address 198.18.20.1/32 is already on line 2`,
		`ShapedDevices-bad.csv:8: circuit 1 has other rates on line 2; a circuit's devices share one set of rates`,
		`ShapedDevices-bad.csv:9: the device has no IPv4 or IPv6 address`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestReadLibreQoSHeader(t *testing.T) {
	_, errs := ReadLibreQoS(strings.NewReader("name,tier,addresses\nalice,gold,198.18.1.1\n"), "x.csv")
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), `x.csv:1: no column "circuit id"`) {
		t.Errorf("errors %v", errs)
	}
}

func TestAutoTiersValidate(t *testing.T) {
	cs, errs := readLibreQoS(t, "ShapedDevices.csv")
	if errs != nil {
		t.Fatal(errs)
	}
	tiers, users := AutoTiers(cs)
	var names []string
	for _, tr := range tiers {
		names = append(names, tr.Name)
	}
	// 101 and 104 share the maximums 100/20 with other minimums.
	if got := strings.Join(names, " "); got != "lqos-100-20-min-25-5 lqos-10_5-2_5 lqos-100-20-min-50-10 lqos-5-1" {
		t.Errorf("tiers %s", got)
	}
	var unames []string
	for _, u := range users {
		unames = append(unames, u.Name+":"+u.Tier)
	}
	if got := strings.Join(unames, " "); got != "alice-example-1-main-st:lqos-100-20-min-25-5 bob-s-bakery:lqos-100-20-min-25-5 carol:lqos-10_5-2_5 dave:lqos-100-20-min-50-10 unassigned-device:lqos-5-1" {
		t.Errorf("users %s", got)
	}
	tt := TiersTOML("generated", tiers)
	ut := UsersTOML("generated", users)
	plan, verrs := Validate("shaperd.toml", []byte(MinimalMain+tt), ut, "ShapedDevices.csv", users, tiers)
	if verrs != nil {
		t.Fatalf("the import does not validate: %v\n%s\n%s", verrs, tt, ut)
	}
	if len(plan.Users) != 5 || len(plan.Tiers) != 4 {
		t.Errorf("plan: %d users, %d tiers", len(plan.Users), len(plan.Tiers))
	}
	tr, _ := plan.Tier("lqos-10_5-2_5")
	if tr.Rate != 2_500_000 || tr.Ceil != 10_500_000 || tr.UploadRate != 500_000 || tr.UploadCeil != 2_500_000 {
		t.Errorf("tier lqos-10_5-2_5: %+v", tr)
	}
}

func TestMapTiers(t *testing.T) {
	cs, errs := readLibreQoS(t, "ShapedDevices.csv")
	if errs != nil {
		t.Fatal(errs)
	}
	main, err := os.ReadFile("testdata/tiers.toml")
	if err != nil {
		t.Fatal(err)
	}
	plan, verrs := Validate("testdata/tiers.toml", main, "", "", nil, nil)
	if verrs != nil {
		t.Fatal(verrs)
	}
	_, merrs := MapTiers(cs, plan, "ShapedDevices.csv")
	if len(merrs) != 1 || !strings.Contains(merrs[0].Error(), "ShapedDevices.csv:9: circuit device-1006: no tier of testdata/tiers.toml has ceil 5mbit and upload_ceil 1mbit") {
		t.Fatalf("errors %v", merrs)
	}
	users, merrs := MapTiers(cs[:4], plan, "ShapedDevices.csv")
	if merrs != nil {
		t.Fatal(merrs)
	}
	for i, want := range []User{
		{Tier: "home100"}, {Tier: "home100"},
		{Tier: "small", Rate: 2_500_000},
		{Tier: "home100", Rate: 50_000_000, UploadRate: 10_000_000},
	} {
		u := users[i]
		if u.Tier != want.Tier || u.Rate != want.Rate || u.UploadRate != want.UploadRate || u.Ceil != 0 || u.UploadCeil != 0 {
			t.Errorf("user %d %s: tier %s rate %v upload_rate %v; want %+v", i, u.Name, u.Tier, u.Rate, u.UploadRate, want)
		}
	}
	if _, verrs := Validate("testdata/tiers.toml", main, UsersTOML("", users), "ShapedDevices.csv", users, nil); verrs != nil {
		t.Errorf("mapped users do not validate: %v", verrs)
	}
}

func TestReadCSV(t *testing.T) {
	f, err := os.Open("testdata/users.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	users, errs := ReadCSV(f, "users.csv")
	if errs != nil {
		t.Fatal(errs)
	}
	if len(users) != 4 || strings.Join(users[2].Addresses, " ") != "198.18.2.0/28 2001:db8:2::/64" ||
		users[3].Rate != 80*tbf.Mbit || users[3].Ceil != 150*tbf.Mbit {
		t.Errorf("users %+v", users)
	}
	main, err := os.ReadFile("../../configs/shaperd.toml")
	if err != nil {
		t.Fatal(err)
	}
	if _, verrs := Validate("shaperd.toml", main, UsersTOML("", users), "users.csv", users, nil); verrs != nil {
		t.Errorf("does not validate against configs/shaperd.toml: %v", verrs)
	}
}

// TestReadCSVReportsEveryBadRow: row problems from the reader, then the
// configuration's (unknown tier, overlapping address) at the CSV's lines.
func TestReadCSVReportsEveryBadRow(t *testing.T) {
	f, err := os.Open("testdata/users-bad.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, errs := ReadCSV(f, "users-bad.csv")
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`users-bad.csv:3: name "Bob Smith": use 1 to 64 characters of a-z, 0-9, '_' and '-'`,
		`users-bad.csv:4: no tier`,
		`users-bad.csv:5: user alice is already on line 2`,
		`users-bad.csv:8: "not-an-address" is not an IP address or prefix`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Rows that read well but that shaperd's configuration refuses.
	users, errs := ReadCSV(strings.NewReader("alice,gold,198.18.1.10\nerin,platinum,198.18.1.40\nfrank,gold,198.18.1.10\n"), "u.csv")
	if errs != nil {
		t.Fatal(errs)
	}
	main, _ := os.ReadFile("../../configs/shaperd.toml")
	_, verrs := Validate("shaperd.toml", main, UsersTOML("", users), "u.csv", users, nil)
	got = nil
	for _, e := range verrs {
		got = append(got, e.Error())
	}
	joined := strings.Join(got, "\n")
	for _, w := range []string{"u.csv:2: user erin: tier:", "platinum", "u.csv:3: user frank: addresses[0]:"} {
		if !strings.Contains(joined, w) {
			t.Errorf("validation errors lack %q:\n%s", w, joined)
		}
	}
}

func TestSanitizeAndUniqueNames(t *testing.T) {
	for in, want := range map[string]string{
		"968 Circle St., Gurnee, IL 60031": "968-circle-st-gurnee-il-60031",
		"  --Bob's  ":                      "bob-s",
		"Ünïcode":                          "n-code",
		strings.Repeat("a", 70):            strings.Repeat("a", 64),
	} {
		if got := sanitize(in); got != want || !config.ValidName(got) {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	taken := map[string]bool{}
	a := uniqueName(Circuit{ID: "1", Name: "Same"}, taken)
	b := uniqueName(Circuit{ID: "2", Name: "Same"}, taken)
	c := uniqueName(Circuit{ID: "7", Name: ""}, taken)
	if a != "same" || b != "same-2" || c != "circuit-7" {
		t.Errorf("names %q %q %q", a, b, c)
	}
}

func TestValidateAbsoluteUsersFile(t *testing.T) {
	main := []byte("[daemon]\nusers_file = \"/etc/shaperd/users.toml\"\n" + MinimalMain + "[tiers.a]\nrate = \"1mbit\"\n")
	users := []User{{Name: "x", Tier: "b", Addresses: []string{"198.18.0.1/32"}, Line: 7}}
	_, errs := Validate("/etc/shaperd/shaperd.toml", main, UsersTOML("", users), "in.csv", users, nil)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "in.csv:7: user x: tier:") {
		t.Errorf("errors %v: want the unknown tier at in.csv:7", errs)
	}
}

// A row cut short is one error naming the row and its column count, not
// one "empty" per missing value; the other rows are read on.
func TestReadLibreQoSCutRow(t *testing.T) {
	csv := "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n" +
		"1,Good,1,d1,AP,,198.18.20.1,,10,2,50,10,\n" +
		"2,Cut,2,d2,AP,,198.18.20.2\n" +
		"3,Also good,3,d3,AP,,198.18.20.3,,10,2,50,10\n"
	_, errs := ReadLibreQoS(strings.NewReader(csv), "cut.csv")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "cut.csv:3: the row has 7 columns, the header 13") {
		t.Errorf("errors %v; want one at line 3 naming its 7 columns", errs)
	}
}

// The sqm column becomes the user's leaf queue: cake (with its diffserv
// mode), fq_codel, none as bfifo; DOWN/UP only when both are the same.
func TestParseSQM(t *testing.T) {
	for _, c := range []struct {
		cell string
		want SQM
		err  string
	}{
		{"", SQM{}, ""},
		{"cake", SQM{Leaf: "cake"}, ""},
		{" Cake diffserv4 ", SQM{Leaf: "cake", Diffserv: "diffserv4"}, ""},
		{"fq_codel", SQM{Leaf: "fq_codel"}, ""},
		{"none", SQM{Leaf: "bfifo"}, ""},
		{"fq_codel/fq_codel", SQM{Leaf: "fq_codel"}, ""},
		{"cake/fq_codel", SQM{}, "a download queue and another upload queue"},
		{"cake diffserv5", SQM{}, "is not a queue shaperd knows"},
		{"pie", SQM{}, "is not a queue shaperd knows"},
	} {
		got, err := parseSQM(c.cell)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("parseSQM(%q) = %+v, %v; want %+v, %q", c.cell, got, err, c.want, c.err)
		}
	}
}

// A circuit's sqm reaches users.toml as leaf_qdisc (and leaf_diffserv),
// which the configuration accepts; a bad cell or two devices of one
// circuit with different queues are errors at their lines.
func TestLibreQoSSQMToLeaf(t *testing.T) {
	const head = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm\n"
	cs, errs := ReadLibreQoS(strings.NewReader(head+
		"1,Alice,11,,,,198.18.1.1,,2,1,10,5,,cake diffserv4\n"+
		"2,Bob,21,,,,198.18.1.2,,2,1,10,5,,none\n"+
		"3,Carol,31,,,,198.18.1.3,,2,1,10,5,,\n"), "sd.csv")
	if errs != nil {
		t.Fatal(errs)
	}
	tiers, users := AutoTiers(cs)
	text := UsersTOML("", users)
	for _, want := range []string{"leaf_qdisc = \"cake\"\nleaf_diffserv = \"diffserv4\"\n", "leaf_qdisc = \"bfifo\"\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("users.toml lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "leaf_qdisc"); n != 2 {
		t.Errorf("%d leaf_qdisc keys, want 2 (carol has none):\n%s", n, text)
	}
	main := "[daemon]\nusers_file = \"users.toml\"\n[policy]\ntimezone = \"UTC\"\n[[interface]]\nname = \"lan0\"\nbandwidth = \"100mbit\"\n" + TiersTOML("", tiers)
	fsys := fstest.MapFS{"shaperd.toml": {Data: []byte(main)}, "users.toml": {Data: []byte(text)}}
	if _, err := config.LoadFS(fsys, "shaperd.toml"); err != nil {
		t.Errorf("the imported users do not load: %v\n%s", err, text)
	}

	_, errs = ReadLibreQoS(strings.NewReader(head+
		"1,Alice,11,,,,198.18.1.1,,2,1,10,5,,cake/fq_codel\n"+
		"2,Bob,21,,,,198.18.1.2,,2,1,10,5,,cake\n"+
		"2,Bob,22,,,,198.18.1.3,,2,1,10,5,,fq_codel\n"), "sd.csv")
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`sd.csv:2: sqm: "cake/fq_codel" has a download queue and another upload queue; a shaperd user has one leaf queue for both directions (leaf_qdisc): give one`,
		`sd.csv:4: circuit 2 has another sqm on line 3; a circuit's devices share one queue`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
