package policy

import (
	"encoding/json"
	"errors"
	"github.com/shaperd/shaperd/pkg/tbf"
	"testing"
	"time"
)

func TestParseTarget(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Target
	}{
		{"alice", Target{TargetUser, "alice"}},
		{"tier:gold", Target{TargetTier, "gold"}},
		{"iface:lan0", Target{TargetIface, "lan0"}},
	} {
		got, err := ParseTarget(c.in)
		if err != nil || got != c.want {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
		if got.String() != c.in {
			t.Errorf("%q: String %q", c.in, got.String())
		}
	}
	for _, bad := range []string{"", "tier:", "group:x", "iface:"} {
		if _, err := ParseTarget(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestOverrideValidate(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	neg := -time.Second
	for _, c := range []struct {
		name    string
		o       Override
		unknown bool
	}{
		{"low rate", Override{Target: Target{TargetUser, "alice"}, Rate: 7}, false},
		{"ceil below rate", Override{Target: Target{TargetUser, "alice"}, Rate: mbit(5), Ceil: mbit(4)}, false},
		{"iface ceil", Override{Target: Target{TargetIface, "lan0"}, Rate: mbit(5), Ceil: mbit(6)}, false},
		{"negative ramp", Override{Target: Target{TargetUser, "alice"}, Rate: mbit(5), Ramp: &neg}, false},
		{"bad kind", Override{Target: Target{"group", "x"}, Rate: mbit(5)}, false},
		{"no user", Override{Target: Target{TargetUser, "zed"}, Rate: mbit(5)}, true},
		{"no tier", Override{Target: Target{TargetTier, "zed"}, Rate: mbit(5)}, true},
		{"no iface", Override{Target: Target{TargetIface, "eth9"}, Rate: mbit(5)}, true},
	} {
		err := CheckOverride(p, c.o)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if errors.Is(err, ErrUnknownTarget) != c.unknown {
			t.Errorf("%s: %v, unknown target %v", c.name, err, c.unknown)
		}
	}
	for _, o := range []Override{
		{Target: Target{TargetUser, "alice"}, Rate: mbit(3)},
		{Target: Target{TargetTier, "gold"}, Rate: mbit(3), Ceil: mbit(9)},
		{Target: Target{TargetIface, "ifb-wan0"}, Rate: mbit(30)},
	} {
		if err := CheckOverride(p, o); err != nil {
			t.Errorf("%s: %v", o.Target, err)
		}
	}
}

// Overrides expire at Until (Evaluate ignores them from then on, without
// changing the set; Expire removes them), serialise to JSON and back, and
// Prune drops targets a new plan lacks.
func TestOverridesLifecycle(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, p.Policy.Location)
	zero := time.Duration(0)
	var ov Overrides
	mustSet(t, &ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(3), Set: now, Until: now.Add(time.Hour), Ramp: &zero})
	mustSet(t, &ov, Override{Target: Target{TargetTier, "silver"}, Rate: mbit(4), Ceil: mbit(8), Set: now})
	mustSet(t, &ov, Override{Target: Target{TargetIface, "wan0"}, Rate: mbit(40), Set: now})

	x := explain(t, Evaluate(p, ov, nil, now.Add(59*time.Minute)), 0, "alice")
	if x.Source != SourceUserOverride || x.Rate != mbit(3) || x.Ceil != mbit(3) || !x.OverrideUntil.Equal(now.Add(time.Hour)) {
		t.Errorf("active: %+v", x)
	}
	if x.Reason != "override until 11:00" {
		t.Errorf("reason %q", x.Reason)
	}
	if x.Ramp == nil || *x.Ramp != 0 {
		t.Errorf("ramp %v", x.Ramp)
	}
	x = explain(t, Evaluate(p, ov, nil, now.Add(time.Hour)), 0, "alice")
	if x.Source == SourceUserOverride || ov.Len() != 3 {
		t.Errorf("expired override still decides (%s) or Evaluate changed the set (%d)", x.Source, ov.Len())
	}
	data, err := json.Marshal(&ov)
	if err != nil {
		t.Fatal(err)
	}
	var back Overrides
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	a, b := ov.List(), back.List()
	if len(a) != len(b) {
		t.Fatalf("round trip: %d overrides, want %d (%s)", len(b), len(a), data)
	}
	for i := range a {
		ra, rb := a[i].Ramp, b[i].Ramp
		if a[i].Target != b[i].Target || a[i].Rate != b[i].Rate || a[i].Ceil != b[i].Ceil ||
			!a[i].Set.Equal(b[i].Set) || !a[i].Until.Equal(b[i].Until) || (ra == nil) != (rb == nil) || (ra != nil && *ra != *rb) {
			t.Errorf("round trip %d: %+v, want %+v", i, b[i], a[i])
		}
	}
	if gone := ov.Expire(now.Add(time.Hour)); len(gone) != 1 || gone[0].Target.Name != "alice" || ov.Len() != 2 {
		t.Errorf("Expire: %v, %d left", gone, ov.Len())
	}
	p2 := loadPlan(t, baseMain, `
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.1.10"]
`)
	p2.Tiers = p2.Tiers[:1] // a plan without silver (guest only)
	if gone := ov.Prune(p2); len(gone) != 1 || gone[0].Target.Name != "silver" {
		t.Errorf("Prune: %v", gone)
	}
	if !ov.Clear(Target{TargetIface, "wan0"}) || ov.Clear(Target{TargetIface, "wan0"}) || ov.Len() != 0 {
		t.Errorf("Clear: %d left", ov.Len())
	}
	for _, bad := range []string{`{"version":1,"overrides":[{"target":"a","rate":"1mbit"},{"target":"a","rate":"2mbit"}]}`,
		`{"version":1,"overrides":[{"target":"a","rate":"1bit"}]}`, `{"version":3}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// Precedence: user override > tier override > quota > user config >
// schedule > tier, checked by adding one rule at a time.
func TestOverridePrecedence(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	loc := p.Policy.Location
	peak := time.Date(2026, 12, 2, 19, 30, 0, 0, loc) // Wednesday peak
	var ov Overrides
	x := explain(t, Evaluate(p, ov, nil, peak), 0, "carol")
	// carol's own rate 70mbit beats the schedule's 50/60: ceil = max(70, 60).
	if x.Source != SourceUser || x.Rate != mbit(70) || x.Ceil != mbit(70) {
		t.Errorf("user config: %s/%s %s", x.Rate, x.Ceil, x.Source)
	}
	x = explain(t, Evaluate(p, ov, nil, peak), 0, "alice")
	if x.Source != SourceSchedule || x.Rate != mbit(50) || x.Ceil != mbit(60) {
		t.Errorf("schedule: %s/%s %s", x.Rate, x.Ceil, x.Source)
	}
	mustSet(t, &ov, Override{Target: Target{TargetTier, "gold"}, Rate: mbit(7), Ceil: mbit(9), Until: peak.Add(26 * time.Hour)})
	for _, name := range []string{"alice", "carol"} {
		x = explain(t, Evaluate(p, ov, nil, peak), 0, name)
		if x.Source != SourceTierOverride || x.Rate != mbit(7) || x.Ceil != mbit(9) {
			t.Errorf("%s tier override: %s/%s %s", name, x.Rate, x.Ceil, x.Source)
		}
		if x.Reason != "tier override (gold) until 2026-12-03 21:30" {
			t.Errorf("reason %q", x.Reason)
		}
	}
	mustSet(t, &ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(3)})
	x = explain(t, Evaluate(p, ov, nil, peak), 0, "alice")
	if x.Source != SourceUserOverride || x.Rate != mbit(3) || x.Ceil != mbit(3) || x.Reason != "override" {
		t.Errorf("user override: %s/%s %s %q", x.Rate, x.Ceil, x.Source, x.Reason)
	}
	// Ingress too, scaled by gold's upload/download ratio (10/50, 20/100).
	x = explain(t, Evaluate(p, ov, nil, peak), 1, "alice")
	if x.Source != SourceUserOverride || x.Rate != 600*tbf.Kbit || x.Ceil != 600*tbf.Kbit {
		t.Errorf("user override on ingress: %s/%s %s %q", x.Rate, x.Ceil, x.Source, x.Reason)
	}
	if x = explain(t, Evaluate(p, ov, nil, peak), 0, "carol"); x.Source != SourceTierOverride {
		t.Errorf("carol: %s", x.Source)
	}
}

// iface:NAME sets the interface's bandwidth (every direction of NAME, or one
// ingress entry by its IFB) and leaves the users alone while their
// guarantees fit (TestOversubscribed covers the rest); on a TBF interface
// it is the TBF rate.
func TestIfaceOverride(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, p.Policy.Location)
	var ov Overrides
	mustSet(t, &ov, Override{Target: Target{TargetIface, "ifb-wan0"}, Rate: mbit(50)})
	mustSet(t, &ov, Override{Target: Target{TargetIface, "wan1"}, Rate: mbit(200)})
	base := Evaluate(p, Overrides{}, nil, now)
	r := Evaluate(p, ov, nil, now)
	want := []struct {
		bw  uint64
		src Source
	}{{1000, SourceConfig}, {50, SourceIfaceOverride}, {200, SourceIfaceOverride}}
	for i, w := range want {
		ir := r.Interfaces[i]
		if ir.Targets.Interface.Bandwidth != mbit(w.bw) || ir.Link.Rate != mbit(w.bw) || ir.Link.Source != w.src {
			t.Errorf("%s: bandwidth %s (%s), want %dmbit (%s)", ir.Targets.Interface.Name, ir.Targets.Interface.Bandwidth, ir.Link.Source, w.bw, w.src)
		}
		for j, x := range ir.Users {
			if bx := base.Interfaces[i].Users[j]; x.Rate != bx.Rate || x.Ceil != bx.Ceil {
				t.Errorf("iface override changed user %s", x.User)
			}
		}
	}
	if b := r.Interfaces[2].Link.Burst; b != StepBurst(mbit(200), 0, mbit(200)) {
		t.Errorf("TBF burst %s", b)
	}
}

// A tier override of the default tier shapes unclassified traffic too;
// default_rate, when configured, is fixed.
func TestDefaultClass(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, p.Policy.Location)
	r := Evaluate(p, Overrides{}, nil, now)
	d := r.Interfaces[0].Default
	if d == nil || d.Source != SourceTier || d.Rate != mbit(1) || d.Ceil != mbit(5) || d.Tier != "guest" {
		t.Fatalf("default: %+v", d)
	}
	spec := r.Interfaces[0].Targets.Interface
	if spec.DefaultRate != mbit(1) || spec.DefaultCeil != mbit(5) {
		t.Errorf("spec default %s/%s", spec.DefaultRate, spec.DefaultCeil)
	}
	var ov Overrides
	mustSet(t, &ov, Override{Target: Target{TargetTier, "guest"}, Rate: mbit(2)})
	if d = Evaluate(p, ov, nil, now).Interfaces[0].Default; d.Source != SourceTierOverride || d.Ceil != mbit(2) {
		t.Errorf("tier override of the default tier: %+v", d)
	}
	p.Interfaces[0].DefaultRate, p.Interfaces[0].DefaultCeil = mbit(3), mbit(4)
	if d = Evaluate(p, ov, nil, now).Interfaces[0].Default; d.Source != SourceConfig || d.Rate != mbit(3) || d.Ceil != mbit(4) || d.Reason != "default_rate" {
		t.Errorf("default_rate: %+v", d)
	}
	if r.Interfaces[2].Default != nil {
		t.Error("TBF interface has a default class")
	}
}

// An override's ramp may be 0 to MaxRamp, its duration above 0 up to
// MaxOverrideFor; both bounds themselves are accepted.
func TestCheckDurations(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	for _, c := range []struct {
		ramp, dur *time.Duration
		ok        bool
	}{
		{nil, nil, true},
		{d(0), d(time.Second), true},
		{d(MaxRamp), d(MaxOverrideFor), true},
		{d(MaxRamp + time.Second), nil, false},
		{d(876000 * time.Hour), nil, false},
		{d(-time.Second), nil, false},
		{nil, d(MaxOverrideFor + time.Second), false},
		{nil, d(999999 * time.Hour), false},
		{nil, d(0), false},
	} {
		if err := CheckDurations(c.ramp, c.dur); (err == nil) != c.ok {
			t.Errorf("ramp %v for %v: %v, want ok %v", c.ramp, c.dur, err, c.ok)
		}
	}
}
