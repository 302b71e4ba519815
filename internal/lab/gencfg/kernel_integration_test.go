package gencfg_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/gencfg"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// TestCheckedConfigsApply is the kernel half of "--check accepts exactly
// what the kernel accepts": generated configurations that pass the checks
// are applied, outcome after outcome (every schedule, over quota), to a
// real kernel in a fresh namespace, with the daemon's path (Build with
// kept class ids, Dump, Diff, Apply, Verify). The kernel must refuse
// nothing and the result must match.
func TestCheckedConfigsApply(t *testing.T) {
	netnslab.Require(t)
	rng := rand.New(rand.NewPCG(8, 16))
	const want = 40
	applied := 0
	for tries := 0; applied < want && tries < 5000; tries++ {
		c := gencfg.New(rng, gencfg.Options{Netns: true})
		plan := checked(c)
		if plan == nil {
			continue
		}
		applied++
		ns := netnslab.NewNS(t, "gen")
		for _, dev := range []string{"gen0", "gen1", "gen2"} {
			ns.MustRun("ip", "link", "add", dev, "type", "veth", "peer", "name", dev+"p")
			ns.MustRun("ip", "link", "set", dev, "up")
			ns.MustRun("ip", "link", "set", dev+"p", "up")
		}
		k, err := kernel.Open(kernel.Options{NetNS: ns.Name})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		ids := make([]*model.Assignment, len(plan.Interfaces))
		for i := range ids {
			ids[i] = model.NewAssignment()
		}
		outcome := 0
		policy.Outcomes(plan, func(r *policy.Result) {
			outcome++
			for i, tg := range r.Targets() {
				desired, err := model.Build(tg, ids[i])
				if err != nil {
					t.Fatalf("config %d outcome %d: Build: %v\n%s\n%s", applied, outcome, err, c.Main, c.Users)
				}
				if desired.Redirect != nil {
					if err := k.EnsureIFB(desired.Redirect.IFB); err != nil {
						t.Fatalf("EnsureIFB: %v", err)
					}
				}
				actual, err := k.Actual(desired)
				if err != nil {
					t.Fatalf("Actual %s: %v", desired.Device, err)
				}
				if _, err := k.Apply(model.Diff(actual, desired)); err != nil {
					t.Fatalf("config %d outcome %d: the kernel refused a checked configuration: %v\n--- shaperd.toml\n%s--- users.toml\n%s",
						applied, outcome, err, c.Main, c.Users)
				}
				mm, err := k.Verify(desired)
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if len(mm) > 0 {
					t.Fatalf("config %d outcome %d: %d mismatches after Apply:\n%s\n--- shaperd.toml\n%s--- users.toml\n%s", applied, outcome, len(mm), strings.Join(mm, "\n"), c.Main, c.Users)
				}
			}
		})
		k.Close()
		t.Logf("config %d: %d interfaces, %d users, %d outcomes applied", applied, len(plan.Interfaces), len(plan.Users), outcome)
	}
	if applied < want {
		t.Fatalf("only %d checked configurations generated, want %d", applied, want)
	}
}
