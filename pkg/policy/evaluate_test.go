package policy

import (
	"reflect"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// The Result's shape: interfaces in plan order, users in plan order on
// every HTB interface, egress with download and ingress with upload rates,
// aggregate tiers only where they have users, no users on TBF, and targets
// that model.Build accepts.
func TestEvaluateTargets(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, p.Policy.Location) // Wednesday morning: no schedule
	r := Evaluate(p, Overrides{}, nil, now)
	if len(r.Interfaces) != 3 || !r.At.Equal(now) {
		t.Fatalf("%d interfaces", len(r.Interfaces))
	}
	gold, _ := p.Tier("gold")
	for i, in := range p.Interfaces {
		ir := r.Interfaces[i]
		spec := ir.Targets.Interface
		if spec.Name != in.Name || string(spec.Direction) != string(in.Direction) || spec.IFB != in.IFB {
			t.Errorf("interface %d: %+v", i, spec)
		}
		if in.Shaper == "tbf" {
			if len(ir.Targets.Users) != 0 || len(ir.Users) != 0 || spec.Shaper != model.ShaperTBF {
				t.Errorf("TBF interface with users")
			}
		} else {
			if len(ir.Targets.Users) != len(p.Users) || len(ir.Users) != len(p.Users) {
				t.Fatalf("%s: %d users", in.Name, len(ir.Targets.Users))
			}
			for j, u := range ir.Targets.Users {
				if u.Name != p.Users[j].Name || ir.Users[j].User != u.Name || ir.Users[j].Rate != u.Rate || ir.Users[j].Ceil != u.Ceil {
					t.Errorf("%s user %d: %+v vs %+v", in.Name, j, u, ir.Users[j])
				}
			}
			// Only guest has an aggregate class, and guest has no users.
			if len(ir.Targets.Tiers) != 0 {
				t.Errorf("%s: tiers %+v", in.Name, ir.Targets.Tiers)
			}
		}
		if _, err := model.Build(r.Interfaces[i].Targets, nil); err != nil {
			t.Errorf("%s: Build: %v", in.Name, err)
		}
	}
	wr, wc := gold.Rates("egress")
	ur, uc := gold.Rates("ingress")
	if x := explain(t, r, 0, "alice"); x.Rate != wr || x.Ceil != wc || x.Source != SourceTier || x.Reason != "tier gold" {
		t.Errorf("egress alice: %+v", x)
	}
	if x := explain(t, r, 1, "alice"); x.Rate != ur || x.Ceil != uc || x.Direction != model.Ingress {
		t.Errorf("ingress alice: %+v", x)
	}
	if x := explain(t, r, 0, "alice"); x.Burst != tbf.RecommendedBurst(x.Rate) || x.CBurst != tbf.RecommendedBurst(x.Ceil) {
		t.Errorf("default bursts %s/%s", x.Burst, x.CBurst)
	}
	if got := r.User("alice"); len(got) != 2 || got[0].Interface != "lan0" || got[1].Interface != "wan0" {
		t.Errorf("User(alice): %+v", got)
	}
	if ts := r.Targets(); len(ts) != 3 || ts[1].Interface.Name != "wan0" {
		t.Errorf("Targets: %+v", ts)
	}
	// A guest user brings the aggregate class along, with upload aggregate
	// rates on ingress.
	p2 := loadPlan(t, baseMain, baseUsers+`
[[user]]
name = "gus"
tier = "guest"
addresses = ["198.18.1.40"]
`)
	r2 := Evaluate(p2, Overrides{}, nil, now)
	guest, _ := p2.Tier("guest")
	for i, d := range []model.Direction{model.Egress, model.Ingress} {
		ar, ac := guest.AggregateRates(p2.Interfaces[i].Direction)
		want := []model.TierTarget{{Name: "guest", Rate: ar, Ceil: ac}}
		if got := r2.Interfaces[i].Targets.Tiers; !reflect.DeepEqual(got, want) {
			t.Errorf("%s tiers %+v, want %+v", d, got, want)
		}
	}
}

// Evaluate is pure: the same inputs give the same result and the inputs
// are not changed.
func TestEvaluatePure(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	now := time.Date(2026, 12, 2, 19, 30, 0, 0, p.Policy.Location)
	var ov Overrides
	mustSet(t, &ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(3), Until: now.Add(-time.Second)})
	u := NewUsage(nil)
	u.Configure(p)
	before, _ := u.MarshalJSON()
	a := Evaluate(p, ov, u, now)
	b := Evaluate(p, ov, u, now)
	if !reflect.DeepEqual(a, b) {
		t.Error("two evaluations differ")
	}
	after, _ := u.MarshalJSON()
	if string(before) != string(after) || ov.Len() != 1 {
		t.Error("Evaluate changed its inputs")
	}
}

// A user's own rates: both set, only a rate (ceil: the larger of it and the
// tier's), only a ceil (the rate follows it down); upload values apply on
// ingress only.
func TestEvaluateUserConfig(t *testing.T) {
	p := loadPlan(t, baseMain, `
[[user]]
name = "both"
tier = "gold"
addresses = ["198.18.1.1"]
rate = "5mbit"
ceil = "7mbit"

[[user]]
name = "rateonly"
tier = "gold"
addresses = ["198.18.1.2"]
rate = "150mbit"

[[user]]
name = "ceilonly"
tier = "gold"
addresses = ["198.18.1.3"]
ceil = "30mbit"

[[user]]
name = "up"
tier = "gold"
addresses = ["198.18.1.4"]
upload_rate = "1mbit"
`)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, p.Policy.Location)
	r := Evaluate(p, Overrides{}, nil, now)
	for _, c := range []struct {
		user       string
		iface      int
		rate, ceil uint64
		src        Source
	}{
		{"both", 0, 5, 7, SourceUser},
		{"rateonly", 0, 150, 150, SourceUser},
		{"ceilonly", 0, 30, 30, SourceUser},
		{"both", 1, 10, 20, SourceTier}, // no upload values: the tier's upload rates
		{"up", 0, 50, 100, SourceTier},
		{"up", 1, 1, 20, SourceUser},
	} {
		x := explain(t, r, c.iface, c.user)
		if x.Rate != mbit(c.rate) || x.Ceil != mbit(c.ceil) || x.Source != c.src {
			t.Errorf("%s on %s: %s/%s (%s), want %dmbit/%dmbit (%s)", c.user, x.Interface, x.Rate, x.Ceil, x.Source, c.rate, c.ceil, c.src)
		}
		if c.src == SourceUser && (x.ConfiguredRate != x.Rate || x.ConfiguredCeil != x.Ceil || x.Reason != "user config") {
			t.Errorf("%s: configured %s/%s reason %q", c.user, x.ConfiguredRate, x.ConfiguredCeil, x.Reason)
		}
	}
}
