package check

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/pkg/config"
)

// The configurations of the daemon's tests (internal/daemon), for checks
// of the same files.

const testConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
reconcile_interval = "5s"

[policy]
interval = "1s"
ramp = "0s"
timezone = "UTC"

[[interface]]
name = "lan0"
bandwidth = "1gbit"
default_tier = "bronze"

[[interface]]
name = "lan0"
direction = "ingress"
ifb = "ifb-lan0"
bandwidth = "100mbit"
default_tier = "bronze"

[tiers.bronze]
rate = "5mbit"
ceil = "20mbit"

[tiers.gold]
rate = "50mbit"
ceil = "100mbit"
`

const testUsers = `
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.1.10", "2001:db8:1::10"]

[[user]]
name = "bob"
tier = "bronze"
addresses = ["198.18.1.20"]
`

// fleetTestConfig is testConfig with a [fleet] whose etcd is unreachable
// (nothing listens on port 1).
const fleetTestConfig = testConfig + `
[fleet]
endpoints = ["http://127.0.0.1:1"]
router = "r1"
dial_timeout = "100ms"
`

// sharedPlan is a shared plan where gold is 30mbit and alice and bob are
// users.
func sharedPlan(rev int64, goldRate string) *fleet.Plan {
	return &fleet.Plan{Revision: rev, Shared: config.Shared{
		Main: []byte("[policy]\nramp = \"0s\"\ntimezone = \"UTC\"\n[tiers.bronze]\nrate = \"5mbit\"\nceil = \"20mbit\"\n" +
			"[tiers.gold]\nrate = \"" + goldRate + "\"\nceil = \"100mbit\"\n"),
		Users: []byte(testUsers)}}
}

// capsConfig is testConfig with a 50mbit upload side: gold's ceil
// (100mbit, uploads too) is above it and capped there, not on the 1gbit
// download side.
var capsConfig = strings.Replace(testConfig, "direction = \"ingress\"\nifb = \"ifb-lan0\"\nbandwidth = \"100mbit\"",
	"direction = \"ingress\"\nifb = \"ifb-lan0\"\nbandwidth = \"50mbit\"", 1)

// writeConfig writes shaperd.toml and users.toml into dir and returns the
// main file's path.
func writeConfig(t testing.TB, dir, cfg, users string) string {
	t.Helper()
	p := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(cfg, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
