package model_test

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

func TestBuildHTBWithoutTiers(t *testing.T) {
	tg := model.Targets{
		Interface: egressSpec(),
		Users: []model.UserTarget{
			{Name: "bob", Tier: "gold", Prefixes: []netip.Prefix{pfx(t, "2001:db8::20/128"), pfx(t, "198.18.1.20/32")}, Rate: 20 * tbf.Mbit},
			{Name: "alice", Tier: "gold", Prefixes: []netip.Prefix{pfx(t, "198.18.1.10/32")}, Rate: 10 * tbf.Mbit, Ceil: 50 * tbf.Mbit},
		},
	}
	tree := mustBuild(t, tg, nil)
	if tree.Device != "lan0" || tree.Redirect != nil {
		t.Fatalf("device %q redirect %v, want lan0 and none", tree.Device, tree.Redirect)
	}
	if r := tree.Root; r == nil || r.Kind != model.ShaperHTB || r.Handle != model.RootQdisc || r.DefaultMinor != 2 || r.TBF != nil {
		t.Fatalf("root qdisc %+v, want htb 1: default 2", tree.Root)
	}
	handles := []model.Handle{}
	for _, c := range tree.Classes {
		handles = append(handles, c.Handle)
	}
	// A fresh assignment follows sorted names: alice 1:100, bob 1:101.
	want := []model.Handle{model.RootClass, model.DefaultClass, model.MakeHandle(1, 0x100), model.MakeHandle(1, 0x101)}
	if !slices.Equal(handles, want) {
		t.Fatalf("classes %v, want %v", handles, want)
	}
	root := findClass(t, tree, model.RootClass)
	if root.Parent != model.RootQdisc || root.Rate != tbf.Gbit || root.Ceil != tbf.Gbit || root.Labels.Kind != "root" || root.Leaf != nil {
		t.Errorf("root class %+v", root)
	}
	def := findClass(t, tree, model.DefaultClass)
	if def.Parent != model.RootClass || def.Rate != 10*tbf.Mbit || def.Ceil != tbf.Gbit || def.Labels.Kind != "default" {
		t.Errorf("default class %+v, want rate 10mbit (1%% of 1gbit) ceil 1gbit under 1:1", def)
	}
	alice := classOfUser(t, tree, "alice")
	if alice.Handle != model.MakeHandle(1, 0x100) || alice.Parent != model.RootClass {
		t.Errorf("alice at %s under %s, want 1:100 under 1:1 (gold has no aggregate)", alice.Handle, alice.Parent)
	}
	// 10mbit: burst max(1.25e6 B/s * 5ms, 15140) = 15140 B = 189250 ticks; quantum 1.25e6/10.
	if alice.Burst != 15140 || alice.Buffer != 189250 || alice.Quantum != 125000 {
		t.Errorf("alice burst %d buffer %d quantum %d, want 15140, 189250, 125000", alice.Burst, alice.Buffer, alice.Quantum)
	}
	if alice.Ceil != 50*tbf.Mbit || alice.CBurst != tbf.RecommendedBurst(50*tbf.Mbit) {
		t.Errorf("alice ceil %s cburst %d", alice.Ceil, alice.CBurst)
	}
	if cb, _ := tbf.BufferTicks(50*tbf.Mbit, alice.CBurst); alice.CBuffer != cb {
		t.Errorf("alice cbuffer %d, want %d", alice.CBuffer, cb)
	}
	if alice.Labels != (model.Labels{Kind: "user", Tier: "gold", User: "alice"}) {
		t.Errorf("alice labels %+v", alice.Labels)
	}
	bob := classOfUser(t, tree, "bob")
	if bob.Ceil != bob.Rate {
		t.Errorf("bob ceil %s, want his rate %s (ceil 0 means rate)", bob.Ceil, bob.Rate)
	}
	// Filters: sorted, IPv4 before IPv6, each pointing to its user's class.
	var got []string
	for _, f := range tree.Filters {
		if f.Match != model.MatchDst {
			t.Errorf("filter %s match %s, want dst", f.Prefix, f.Match)
		}
		got = append(got, f.Prefix.String()+"->"+f.ClassID.String()+"/"+f.Labels.User)
	}
	wantF := []string{"198.18.1.10/32->1:100/alice", "198.18.1.20/32->1:101/bob", "2001:db8::20/128->1:101/bob"}
	if !slices.Equal(got, wantF) {
		t.Errorf("filters %v, want %v", got, wantF)
	}
}

