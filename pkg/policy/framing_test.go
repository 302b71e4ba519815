package policy

import (
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// The interface's overhead, mpu and link layer reach every class of the
// built tree.
func TestEvaluateFraming(t *testing.T) {
	p := loadPlan(t, `
[[interface]]
name = "lan0"
bandwidth = "100mbit"
overhead = 34
mpu = 64
linklayer = "atm"

[tiers.gold]
rate = "10mbit"
`, `
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.1.10"]
`)
	r := Evaluate(p, Overrides{}, nil, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	want := psched.Framing{Overhead: 34, MPU: 64, ATM: true}
	if got := r.Interfaces[0].Targets.Interface.Framing; got != want {
		t.Fatalf("targets framing %+v, want %+v", got, want)
	}
	tree, err := model.Build(r.Interfaces[0].Targets, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tree.Classes {
		if c.Framing != want {
			t.Errorf("class %s framing %+v, want %+v", c.Handle, c.Framing, want)
		}
	}
	if tree.Root.SizeOverhead != 0 {
		t.Errorf("a positive overhead made a size table: %d", tree.Root.SizeOverhead)
	}

	// A negative overhead goes to the root's size table; the classes keep
	// the mpu and link layer.
	p.Interfaces[0].Framing.Overhead = -4
	r = Evaluate(p, Overrides{}, nil, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	if tree, err = model.Build(r.Interfaces[0].Targets, nil); err != nil {
		t.Fatal(err)
	}
	if tree.Root.SizeOverhead != -4 {
		t.Errorf("size table overhead %d, want -4", tree.Root.SizeOverhead)
	}
	for _, c := range tree.Classes {
		if c.Framing != (psched.Framing{MPU: 64, ATM: true}) {
			t.Errorf("class %s framing %+v with a negative overhead", c.Handle, c.Framing)
		}
	}
}
