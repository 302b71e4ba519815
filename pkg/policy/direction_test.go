package policy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// A tier override without a direction gives downloads the rates as set and
// uploads the same rates scaled by the tier's upload/download ratio; with a
// direction it changes that direction only, and a directed override beats
// the target's both-directions one in its direction.
func TestOverrideDirections(t *testing.T) {
	p := loadPlan(t, baseMain, baseUsers)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, p.Policy.Location) // off-peak Wednesday
	var ov Overrides
	mustSet(t, &ov, Override{Target: Target{TargetTier, "gold"}, Rate: mbit(30), Ceil: mbit(40)})
	r := Evaluate(p, ov, nil, now)
	if x := explain(t, r, 0, "alice"); x.Rate != mbit(30) || x.Ceil != mbit(40) {
		t.Errorf("download: %s/%s, want 30mbit/40mbit", x.Rate, x.Ceil)
	}
	// gold is 50/100 down, 10/20 up: 30*10/50 = 6, 40*20/100 = 8.
	if x := explain(t, r, 1, "alice"); x.Rate != mbit(6) || x.Ceil != mbit(8) || x.Source != SourceTierOverride {
		t.Errorf("upload: %s/%s %s, want 6mbit/8mbit", x.Rate, x.Ceil, x.Source)
	}

	// Download only: uploads keep the plan (10/20).
	var down Overrides
	mustSet(t, &down, Override{Target: Target{TargetTier, "gold"}, Direction: DirDownload, Rate: mbit(30), Ceil: mbit(40)})
	r = Evaluate(p, down, nil, now)
	if x := explain(t, r, 0, "alice"); x.Rate != mbit(30) || x.Ceil != mbit(40) || x.Reason != "tier override (gold) download" {
		t.Errorf("download only, download: %s/%s %q", x.Rate, x.Ceil, x.Reason)
	}
	if x := explain(t, r, 1, "alice"); x.Rate != mbit(10) || x.Ceil != mbit(20) || x.Source != SourceTier {
		t.Errorf("download only, upload: %s/%s %s, want the tier's 10mbit/20mbit", x.Rate, x.Ceil, x.Source)
	}

	// Upload only for alice on top of the tier's both-directions override.
	mustSet(t, &ov, Override{Target: Target{TargetUser, "alice"}, Direction: DirUpload, Rate: mbit(2)})
	r = Evaluate(p, ov, nil, now)
	if x := explain(t, r, 0, "alice"); x.Rate != mbit(30) || x.Source != SourceTierOverride {
		t.Errorf("alice download: %s %s, want the tier override's 30mbit", x.Rate, x.Source)
	}
	if x := explain(t, r, 1, "alice"); x.Rate != mbit(2) || x.Ceil != mbit(2) || x.Source != SourceUserOverride {
		t.Errorf("alice upload: %s/%s %s, want 2mbit", x.Rate, x.Ceil, x.Source)
	}
	// A both-directions override replaces the directed ones of its target.
	mustSet(t, &ov, Override{Target: Target{TargetUser, "alice"}, Rate: mbit(5)})
	if l := ov.List(); len(l) != 2 || l[1].Direction != DirBoth || l[1].Target.Name != "alice" {
		t.Errorf("after a both-directions set: %+v", l)
	}
	// ClearDirection removes only what was set for that direction.
	mustSet(t, &ov, Override{Target: Target{TargetUser, "alice"}, Direction: DirDownload, Rate: mbit(4)})
	if gone := ov.ClearDirection(Target{TargetUser, "alice"}, DirUpload); len(gone) != 0 {
		t.Errorf("clear upload removed %v", gone)
	}
	if gone := ov.ClearDirection(Target{TargetUser, "alice"}, DirDownload); len(gone) != 1 || gone[0].Rate != mbit(4) {
		t.Errorf("clear download removed %v", gone)
	}
	if !ov.Clear(Target{TargetUser, "alice"}) || ov.Clear(Target{TargetUser, "alice"}) {
		t.Errorf("Clear of alice's remaining override")
	}
}

// iface:NAME/upload sets the ingress side of an interface shaped both ways,
// and only that; a direction the interface does not have is an unknown
// target.
func TestIfaceDirectedOverride(t *testing.T) {
	p := loadPlan(t, baseMain+`
[[interface]]
name = "lan0"
direction = "ingress"
bandwidth = "200mbit"
default_tier = "guest"
`, baseUsers)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, p.Policy.Location)
	o := Override{Target: Target{TargetIface, "lan0"}, Direction: DirUpload, Rate: mbit(80)}
	if err := CheckOverride(p, o); err != nil {
		t.Fatalf("CheckOverride: %v", err)
	}
	var ov Overrides
	mustSet(t, &ov, o)
	r := Evaluate(p, ov, nil, now)
	for _, ir := range r.Interfaces {
		if ir.Targets.Interface.Name != "lan0" {
			continue
		}
		want := mbit(1000)
		if ir.Targets.Interface.Direction == "ingress" {
			want = mbit(80)
		}
		if ir.Targets.Interface.Bandwidth != want {
			t.Errorf("lan0 %s: bandwidth %s, want %s", ir.Targets.Interface.Direction, ir.Targets.Interface.Bandwidth, want)
		}
	}
	bad := Override{Target: Target{TargetIface, "wan1"}, Direction: DirUpload, Rate: mbit(80)} // TBF egress only
	if err := CheckOverride(p, bad); err == nil {
		t.Errorf("iface:wan1/upload accepted on an egress-only interface")
	}
	for in, want := range map[string]Direction{"iface:lan0/upload": DirUpload, "iface:lan0/download": DirDownload, "iface:lan0": DirBoth, "alice": DirBoth} {
		if _, d, err := ParseDirectedTarget(in); err != nil || d != want {
			t.Errorf("ParseDirectedTarget(%q) = %v, %v; want %v", in, d, err, want)
		}
	}
	if _, _, err := ParseDirectedTarget("iface:lan0/sideways"); err == nil {
		t.Errorf("iface:lan0/sideways accepted")
	}
}

// A state file written before overrides had a direction (no "direction"
// key) loads as overrides for both directions; directed ones round-trip
// with their direction and who set them.
func TestOverridesJSONDirections(t *testing.T) {
	old := `{"version":1,"overrides":[{"target":"tier:gold","rate":"30mbit","ceil":"40mbit","set":"2026-12-02T10:00:00Z"}]}`
	var ov Overrides
	if err := json.Unmarshal([]byte(old), &ov); err != nil {
		t.Fatalf("old file: %v", err)
	}
	if o, ok := ov.Get(Target{TargetTier, "gold"}, time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)); !ok || o.Direction != DirBoth {
		t.Fatalf("old override: %+v %v", o, ok)
	}
	uid := uint32(1000)
	mustSet(t, &ov, Override{Target: Target{TargetTier, "gold"}, Direction: DirUpload, Rate: mbit(3), SetBy: &uid})
	b, err := json.Marshal(&ov)
	if err != nil {
		t.Fatal(err)
	}
	var back Overrides
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("round trip of %s: %v", b, err)
	}
	l := back.List()
	if len(l) != 2 || l[1].Direction != DirUpload || l[1].SetBy == nil || *l[1].SetBy != 1000 {
		t.Errorf("round trip: %+v", l)
	}
	o, ok := back.For(Target{TargetTier, "gold"}, config.Ingress, time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC))
	if !ok || o.Rate != mbit(3) {
		t.Errorf("For(ingress) = %+v", o)
	}
}
