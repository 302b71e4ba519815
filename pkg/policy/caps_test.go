package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestCheckCapsCeilings: a ceil above an HTB interface's bandwidth is not
// an error but a note at the key that sets it, naming the configured and
// the capped value; a guaranteed rate above it is a note too (it is
// scaled with the others). Each plan then passes Check.
func TestCheckCapsCeilings(t *testing.T) {
	htb := func(tier string) string {
		return "[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n\n[tiers.t]\n" + tier + "\n"
	}
	tests := []struct {
		name, main, users string
		key, msg          string
	}{
		{"tier ceil", htb("rate = \"1mbit\"\nceil = \"2gbit\""), checkUsers, "tiers.t.ceil",
			"ceil 2gbit is above the bandwidth 1gbit of interface lan0 (egress): capped to 1gbit"},
		{"tier rate", htb(`rate = "2gbit"`), checkUsers, "tiers.t.rate",
			"rate 2gbit is above the bandwidth 1gbit of interface lan0 (egress): guaranteed rates are scaled to fit it"},
		{"user rate", htb(`rate = "1mbit"`), checkUsers + "rate = \"3gbit\"\n", "user[0].rate", "rate 3gbit is above"},
		{"user ceil", htb(`rate = "1mbit"`), checkUsers + "ceil = \"3gbit\"\n", "user[0].ceil", "ceil 3gbit is above the bandwidth 1gbit of interface lan0 (egress): capped to 1gbit"},
		{"upload ceil", "[[interface]]\nname = \"lan0\"\ndirection = \"ingress\"\nbandwidth = \"10mbit\"\n[tiers.t]\nrate = \"1mbit\"\nceil = \"20mbit\"\n",
			checkUsers, "tiers.t.ceil", "ceil 20mbit is above the bandwidth 10mbit of interface lan0 (ingress): capped to 10mbit"},
		{"schedule ceil", htb("rate = \"1mbit\"\n[[tiers.t.schedule]]\ndays = [\"all\"]\nfrom = \"00:00\"\nto = \"01:00\"\nceil = \"5gbit\""),
			checkUsers, "tiers.t.schedule[0].ceil", "ceil 5gbit is above the bandwidth 1gbit of interface lan0 (egress): capped to 1gbit"},
		{"default_ceil", "[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\ndefault_rate = \"1mbit\"\ndefault_ceil = \"2gbit\"\n[tiers.t]\nrate = \"1mbit\"\n",
			checkUsers, "interface[0].default_ceil", "default class: ceil 2gbit is above the bandwidth 1gbit of interface lan0 (egress): capped to 1gbit"},
		{"default tier ceil", "[[interface]]\nname = \"lan0\"\nbandwidth = \"50mbit\"\ndefault_tier = \"guest\"\n[tiers.t]\nrate = \"1mbit\"\n[tiers.guest]\nrate = \"1mbit\"\nceil = \"100mbit\"\n",
			checkUsers, "tiers.guest.ceil", "default class (default_tier guest): ceil 100mbit is above the bandwidth 50mbit of interface lan0 (egress): capped to 50mbit"},
		{"aggregate rate", htb("rate = \"1mbit\"\naggregate_rate = \"2gbit\""), checkUsers, "tiers.t.aggregate_rate", "aggregate rate 2gbit is above the bandwidth 1gbit"},
		{"aggregate ceil", htb("rate = \"1mbit\"\naggregate_rate = \"10mbit\"\naggregate_ceil = \"2gbit\""), checkUsers, "tiers.t.aggregate_ceil",
			"aggregate ceil 2gbit is above the bandwidth 1gbit of interface lan0 (egress): capped to 1gbit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := loadPlan(t, tt.main, tt.users)
			errs, notes := CheckWithNotes(plan)
			if len(errs) != 0 {
				t.Fatalf("Check refused the plan: %v", errs)
			}
			for _, n := range notes {
				if n.Key == tt.key && strings.Contains(n.Msg, tt.msg) {
					if n.Line == 0 {
						t.Errorf("%v: no position", n)
					}
					return
				}
			}
			t.Errorf("want a note at %s containing %q; got %v", tt.key, tt.msg, notes)
		})
	}
}