func TestBuildHTBWithTierAggregates(t *testing.T) {
	tg := model.Targets{
		Interface: egressSpec(),
		Tiers:     []model.TierTarget{{Name: "gold", Rate: 300 * tbf.Mbit, Ceil: 500 * tbf.Mbit, Burst: 1 << 20}},
		Users: []model.UserTarget{
			{Name: "alice", Tier: "gold", Prefixes: []netip.Prefix{pfx(t, "198.18.1.10/32")}, Rate: 10 * tbf.Mbit},
			{Name: "carol", Tier: "silver", Prefixes: []netip.Prefix{pfx(t, "198.18.1.30/32")}, Rate: 5 * tbf.Mbit},
		},
	}
	tree := mustBuild(t, tg, nil)
	gold := findClass(t, tree, model.MakeHandle(1, model.FirstTierMinor))
	if gold.Parent != model.RootClass || gold.Labels != (model.Labels{Kind: "tier", Tier: "gold"}) || gold.Leaf != nil {
		t.Errorf("gold class %+v", gold)
	}
	if gold.Burst != 1<<20 || gold.CBurst != 1<<20 || gold.Rate != 300*tbf.Mbit || gold.Ceil != 500*tbf.Mbit {
		t.Errorf("gold rate %s ceil %s burst %d cburst %d", gold.Rate, gold.Ceil, gold.Burst, gold.CBurst)
	}
	if gold.Quantum != psched.HTBQuantumMax {
		t.Errorf("gold quantum %d, want the clamp %d", gold.Quantum, psched.HTBQuantumMax)
	}
	if a := classOfUser(t, tree, "alice"); a.Parent != gold.Handle {
		t.Errorf("alice under %s, want gold's %s", a.Parent, gold.Handle)
	}
	if c := classOfUser(t, tree, "carol"); c.Parent != model.RootClass {
		t.Errorf("carol (tier without aggregate) under %s, want 1:1", c.Parent)
	}
	if len(tree.Classes) != 5 {
		t.Errorf("%d classes, want root, default, gold, alice, carol", len(tree.Classes))
	}
}

