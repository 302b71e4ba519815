package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const fleetIfaces = `
[[interface]]
name = "lan0"
bandwidth = "100mbit"
default_tier = "basic"
`

// TestFleetAbsent: a configuration without [fleet] has no Fleet.
func TestFleetAbsent(t *testing.T) {
	plan := mustLoad(t, fleetIfaces+"[tiers.basic]\nrate = \"1mbit\"\n", "")
	if plan.Fleet != nil || plan.SharedPath != "" {
		t.Fatalf("Fleet = %+v, SharedPath = %q; want none", plan.Fleet, plan.SharedPath)
	}
}

// TestFleetDefaults: prefix, router (the host name) and dial timeout.
func TestFleetDefaults(t *testing.T) {
	plan := mustLoad(t, fleetIfaces+`[tiers.basic]
rate = "1mbit"
[fleet]
endpoints = ["http://127.0.0.1:2379", "https://etcd2:2379"]
`, "")
	f := plan.Fleet
	host, _ := os.Hostname()
	if f == nil || f.Prefix != "/shaperd" || f.Router != host || f.DialTimeout != 5*time.Second ||
		len(f.Endpoints) != 2 || f.Endpoints[1] != "https://etcd2:2379" {
		t.Fatalf("fleet = %+v", f)
	}
	plan = mustLoad(t, fleetIfaces+`[tiers.basic]
rate = "1mbit"
[fleet]
endpoints = ["http://127.0.0.1:2379"]
prefix = "/campus/shaperd"
router = "gw-b12"
dial_timeout = "2s"
ca = "/etc/shaperd/ca.pem"
cert = "/etc/shaperd/c.pem"
key = "/etc/shaperd/c.key"
username = "shaperd"
password_file = "/etc/shaperd/etcd.pass"
`, "")
	f = plan.Fleet
	if f.Prefix != "/campus/shaperd" || f.Router != "gw-b12" || f.DialTimeout != 2*time.Second ||
		f.CA != "/etc/shaperd/ca.pem" || f.Cert != "/etc/shaperd/c.pem" || f.Key != "/etc/shaperd/c.key" ||
		f.Username != "shaperd" || f.PasswordFile != "/etc/shaperd/etcd.pass" {
		t.Fatalf("fleet = %+v", f)
	}
}

// TestFleetErrors: every bad [fleet] key is reported at its position.
func TestFleetErrors(t *testing.T) {
	main := fleetIfaces + `[tiers.basic]
rate = "1mbit"
[fleet]
endpoints = ["127.0.0.1:2379"]
prefix = "shaperd/"
router = "gw b12"
cert = "/c.pem"
username = "x"
endpoint = "typo"
`
	_, err := LoadFS(mapFS(main, ""), "etc/shaperd.toml")
	if err == nil {
		t.Fatal("want errors")
	}
	got := err.Error()
	for _, want := range []string{
		`etc/shaperd.toml:9:14: fleet.endpoints[0]: "127.0.0.1:2379" is not an etcd client URL`,
		`etc/shaperd.toml:10:1: fleet.prefix: "shaperd/" must start with '/'`,
		`etc/shaperd.toml:11:1: fleet.router: "gw b12" is not a router name`,
		`etc/shaperd.toml:12:1: fleet.cert: a client certificate needs fleet.key too`,
		`etc/shaperd.toml:13:1: fleet.username: fleet.username needs fleet.password_file too`,
		`etc/shaperd.toml:14:1: fleet.endpoint: unknown key; did you mean "endpoints"?`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	_, err = LoadFS(mapFS(fleetIfaces+"[tiers.basic]\nrate = \"1mbit\"\n[fleet]\n", ""), "etc/shaperd.toml")
	if err == nil || !strings.Contains(err.Error(), `fleet.endpoints: missing required key "endpoints"`) {
		t.Fatalf("missing endpoints: %v", err)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadShared: policy, tiers and users come from the shared documents,
// the local file's own tiers and users file are not used, and errors in
// the shared documents name them with positions.
func TestLoadShared(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "shaperd.toml")
	writeFile(t, local, fleetIfaces+`[tiers.basic]
rate = "1mbit"
[fleet]
endpoints = ["http://127.0.0.1:2379"]
router = "r1"
`) // no users.toml next to it: not read
	sh := &Shared{Name: "fleet:shared.toml", UsersName: "fleet:users.toml",
		Main:  []byte("[policy]\nramp = \"0s\"\n[tiers.basic]\nrate = \"7mbit\"\n"),
		Users: []byte("[[user]]\nname = \"alice\"\ntier = \"basic\"\naddresses = [\"198.18.0.10\"]\n")}
	plan, err := LoadShared(local, sh)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Tiers) != 1 || uint64(plan.Tiers[0].Rate) != 7_000_000 || plan.Policy.Ramp != 0 ||
		len(plan.Users) != 1 || plan.Users[0].Name != "alice" || plan.Fleet.Router != "r1" {
		t.Fatalf("plan: tiers %+v policy %+v users %+v", plan.Tiers, plan.Policy, plan.Users)
	}
	if e := plan.Errorf("tiers.basic.rate", "x"); e.File != "fleet:shared.toml" || e.Line != 4 {
		t.Errorf("Errorf(tiers.basic.rate) = %v", e)
	}
	if e := plan.Errorf("interface[0].bandwidth", "x"); e.File != local || e.Line != 4 {
		t.Errorf("Errorf(interface[0].bandwidth) = %v", e)
	}

	bad := &Shared{Name: "fleet:shared.toml", UsersName: "fleet:users.toml",
		Main:  []byte("[tiers.gold]\nrate = \"7mbit\"\nceil = \"1mbit\"\n[daemon]\n"),
		Users: []byte("[[user]]\nname = \"bob\"\ntier = \"silver\"\naddresses = [\"198.18.0.10\"]\n")}
	_, err = LoadShared(local, bad)
	if err == nil {
		t.Fatal("want errors")
	}
	got := err.Error()
	for _, want := range []string{
		"interface[0].default_tier", // basic is no longer a tier
		"fleet:shared.toml:3:1: tiers.gold.ceil",
		"fleet:shared.toml:4:1: daemon: unknown key",
		"fleet:users.toml:3:1: user[0].tier",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestExtractShared: the shared part of a full configuration loads back
// with the same tiers, policy and users.
func TestExtractShared(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full.toml")
	writeFile(t, full, `[daemon]
users_file = "people.toml"
[policy]
ramp = "500ms"
[[interface]]
name = "eth9"
bandwidth = "1gbit"
default_tier = "basic"
[tiers.basic]
rate = "3mbit"
ceil = "6mbit"
[[tiers.basic.schedule]]
days = ["sat", "sun"]
from = "08:00"
to = "12:00"
ceil = "9mbit"
`)
	writeFile(t, filepath.Join(dir, "people.toml"), "[[user]]\nname = \"carol\"\ntier = \"basic\"\naddresses = [\"198.18.0.11\"]\n")
	want, err := Load(full)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := ExtractShared(full)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sh.Main), "eth9") || strings.Contains(string(sh.Main), "people") {
		t.Errorf("shared document holds local tables:\n%s", sh.Main)
	}
	local := filepath.Join(dir, "local.toml")
	writeFile(t, local, fleetIfaces)
	got, err := LoadShared(local, sh)
	if err != nil {
		t.Fatalf("%v\n%s", err, sh.Main)
	}
	if got.Policy.Ramp != want.Policy.Ramp || len(got.Tiers) != 1 || got.Tiers[0].Ceil != want.Tiers[0].Ceil ||
		len(got.Tiers[0].Schedules) != 1 || len(got.Users) != 1 || got.Users[0].Name != "carol" {
		t.Errorf("round trip: %+v %+v %+v", got.Policy, got.Tiers, got.Users)
	}
}

// TestLoadFleet: [fleet] alone is read from a file whose plan does not
// load (its default tier is the fleet's).
func TestLoadFleet(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "shaperd.toml")
	writeFile(t, p, fleetIfaces+"[fleet]\nendpoints = [\"http://127.0.0.1:2379\"]\nrouter = \"r9\"\n")
	if _, err := Load(p); err == nil {
		t.Fatal("Load accepted an interface whose default tier is missing")
	}
	f, err := LoadFleet(p)
	if err != nil || f == nil || f.Router != "r9" {
		t.Fatalf("LoadFleet = %+v, %v", f, err)
	}
	writeFile(t, p, fleetIfaces)
	if f, err := LoadFleet(p); err != nil || f != nil {
		t.Fatalf("without [fleet]: %+v, %v", f, err)
	}
}