// A plan that fits every interface has no notes.
func TestCheckNoNotesWhenItFits(t *testing.T) {
	plan := loadPlan(t, baseMain, baseUsers)
	errs, notes := CheckWithNotes(plan)
	if errs != nil || notes != nil {
		t.Fatalf("errors %v, notes %v; want none", errs, notes)
	}
}

// sharedTiers is one set of tiers on a 1gbit uplink and a 50mbit
// building link: gold's ceil (100mbit), its aggregate's ceil and the
// guest default class's ceil are above the small link.
const sharedTiers = `
[policy]
timezone = "UTC"

[[interface]]
name = "wan0"
bandwidth = "1gbit"
default_tier = "guest"

[[interface]]
name = "r0"
bandwidth = "50mbit"
default_tier = "guest"

[tiers.gold]
rate = "20mbit"
ceil = "100mbit"
aggregate_rate = "40mbit"
aggregate_ceil = "200mbit"

[tiers.guest]
rate = "1mbit"
ceil = "100mbit"
`

const sharedUsers = `
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.1.1"]

[[user]]
name = "bob"
tier = "gold"
addresses = ["198.18.1.2"]

[[user]]
name = "carol"
tier = "guest"
addresses = ["198.18.1.3"]
ceil = "30mbit"
`

// TestCapsBuild: the same tiers build on both links; on the small one
// every ceil above its bandwidth is the bandwidth in the built tree, and
// the explanation keeps the configured ceil; the big one is untouched.
func TestCapsBuild(t *testing.T) {
	plan := loadPlan(t, sharedTiers, sharedUsers)
	if errs := Check(plan); errs != nil {
		t.Fatalf("Check: %v", errs)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	res := Evaluate(plan, Overrides{}, nil, now)
	for i, want := range []struct {
		iface string
		bw    tbf.Rate
	}{{"wan0", tbf.Gbit}, {"r0", mbit(50)}} {
		ir := &res.Interfaces[i]
		tree, err := model.Build(ir.Targets, nil)
		if err != nil {
			t.Fatalf("%s: Build: %v", want.iface, err)
		}
		for _, c := range tree.Classes {
			if c.Ceil > want.bw {
				t.Errorf("%s: class %s (%s %s%s) ceil %s above the bandwidth %s", want.iface, c.Handle, c.Labels.Kind, c.Labels.Tier, c.Labels.User, c.Ceil, want.bw)
			}
			if c.Rate > c.Ceil {
				t.Errorf("%s: class %s rate %s above its ceil %s", want.iface, c.Handle, c.Rate, c.Ceil)
			}
			wantCeil := map[string]tbf.Rate{"default": min(mbit(100), want.bw), "tier": min(mbit(200), want.bw)}[c.Labels.Kind]
			switch c.Labels.User {
			case "alice", "bob":
				wantCeil = min(mbit(100), want.bw)
			case "carol":
				wantCeil = mbit(30) // below both
			}
			if wantCeil != 0 && c.Ceil != wantCeil {
				t.Errorf("%s: %s %s%s ceil %s, want %s", want.iface, c.Labels.Kind, c.Labels.Tier, c.Labels.User, c.Ceil, wantCeil)
			}
		}
		capped := want.bw < mbit(100)
		x := explain(t, res, i, "alice")
		if x.CeilCapped != capped || x.Uncapped() != mbit(100) || x.ConfiguredCeil != mbit(100) || x.Ceil != min(mbit(100), want.bw) {
			t.Errorf("%s: alice %+v; want ceil %s from 100mbit, capped %v", want.iface, x, min(mbit(100), want.bw), capped)
		}
		if capped != strings.Contains(x.Reason, "ceil 100mbit capped to the bandwidth 50mbit") {
			t.Errorf("%s: alice's reason %q", want.iface, x.Reason)
		}
		if c := explain(t, res, i, "carol"); c.CeilCapped {
			t.Errorf("%s: carol (30mbit) capped: %+v", want.iface, c)
		}
		if d := ir.Default; d.CeilCapped != capped || d.Uncapped() != mbit(100) {
			t.Errorf("%s: default class %+v; capped %v from 100mbit", want.iface, d, capped)
		}
		caps := ir.Caps()
		if !capped {
			if len(caps) != 0 {
				t.Errorf("%s: caps %v; want none", want.iface, caps)
			}
			continue
		}
		got := make([]string, len(caps))
		for k, c := range caps {
			got[k] = c.String()
		}
		wantCaps := []string{
			"default class (default_tier guest): ceil 100mbit capped to the bandwidth 50mbit",
			"tier gold aggregate: ceil 200mbit capped to the bandwidth 50mbit",
			"tier gold: ceil 100mbit capped to the bandwidth 50mbit (2 users)",
		}
		if strings.Join(got, "\n") != strings.Join(wantCaps, "\n") {
			t.Errorf("%s: caps\n%s\nwant\n%s", want.iface, strings.Join(got, "\n"), strings.Join(wantCaps, "\n"))
		}
	}
	if n := res.CapNotes(); len(n) != 3 || !strings.HasPrefix(n[0], "interface r0 (egress): ") {
		t.Errorf("CapNotes %q", n)
	}
}

// TestCapScalesARateAboveTheBandwidth: a guaranteed rate above the
// bandwidth (a tier made for a bigger link) is scaled like any
// oversubscription, so the class builds with rate <= ceil = bandwidth.
func TestCapScalesARateAboveTheBandwidth(t *testing.T) {
	main := strings.Replace(sharedTiers, "rate = \"20mbit\"\nceil = \"100mbit\"\naggregate_rate = \"40mbit\"\naggregate_ceil = \"200mbit\"", "rate = \"80mbit\"\nceil = \"100mbit\"", 1)
	plan := loadPlan(t, main, sharedUsers)
	errs, notes := CheckWithNotes(plan)
	if errs != nil {
		t.Fatalf("Check: %v", errs)
	}
	if !strings.Contains(notesText(notes), "tiers.gold.rate: rate 80mbit is above the bandwidth 50mbit of interface r0 (egress): guaranteed rates are scaled to fit it") {
		t.Errorf("notes:\n%s", notesText(notes))
	}
	res := Evaluate(plan, Overrides{}, nil, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	ir := &res.Interfaces[1]
	if len(ir.Oversubscriptions) == 0 {
		t.Fatal("r0 is not oversubscribed")
	}
	tree, err := model.Build(ir.Targets, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var sum tbf.Rate
	for _, c := range tree.Classes {
		if c.Labels.Kind == "root" {
			continue
		}
		sum += c.Rate
		if c.Rate > c.Ceil || c.Ceil > mbit(50) {
			t.Errorf("%s %s: rate %s ceil %s", c.Labels.Kind, c.Labels.User, c.Rate, c.Ceil)
		}
	}
	if sum > mbit(50) {
		t.Errorf("guarantees add up to %s on 50mbit", sum)
	}
	x := explain(t, res, 1, "alice")
	if !x.Oversubscribed || x.Guaranteed != mbit(80) || !x.CeilCapped || x.Ceil != mbit(50) {
		t.Errorf("alice: %+v", x)
	}
}

// UpdateUser gives a user whose new ceil is above a link what Evaluate
// gives: capped there, not elsewhere.
func TestCapUpdateUser(t *testing.T) {
	plan := loadPlan(t, sharedTiers, sharedUsers)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	res := Evaluate(plan, Overrides{}, nil, now)
	var ov Overrides
	if err := ov.Set(Override{Target: Target{TargetUser, "alice"}, Rate: mbit(2), Ceil: mbit(300), Set: now}); err != nil {
		t.Fatal(err)
	}
	if !res.UpdateUser(plan, ov, nil, now, "alice") {
		t.Fatal("UpdateUser: false")
	}
	want := Evaluate(plan, ov, nil, now)
	for i, ceil := range []tbf.Rate{mbit(300), mbit(50)} {
		got, w := explain(t, res, i, "alice"), explain(t, want, i, "alice")
		if got.Ceil != ceil || got.Ceil != w.Ceil || got.CeilCapped != w.CeilCapped || got.Reason != w.Reason || got.CBurst != w.CBurst {
			t.Errorf("interface %d: UpdateUser %+v, Evaluate %+v; want ceil %s", i, got, w, ceil)
		}
		if g, w := res.Interfaces[i].Targets.Users[0], want.Interfaces[i].Targets.Users[0]; g.Ceil != w.Ceil || g.CBurst != w.CBurst {
			t.Errorf("interface %d: target %+v, Evaluate's %+v", i, g, w)
		}
	}
}

func notesText(notes []config.Error) string {
	var b strings.Builder
	for _, n := range notes {
		b.WriteString(n.Key + ": " + n.Msg + "\n")
	}
	return b.String()
}
