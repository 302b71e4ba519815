package policy

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// loadPlan loads a plan from TOML text for the main and users files.
func loadPlan(t *testing.T, main, users string) *config.Plan {
	t.Helper()
	fsys := fstest.MapFS{
		"shaperd.toml": {Data: []byte(main)},
		"users.toml":   {Data: []byte(users)},
	}
	p, err := config.LoadFS(fsys, "shaperd.toml")
	if err != nil {
		t.Fatalf("loading test plan: %v", err)
	}
	return p
}

// berlin loads Europe/Berlin or fails the test.
func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatalf("Europe/Berlin: %v", err)
	}
	return loc
}

// explain returns alice's (or name's) explanation on the interface index i.
func explain(t *testing.T, r *Result, i int, name string) Explanation {
	t.Helper()
	for _, e := range r.Interfaces[i].Users {
		if e.User == name {
			return e
		}
	}
	t.Fatalf("no user %q on interface %d", name, i)
	return Explanation{}
}

func mbit(n uint64) tbf.Rate { return tbf.Rate(n) * tbf.Mbit }

// basePlan: lan0 egress, wan0 ingress (HTB), gold with two schedules, silver
// with a daily quota, guest default tier with an aggregate class.
const baseMain = `
[policy]
interval = "1s"
ramp = "4s"
smooth_window = "1s"
timezone = "Europe/Berlin"

[[interface]]
name = "lan0"
direction = "egress"
bandwidth = "1gbit"
default_tier = "guest"

[[interface]]
name = "wan0"
direction = "ingress"
ifb = "ifb-wan0"
bandwidth = "100mbit"
default_tier = "guest"

[[interface]]
name = "wan1"
shaper = "tbf"
bandwidth = "1gbit"

[tiers.guest]
rate = "1mbit"
ceil = "5mbit"
aggregate_rate = "10mbit"
aggregate_ceil = "20mbit"

[tiers.gold]
rate = "50mbit"
ceil = "100mbit"
upload_rate = "10mbit"
upload_ceil = "20mbit"
[[tiers.gold.schedule]]
days = ["mon", "tue", "wed", "thu", "fri"]
from = "19:00"
to = "23:00"
ceil = "60mbit"
[[tiers.gold.schedule]]
days = ["weekend"]
from = "22:00"
to = "02:00"
ceil = "80mbit"
upload_ceil = "15mbit"
[[tiers.gold.schedule]]
days = ["all"]
from = "20:00"
to = "21:00"
ceil = "55mbit"

[tiers.silver]
rate = "20mbit"
ceil = "50mbit"
quota = "1gb"
quota_period = "day"
over_quota_rate = "2mbit"
over_quota_ceil = "5mbit"
`

const baseUsers = `
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.1.10"]

[[user]]
name = "bob"
tier = "silver"
addresses = ["198.18.1.20"]

[[user]]
name = "carol"
tier = "gold"
addresses = ["198.18.1.30"]
rate = "70mbit"
`