// TestExtractSharedKeepsTheOperatorsLines: the shared document is the
// operator's file with the local tables blanked, so positions in it (a
// router's refusal) are the operator's lines, under the file's name; a
// file the blanking cannot keep faithfully is re-encoded instead.
func TestExtractSharedKeepsTheOperatorsLines(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "campus.toml")
	writeFile(t, full, `[daemon]
users_file = "people.toml"
[[interface]]
name = "eth9"
bandwidth = "1gbit"
default_tier = "gold"
[fleet]
endpoints = ["http://127.0.0.1:2379"]

[tiers.gold]
rate = "30mbit"
ceil = "60mbit"
  [ policy ]
ramp = "1s"
`)
	writeFile(t, filepath.Join(dir, "people.toml"), "[[user]]\nname = \"carol\"\ntier = \"gold\"\naddresses = [\"198.18.0.11\"]\n")
	sh, err := ExtractShared(full)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Name != "campus.toml" || sh.UsersName != "people.toml" {
		t.Errorf("names %q %q, want the files' base names", sh.Name, sh.UsersName)
	}
	if strings.Contains(string(sh.Main), "eth9") || strings.Contains(string(sh.Main), "127.0.0.1") || strings.Count(string(sh.Main), "\n") != 14 {
		t.Errorf("shared document holds local tables or lost lines:\n%s", sh.Main)
	}
	local := filepath.Join(dir, "local.toml")
	writeFile(t, local, strings.Replace(fleetIfaces, `"basic"`, `"gold"`, 1))
	plan, err := LoadShared(local, sh)
	if err != nil {
		t.Fatalf("%v\n%s", err, sh.Main)
	}
	if e := plan.Errorf("tiers.gold.ceil", "x"); e.File != "campus.toml" || e.Line != 12 {
		t.Errorf("Errorf(tiers.gold.ceil) = %v, want campus.toml line 12", e)
	}
	if plan.Policy.Ramp != time.Second {
		t.Errorf("policy.ramp %v, want 1s", plan.Policy.Ramp)
	}

	// A header-like line in a local multi-line string: re-encoded.
	writeFile(t, full, "[daemon]\nusers_file = \"people.toml\"\n[[interface]]\nname = \"eth9\"\nbandwidth = \"1gbit\"\ndescription = \"\"\"\n[tiers.fake]\n\"\"\"\n[tiers.gold]\nrate = \"30mbit\"\n")
	sh, err = ExtractShared(full)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sh.Main), "fake") || !strings.Contains(string(sh.Main), "30mbit") {
		t.Errorf("re-encoded shared document:\n%s", sh.Main)
	}
}
