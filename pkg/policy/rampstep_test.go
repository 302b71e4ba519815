package policy

import (
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
)

// StepActive moves only the ramping classes, the same way Step does, and
// the active set empties when the ramp ends.
func TestStepActiveMatchesStep(t *testing.T) {
	f := newRampFixture(t, baseMain)
	g := newRampFixture(t, baseMain) // steps with Step only, for comparison
	if f.r.Active() {
		t.Fatal("active before any change")
	}
	key := RampKey{"lan0", model.Egress, ClassUser, "alice"}
	for _, x := range []*rampFixture{f, g} {
		// 60mbit: uploads on wan0 (100mbit) stay within the bandwidth, so
		// no other user's guarantee is scaled (TestOversubscribed).
		mustSet(t, &x.ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(60), Ceil: mbit(100)})
		x.tick() // the ramp starts
	}
	if !f.r.Active() {
		t.Fatal("not active after a change with a 4s ramp")
	}
	for i := 1; i <= 5; i++ {
		f.now = f.now.Add(f.p.Policy.Interval)
		got := f.r.StepActive(f.now)
		want := userTarget(t, g.tick(), 0, "alice")
		a, _ := f.r.Applied(key)
		if a.Rate != want.Rate || a.Ceil != want.Ceil || a.Burst != want.Burst || a.CBurst != want.CBurst {
			t.Errorf("step %d: StepActive gave %+v, Step %+v", i, a, want)
		}
		for _, s := range got {
			if s.Key.Name != "alice" || s.Key.Kind != ClassUser {
				t.Errorf("step %d: StepActive moved %+v, only alice ramps", i, s.Key)
			}
		}
		if i <= 4 && len(got) == 0 {
			t.Errorf("step %d: nothing moved during the ramp", i)
		}
		if f.r.Active() != (i < 4) {
			t.Errorf("step %d: Active %v", i, f.r.Active())
		}
	}
}

// NextChange is the next local minute, or an earlier override expiry.
func TestNextChange(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	loc := p.Policy.Location
	now := time.Date(2026, 12, 2, 10, 0, 30, 500, loc)
	var ov Overrides
	if got, want := NextChange(p, &ov, now), time.Date(2026, 12, 2, 10, 1, 0, 0, loc); !got.Equal(want) {
		t.Errorf("NextChange = %v, want %v", got, want)
	}
	until := now.Add(10 * time.Second)
	mustSet(t, &ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(9), Until: until})
	mustSet(t, &ov, Override{Target: Target{TargetUser, "bob"}, Rate: mbit(9), Until: now.Add(-time.Second)})
	if got := NextChange(p, &ov, now); !got.Equal(until) {
		t.Errorf("NextChange with an override until %v = %v", until, got)
	}
	at := time.Date(2026, 12, 2, 10, 59, 59, 0, loc)
	if got := NextChange(p, nil, at); !got.After(at) || got.Sub(at) != time.Second {
		t.Errorf("NextChange(%v) = %v, want a second later", at, got)
	}
}

// UpdateUser gives a user what a full Evaluate gives, leaving the others.
func TestUpdateUserMatchesEvaluate(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, p.Policy.Location)
	var ov Overrides
	res := Evaluate(p, ov, nil, now)
	mustSet(t, &ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(7), Ceil: mbit(9)})
	if !res.UpdateUser(p, ov, nil, now, "alice") {
		t.Fatal("UpdateUser found no alice")
	}
	if res.UpdateUser(p, ov, nil, now, "nobody") {
		t.Error("UpdateUser found an unknown user")
	}
	want := Evaluate(p, ov, nil, now)
	for i := range want.Interfaces {
		w, g := want.Interfaces[i], res.Interfaces[i]
		if len(w.Targets.Users) != len(g.Targets.Users) {
			t.Fatalf("interface %d: %d users, want %d", i, len(g.Targets.Users), len(w.Targets.Users))
		}
		for j := range w.Targets.Users {
			if a, b := g.Targets.Users[j], w.Targets.Users[j]; a.Name != b.Name || a.Rate != b.Rate || a.Ceil != b.Ceil || a.Burst != b.Burst {
				t.Errorf("interface %d user %s: %+v, want %+v", i, b.Name, a, b)
			}
			if g.Users[j].Source != w.Users[j].Source || g.Users[j].Rate != w.Users[j].Rate {
				t.Errorf("interface %d user %s: explanation %+v, want %+v", i, w.Users[j].User, g.Users[j], w.Users[j])
			}
		}
	}
}