func TestBuildIngressLeafPrioBursts(t *testing.T) {
	spec := egressSpec()
	spec.Direction, spec.IFB, spec.Match = model.Ingress, "ifb-lan0", ""
	spec.Leaf = &model.LeafQdisc{Kind: "fq_codel"}
	spec.DefaultRate, spec.DefaultCeil = 2*tbf.Mbit, 100*tbf.Mbit
	tg := model.Targets{Interface: spec, Users: []model.UserTarget{{
		Name: "alice", Prefixes: []netip.Prefix{pfx(t, "198.18.2.5/28"), pfx(t, "2001:db8:1::/48")},
		Rate: 10 * tbf.Mbit, Ceil: 20 * tbf.Mbit, Burst: 64 << 10, CBurst: 128 << 10, Prio: 3,
	}}}
	tree := mustBuild(t, tg, nil)
	if tree.Device != "ifb-lan0" || tree.Redirect == nil || *tree.Redirect != (model.Redirect{Interface: "lan0", IFB: "ifb-lan0"}) {
		t.Fatalf("device %q redirect %+v, want ifb-lan0 with a redirect from lan0", tree.Device, tree.Redirect)
	}
	a := classOfUser(t, tree, "alice")
	if a.Burst != 64<<10 || a.CBurst != 128<<10 || a.Prio != 3 {
		t.Errorf("alice burst %d cburst %d prio %d", a.Burst, a.CBurst, a.Prio)
	}
	if want, _ := tbf.BufferTicks(10*tbf.Mbit, 64<<10); a.Buffer != want {
		t.Errorf("alice buffer %d, want %d", a.Buffer, want)
	}
	if a.Leaf == nil || a.Leaf.Kind != "fq_codel" {
		t.Errorf("alice leaf %+v, want fq_codel", a.Leaf)
	}
	def := findClass(t, tree, model.DefaultClass)
	if def.Rate != 2*tbf.Mbit || def.Ceil != 100*tbf.Mbit || def.Leaf == nil || def.Leaf.Kind != "fq_codel" {
		t.Errorf("default class %+v", def)
	}
	if findClass(t, tree, model.RootClass).Leaf != nil {
		t.Error("root class has a leaf qdisc")
	}
	if len(tree.Filters) != 2 || tree.Filters[0].Prefix != pfx(t, "198.18.2.0/28") || tree.Filters[1].Prefix != pfx(t, "2001:db8:1::/48") {
		t.Fatalf("filters %+v, want the masked 198.18.2.0/28 then 2001:db8:1::/48", tree.Filters)
	}
	for _, f := range tree.Filters {
		if f.Match != model.MatchSrc {
			t.Errorf("ingress filter %s matches %s, want src by default", f.Prefix, f.Match)
		}
	}
	// A pfifo leaf without a limit is the kernel's default: nil.
	tg.Interface.Leaf = &model.LeafQdisc{Kind: "pfifo"}
	if l := classOfUser(t, mustBuild(t, tg, nil), "alice").Leaf; l != nil {
		t.Errorf("pfifo without limit gave leaf %+v, want nil", l)
	}
}

func TestBuildTBF(t *testing.T) {
	spec := model.InterfaceSpec{Name: "wan0", Shaper: model.ShaperTBF, Bandwidth: 100 * tbf.Mbit}
	tg := model.Targets{Interface: spec, Users: manyUsers(3)}
	ids := model.NewAssignment()
	tree := mustBuild(t, tg, ids)
	if tree.Root == nil || tree.Root.Kind != model.ShaperTBF || tree.Root.TBF == nil {
		t.Fatalf("root %+v, want tbf", tree.Root)
	}
	// 100mbit = 12.5e6 B/s: burst 5 ms = 62500 B; limit 50 ms * rate + burst.
	want := model.TBFParams{Rate: 100 * tbf.Mbit, Burst: 62500, Limit: 625000 + 62500}
	if *tree.Root.TBF != want {
		t.Errorf("tbf %+v, want %+v", *tree.Root.TBF, want)
	}
	if len(tree.Classes) != 0 || len(tree.Filters) != 0 || len(ids.Users()) != 0 {
		t.Errorf("tbf tree has %d classes, %d filters, %d assigned users; users are ignored", len(tree.Classes), len(tree.Filters), len(ids.Users()))
	}
	spec.Burst, spec.Latency, spec.PeakRate = 32<<10, 10*time.Millisecond, 200*tbf.Mbit
	tree = mustBuild(t, model.Targets{Interface: spec}, nil)
	want = model.TBFParams{Rate: 100 * tbf.Mbit, Burst: 32 << 10, Limit: 125000 + 32<<10, PeakRate: 200 * tbf.Mbit, MTU: model.MaxFrame}
	if *tree.Root.TBF != want {
		t.Errorf("tbf %+v, want %+v", *tree.Root.TBF, want)
	}
	// A slow link still gets a burst of at least ten frames.
	spec = model.InterfaceSpec{Name: "wan0", Shaper: model.ShaperTBF, Bandwidth: 64 * tbf.Kbit}
	if b := mustBuild(t, model.Targets{Interface: spec}, nil).Root.TBF.Burst; b != tbf.RecommendedBurstMin {
		t.Errorf("64kbit tbf burst %d, want %d", b, tbf.RecommendedBurstMin)
	}
}

