package gencfg_test

import (
	"math/rand/v2"
	"testing"
	"testing/fstest"
	"time"

	"github.com/shaperd/shaperd/internal/check/offline"
	"github.com/shaperd/shaperd/internal/lab/gencfg"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// checked loads c and runs the daemon's checks; it returns the plan when
// both pass, else nil.
func checked(c gencfg.Config) *config.Plan {
	fsys := fstest.MapFS{"shaperd.toml": {Data: []byte(c.Main)}, "users.toml": {Data: []byte(c.Users)}}
	plan, err := config.LoadFS(fsys, "shaperd.toml")
	if err != nil {
		return nil
	}
	if errs := offline.Plan(plan); len(errs) > 0 {
		return nil
	}
	return plan
}

// buildsEverywhere fails t unless every outcome of plan builds with fresh
// class ids and every HTB tree's filters fit the classifier, and unless
// every override rate that CheckOverrideBuild accepts builds too.
func buildsEverywhere(t *testing.T, c gencfg.Config, plan *config.Plan, rng *rand.Rand) {
	t.Helper()
	fail := func() {
		t.Helper()
		t.Fatalf("%s\n--- shaperd.toml\n%s--- users.toml\n%s", t.Name(), c.Main, c.Users)
	}
	policy.Outcomes(plan, func(r *policy.Result) {
		for _, tg := range r.Targets() {
			tree, err := model.Build(tg, nil)
			if err != nil {
				t.Errorf("Check passed but Build fails: %v", err)
				fail()
			}
			if p := kernel.CheckFilters(tree.Filters); len(p) > 0 {
				t.Errorf("Check passed but the classifier refuses: %v", p[0].Err)
				fail()
			}
		}
	})
	// A set-rate of a random user, tier or interface: accepted means built.
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rates := []tbf.Rate{8 * tbf.Bit, 1900 * tbf.Bit, tbf.Kbit, tbf.Mbit, tbf.Gbit, 700 * tbf.Gbit}
	for k := 0; k < 3; k++ {
		var target policy.Target
		switch rng.IntN(3) {
		case 0:
			if len(plan.Users) == 0 {
				continue
			}
			target = policy.Target{Kind: policy.TargetUser, Name: plan.Users[rng.IntN(len(plan.Users))].Name}
		case 1:
			if len(plan.Tiers) == 0 {
				continue
			}
			target = policy.Target{Kind: policy.TargetTier, Name: plan.Tiers[rng.IntN(len(plan.Tiers))].Name}
		default:
			target = policy.Target{Kind: policy.TargetIface, Name: plan.Interfaces[rng.IntN(len(plan.Interfaces))].Name}
		}
		o := policy.Override{Target: target, Rate: rates[rng.IntN(len(rates))], Set: now}
		if policy.CheckOverrideBuild(plan, policy.Overrides{}, o, now) != nil {
			continue
		}
		var ov policy.Overrides
		if err := ov.Set(o); err != nil {
			t.Fatal(err)
		}
		for _, tg := range policy.Evaluate(plan, ov, nil, now).Targets() {
			if _, err := model.Build(tg, nil); err != nil {
				t.Errorf("override %s %s accepted but Build fails: %v", target, o.Rate, err)
				fail()
			}
		}
	}
}

// TestCheckedConfigsBuild is the offline half of "--check accepts exactly
// what the kernel accepts": 2,000 generated configurations; every one that
// passes config.Load and offline.Plan builds at every policy outcome,
// its filters fit the classifier, and accepted overrides build.
func TestCheckedConfigsBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 2026))
	passed := 0
	const n = 2000
	for i := 0; i < n; i++ {
		c := gencfg.New(rng, gencfg.Options{})
		if plan := checked(c); plan != nil {
			passed++
			buildsEverywhere(t, c, plan, rng)
		}
	}
	// The generator must exercise both sides of the checks.
	if passed < n/20 || passed > n*19/20 {
		t.Fatalf("%d of %d generated configurations passed the checks; want between 5%% and 95%%", passed, n)
	}
	t.Logf("%d of %d passed the checks and built", passed, n)
}

// FuzzCheckedConfigBuilds: for any configuration text, passing the checks
// implies building at every outcome (config -> Build -> classifier
// layout). Seeds: testdata/fuzz/FuzzCheckedConfigBuilds and generated
// configurations.
func FuzzCheckedConfigBuilds(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 20; i++ {
		c := gencfg.New(rng, gencfg.Options{})
		f.Add(c.Main, c.Users)
	}
	f.Fuzz(func(t *testing.T, main, users string) {
		c := gencfg.Config{Main: main, Users: users}
		if plan := checked(c); plan != nil {
			buildsEverywhere(t, c, plan, rand.New(rand.NewPCG(2, 2)))
		}
	})
}
