package config

import (
	"testing"

	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

func TestFramingKeys(t *testing.T) {
	plan := mustLoad(t, `
[[interface]]
name = "wan0"
shaper = "tbf"
bandwidth = "50mbit"
overhead = 34

[[interface]]
name = "lan0"
bandwidth = "10mbit"
overhead = 44
mpu = 96
linklayer = "atm"

[[interface]]
name = "lan1"
bandwidth = "10mbit"
overhead = -4

[tiers.basic]
rate = "2mbit"
`, "")
	want := []psched.Framing{{Overhead: 34}, {Overhead: 44, MPU: 96, ATM: true}, {Overhead: -4}}
	for i, w := range want {
		if got := plan.Interfaces[i].Framing; got != w {
			t.Errorf("interface %d framing %+v, want %+v", i, got, w)
		}
	}
}