func TestBuildErrors(t *testing.T) {
	user := func(mod func(*model.UserTarget)) model.Targets {
		u := model.UserTarget{Name: "alice", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.1.10/32")}, Rate: 10 * tbf.Mbit}
		mod(&u)
		return model.Targets{Interface: egressSpec(), Users: []model.UserTarget{u}}
	}
	spec := func(mod func(*model.InterfaceSpec)) model.Targets {
		s := egressSpec()
		mod(&s)
		return model.Targets{Interface: s}
	}
	tests := []struct {
		name string
		tg   model.Targets
		want []string // substrings of the error
	}{
		{"ceil below rate", user(func(u *model.UserTarget) { u.Ceil = 5 * tbf.Mbit }), []string{"lan0", "user alice", "ceil 5mbit is below rate 10mbit"}},
		{"zero byte rate", user(func(u *model.UserTarget) { u.Rate = 7 }), []string{"user alice", "0 bytes/s"}},
		{"invalid prefix", user(func(u *model.UserTarget) { u.Prefixes = []netip.Prefix{{}} }), []string{"user alice", "invalid prefix"}},
		{"prio", user(func(u *model.UserTarget) { u.Prio = 8 }), []string{"user alice", "prio 8"}},
		{"buffer overflow", user(func(u *model.UserTarget) { u.Rate, u.Burst = 8, 1<<30 }), []string{"user alice", "burst 1gb", "32-bit tick"}},
		{"unnamed user", user(func(u *model.UserTarget) { u.Name = "" }), []string{"user without a name"}},
		{"bandwidth", spec(func(s *model.InterfaceSpec) { s.Bandwidth = 0 }), []string{"lan0", "bandwidth"}},
		{"ingress without ifb", spec(func(s *model.InterfaceSpec) { s.Direction = model.Ingress }), []string{"lan0", "IFB"}},
		{"shaper", spec(func(s *model.InterfaceSpec) { s.Shaper = "cake" }), []string{"lan0", `"cake"`}},
		{"match", spec(func(s *model.InterfaceSpec) { s.Match = "both" }), []string{"lan0", `"both"`}},
		{"default ceil", spec(func(s *model.InterfaceSpec) { s.DefaultRate, s.DefaultCeil = 5*tbf.Mbit, tbf.Mbit }), []string{"default class", "ceil 1mbit"}},
		{"leaf kind", spec(func(s *model.InterfaceSpec) { s.Leaf = &model.LeafQdisc{} }), []string{"leaf qdisc without a kind"}},
		{"tbf burst", spec(func(s *model.InterfaceSpec) { s.Shaper, s.Burst = model.ShaperTBF, 1000 }), []string{"lan0", "burst 1000b", "1514b"}},
		{"tbf peak", spec(func(s *model.InterfaceSpec) { s.Shaper, s.PeakRate = model.ShaperTBF, tbf.Gbit }), []string{"peak rate 1gbit must be above"}},
		{"tbf bucket too long", spec(func(s *model.InterfaceSpec) { s.Shaper, s.Bandwidth, s.Burst = model.ShaperTBF, tbf.Mbit, 1<<20 }), []string{"4.29s"}},
		{"tbf limit", spec(func(s *model.InterfaceSpec) { s.Shaper, s.Latency = model.ShaperTBF, time.Minute }), []string{"limit", "32-bit"}},
		{"tier ceil", model.Targets{Interface: egressSpec(), Tiers: []model.TierTarget{{Name: "gold", Rate: 2 * tbf.Mbit, Ceil: tbf.Mbit}}}, []string{"tier gold", "ceil 1mbit"}},
		{"duplicate tier", model.Targets{Interface: egressSpec(), Tiers: []model.TierTarget{{Name: "gold", Rate: tbf.Mbit}, {Name: "gold", Rate: tbf.Mbit}}}, []string{"tier gold", "twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := model.Build(tt.tg, model.NewAssignment())
			if err == nil {
				t.Fatalf("Build succeeded, want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestBuildDuplicatesNameBothUsers(t *testing.T) {
	us := manyUsers(2)
	us[1].Prefixes = append(us[1].Prefixes, us[0].Prefixes[0])
	_, err := model.Build(model.Targets{Interface: egressSpec(), Users: us}, nil)
	if err == nil || !strings.Contains(err.Error(), "user u00001") || !strings.Contains(err.Error(), "user u00000") {
		t.Fatalf("error %v, want one naming u00001 and u00000", err)
	}
	us = manyUsers(2)
	us[1].Name = us[0].Name
	if _, err := model.Build(model.Targets{Interface: egressSpec(), Users: us}, nil); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate user: error %v", err)
	}
}

func TestBuildErrorLeavesAssignment(t *testing.T) {
	ids := model.NewAssignment()
	mustBuild(t, model.Targets{Interface: egressSpec(), Users: manyUsers(5)}, ids)
	before := ids.Users()
	us := manyUsers(7)[2:]
	us[3].Ceil = 1 // invalid
	if _, err := model.Build(model.Targets{Interface: egressSpec(), Users: us}, ids); err == nil {
		t.Fatal("Build with an invalid user succeeded")
	}
	if !maps.Equal(before, ids.Users()) {
		t.Errorf("assignment changed by a failed Build: %v -> %v", before, ids.Users())
	}
}

func TestBuildTooManyUsers(t *testing.T) {
	us := manyUsers(model.MaxUsers + 1)
	_, err := model.Build(model.Targets{Interface: egressSpec(), Users: us}, nil)
	if !errors.Is(err, model.ErrTooManyUsers) || !strings.Contains(err.Error(), "65279") {
		t.Fatalf("error %v, want ErrTooManyUsers stating the limit 65279", err)
	}
	tiers := make([]model.TierTarget, model.MaxTiers+1)
	for i := range tiers {
		tiers[i] = model.TierTarget{Name: fmt.Sprintf("t%03d", i), Rate: tbf.Mbit}
	}
	_, err = model.Build(model.Targets{Interface: egressSpec(), Tiers: tiers}, nil)
	if !errors.Is(err, model.ErrTooManyTiers) {
		t.Fatalf("error %v, want ErrTooManyTiers", err)
	}
}

func TestBuildStableAcrossRebuilds(t *testing.T) {
	ids := model.NewAssignment()
	us := manyUsers(20)
	first := mustBuild(t, model.Targets{Interface: egressSpec(), Users: us}, ids)
	// Reverse the order, drop two users and add one: the others keep their classes.
	rev := slices.Clone(us)
	slices.Reverse(rev)
	rev = append(rev[:3], rev[5:]...)
	rev = append(rev, model.UserTarget{Name: "zed", Prefixes: []netip.Prefix{pfx(t, "198.18.9.9/32")}, Rate: tbf.Mbit})
	second := mustBuild(t, model.Targets{Interface: egressSpec(), Users: rev}, ids)
	for _, u := range rev[:len(rev)-1] {
		if a, b := classOfUser(t, first, u.Name).Handle, classOfUser(t, second, u.Name).Handle; a != b {
			t.Errorf("user %s moved from %s to %s", u.Name, a, b)
		}
	}
	for _, c := range first.Classes {
		if c.Labels.Kind == "user" && classOfUser(t, second, "zed").Handle == c.Handle {
			t.Errorf("new user zed got %s, which %s had a moment ago", c.Handle, c.Labels.User)
		}
	}
}

// A bfifo with a latency and no limit is sized per class to ceil*latency,
// at least two frames; a queue that holds fewer than four of the largest
// aggregates gets the segmenting TBF in front of it (up to a ceil of
// SegmentRate/8; above, at least two aggregates); a user's own leaf
// replaces the interface's; other leaves are shared as given.
func TestBuildLeafSizing(t *testing.T) {
	ms50 := 50 * time.Millisecond
	users := []model.UserTarget{
		{Name: "a", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.10/32")}, Rate: 5 * tbf.Mbit},
		{Name: "b", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.11/32")}, Rate: 1 * tbf.Mbit, Ceil: 20 * tbf.Mbit},
		{Name: "c", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.12/32")}, Rate: 100 * tbf.Kbit},
		{Name: "d", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.13/32")}, Rate: 5 * tbf.Mbit,
			Leaf: &model.LeafQdisc{Kind: model.LeafFQCodel, Target: 5 * time.Millisecond}},
		{Name: "e", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.14/32")}, Rate: 2 * tbf.Gbit,
			Leaf: &model.LeafQdisc{Kind: model.LeafBfifo, Latency: 200 * time.Microsecond}},
		{Name: "f", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.15/32")}, Rate: 8 * tbf.Mbit,
			Leaf: &model.LeafQdisc{Kind: model.LeafBfifo, Limit: 45420}},
		{Name: "g", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.16/32")}, Rate: 100 * tbf.Mbit},
	}
	for _, tc := range []struct {
		name             string
		frame, aggregate tbf.Size
		want             map[string]*model.LeafQdisc
		defaultLimit     uint32
		defaultKind      string
	}{
		{"defaults", 0, 0, map[string]*model.LeafQdisc{
			"a": {Kind: model.LeafTBF, Limit: 31250, Segment: 1536, Latency: ms50},  // 625000 B/s * 50ms < 4 * 64 KiB
			"b": {Kind: model.LeafTBF, Limit: 125000, Segment: 1536, Latency: ms50}, // at the ceil
			"c": {Kind: model.LeafTBF, Limit: 2 * 1522, Segment: 1536, Latency: ms50},
			"d": {Kind: model.LeafFQCodel, Target: 5 * time.Millisecond},
			"e": {Kind: model.LeafBfifo, Limit: 2 * 65536, Latency: 200 * time.Microsecond}, // 50000 B, above SegmentRate/8: two aggregates
			"f": {Kind: model.LeafTBF, Limit: 45420, Segment: 1536},                         // the configured limit, fed frames
			"g": {Kind: model.LeafBfifo, Limit: 625000, Latency: ms50},                      // holds 9 aggregates
		}, 625000, model.LeafBfifo},
		{"big TCP and jumbo frames", 9000 + 22, 256 << 10, map[string]*model.LeafQdisc{
			"a": {Kind: model.LeafTBF, Limit: 31250, Segment: 9024, Latency: ms50},
			"c": {Kind: model.LeafTBF, Limit: 2 * 9022, Segment: 9024, Latency: ms50},
			"e": {Kind: model.LeafBfifo, Limit: 2 * 256 << 10, Latency: 200 * time.Microsecond},
			"g": {Kind: model.LeafTBF, Limit: 625000, Segment: 9024, Latency: ms50}, // fewer than four 256 KiB aggregates
		}, 625000, model.LeafTBF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := model.Targets{
				Interface: model.InterfaceSpec{Name: "lan0", Bandwidth: 4 * tbf.Gbit, DefaultCeil: 100 * tbf.Mbit,
					Frame: tc.frame, Aggregate: tc.aggregate,
					Leaf: &model.LeafQdisc{Kind: model.LeafBfifo, Latency: ms50}},
				Users: users,
			}
			tree, err := model.Build(tg, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tree.Classes {
				if w, ok := tc.want[c.Labels.User]; ok {
					if c.Leaf == nil || *c.Leaf != *w {
						t.Errorf("user %s: leaf %+v, want %+v", c.Labels.User, c.Leaf, w)
					}
				}
				if c.Labels.Kind == "default" && (c.Leaf == nil || c.Leaf.Limit != tc.defaultLimit || c.Leaf.Kind != tc.defaultKind) {
					t.Errorf("default class leaf %+v, want %s limit %d", c.Leaf, tc.defaultKind, tc.defaultLimit)
				}
			}
		})
	}
}

func TestLeafEqualParameters(t *testing.T) {
	fq := &model.LeafQdisc{Kind: model.LeafFQCodel, Limit: 1000, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond}
	dumped := &model.LeafQdisc{Kind: model.LeafFQCodel, Limit: 1000, Target: 4999 * time.Microsecond, Interval: 99999 * time.Microsecond, Flows: 1024, Quantum: 1514}
	if !model.LeafEqual(fq, dumped) {
		t.Error("fq_codel with the kernel's rounding and defaults is not equal")
	}
	for _, other := range []*model.LeafQdisc{
		{Kind: model.LeafFQCodel, Limit: 2000},
		{Kind: model.LeafFQCodel, Target: 10 * time.Millisecond},
		{Kind: model.LeafFQCodel, Flows: 64},
		{Kind: model.LeafSFQ, Limit: 1000},
	} {
		if model.LeafEqual(dumped, other) {
			t.Errorf("%+v equals %+v", other, dumped)
		}
	}
	if model.LeafEqual(&model.LeafQdisc{Kind: model.LeafCake, Diffserv: "besteffort"}, &model.LeafQdisc{Kind: model.LeafCake, Diffserv: "diffserv4"}) {
		t.Error("cake modes compare equal")
	}
}

// A latency-sized queue (bfifo or the segmenting tbf) is resized at every
// change of its limit, however small, so that it always holds its
// latency at the class's current ceil; the segmenting tbf's max_size
// matches within one 64-byte tick.
func TestLeafEqualResizesEveryChange(t *testing.T) {
	sized := func(kind string, limit uint32) *model.LeafQdisc {
		return &model.LeafQdisc{Kind: kind, Limit: limit, Latency: 50 * time.Millisecond, Segment: map[string]tbf.Size{model.LeafTBF: 1536}[kind]}
	}
	for _, kind := range []string{model.LeafBfifo, model.LeafTBF} {
		dumped := sized(kind, 31250)
		dumped.Latency = 0
		if !model.LeafEqual(dumped, sized(kind, 31250)) {
			t.Errorf("%s: the same limit does not match", kind)
		}
		if model.LeafEqual(dumped, sized(kind, 31251)) || model.LeafEqual(dumped, sized(kind, 30000)) {
			t.Errorf("%s: a different limit matched", kind)
		}
	}
	a, b := sized(model.LeafTBF, 1000), sized(model.LeafTBF, 1000)
	b.Segment = 1536 + 63
	if !model.LeafEqual(a, b) {
		t.Error("segment within one tick does not match")
	}
	b.Segment = 1536 + 64
	if model.LeafEqual(a, b) {
		t.Error("segment a tick apart matched")
	}
}

// TestBuildNodes: node classes hang from their parents (or the root
// class), users from their node (not their tier's aggregate), and node
// minors come from the users' range without being users.
func TestBuildNodes(t *testing.T) {
	tg := model.Targets{Interface: egressSpec(),
		Tiers: []model.TierTarget{{Name: "gold", Rate: 100 * tbf.Mbit, Ceil: 100 * tbf.Mbit}},
		Nodes: []model.NodeTarget{
			{Name: "north", Rate: 500 * tbf.Mbit, Ceil: 500 * tbf.Mbit},
			{Name: "ap-1", Parent: "north", Rate: 100 * tbf.Mbit, Ceil: 300 * tbf.Mbit},
		},
		Users: []model.UserTarget{
			{Name: "alice", Tier: "gold", Node: "ap-1", Rate: 10 * tbf.Mbit, Prefixes: []netip.Prefix{pfx(t, "198.18.0.1/32")}},
			{Name: "bob", Tier: "gold", Rate: 10 * tbf.Mbit, Prefixes: []netip.Prefix{pfx(t, "198.18.0.2/32")}},
		}}
	ids := model.NewAssignment()
	tree := mustBuild(t, tg, ids)
	north, _ := ids.Node("north")
	ap, _ := ids.Node("ap-1")
	nh, ah := model.MakeHandle(1, north), model.MakeHandle(1, ap)
	if c := findClass(t, tree, nh); c.Parent != model.RootClass || c.Labels.Kind != "node" || c.Ceil != 500*tbf.Mbit {
		t.Errorf("north: %+v", c)
	}
	if c := findClass(t, tree, ah); c.Parent != nh || c.Rate != 100*tbf.Mbit || c.Ceil != 300*tbf.Mbit {
		t.Errorf("ap-1: %+v", c)
	}
	if c := classOfUser(t, tree, "alice"); c.Parent != ah || c.Labels.Node != "ap-1" {
		t.Errorf("alice hangs from %s, want ap-1 %s", c.Parent, ah)
	}
	gold := model.MakeHandle(1, model.FirstTierMinor)
	if c := classOfUser(t, tree, "bob"); c.Parent != gold {
		t.Errorf("bob hangs from %s, want gold's aggregate %s", c.Parent, gold)
	}
	if _, ok := ids.UserByMinor(north); ok || len(ids.Users()) != 2 || len(ids.Nodes()) != 2 {
		t.Errorf("nodes counted as users: %v / %v", ids.Users(), ids.Nodes())
	}
	if n, ok := ids.NodeByMinor(ap); !ok || n != "ap-1" {
		t.Errorf("NodeByMinor(%x) = %q, %v", ap, n, ok)
	}

	bad := tg
	bad.Nodes = []model.NodeTarget{{Name: "ap-1", Parent: "north", Rate: tbf.Mbit}, {Name: "north", Rate: tbf.Mbit}}
	if _, err := model.Build(bad, nil); err == nil || !strings.Contains(err.Error(), "parent north is not listed before it") {
		t.Errorf("a child before its parent: %v", err)
	}
	deep := tg
	deep.Nodes, deep.Users = nil, nil
	for i := 0; i <= model.MaxNodeDepth; i++ {
		n := model.NodeTarget{Name: fmt.Sprint("n", i), Rate: tbf.Mbit}
		if i > 0 {
			n.Parent = fmt.Sprint("n", i-1)
		}
		deep.Nodes = append(deep.Nodes, n)
	}
	if _, err := model.Build(deep, nil); err == nil || !strings.Contains(err.Error(), "levels deep") {
		t.Errorf("%d levels: %v", model.MaxNodeDepth+1, err)
	}
	// Per-queue trees: a whole subtree on one queue (north fits one of
	// two queues: its ceil is not above 1gbit/2).
	mq := tg
	mq.Interface.Queues = 2
	mq.Nodes = append(slices.Clone(tg.Nodes), model.NodeTarget{Name: "south", Rate: 400 * tbf.Mbit, Ceil: 400 * tbf.Mbit})
	mq.Users = append(slices.Clone(tg.Users), model.UserTarget{Name: "carol", Tier: "gold", Node: "south", Rate: 10 * tbf.Mbit,
		Prefixes: []netip.Prefix{pfx(t, "198.18.0.3/32")}})
	mids := model.NewAssignment()
	mtree := mustBuild(t, mq, mids)
	qn, _ := mids.Queue("alice")
	qs, _ := mids.Queue("carol")
	if qn == qs {
		t.Errorf("north and south (500 and 400mbit) share queue %d of 2", qn)
	}
	var apClass, aliceClass model.Class
	for _, c := range mtree.Classes {
		switch {
		case c.Labels.Kind == "node" && c.Labels.Node == "ap-1":
			apClass = c
		case c.Labels.User == "alice":
			aliceClass = c
		}
	}
	if model.QueueOf(apClass.Handle) != qn || aliceClass.Parent != apClass.Handle {
		t.Errorf("ap-1 %s in queue %d, alice %s under %s (queue %d)", apClass.Handle, model.QueueOf(apClass.Handle), aliceClass.Handle, aliceClass.Parent, qn)
	}
}
