package policy

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

const oversubMain = `
[policy]
timezone = "UTC"

[[interface]]
name = "lan0"
bandwidth = "100mbit"
default_rate = "1mbit"
default_tier = "guest"

[tiers.gold]
rate = "50mbit"
ceil = "100mbit"

[tiers.guest]
rate = "5mbit"
ceil = "10mbit"
aggregate_rate = "10mbit"
aggregate_ceil = "20mbit"
`

func oversubUsers(gold, guest int) string {
	var b strings.Builder
	for i := range gold {
		fmt.Fprintf(&b, "[[user]]\nname = \"g%d\"\ntier = \"gold\"\naddresses = [\"198.18.1.%d\"]\n", i, i+1)
	}
	for i := range guest {
		fmt.Fprintf(&b, "[[user]]\nname = \"x%d\"\ntier = \"guest\"\naddresses = [\"198.18.2.%d\"]\n", i, i+1)
	}
	return b.String()
}

// Guarantees that add up to more than their parent are scaled to fit it:
// the interface's bandwidth (default class, aggregates, users of tiers
// without one) and each tier aggregate (its users).
func TestOversubscribed(t *testing.T) {
	p := loadPlan(t, oversubMain, oversubUsers(3, 3))
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	r := Evaluate(p, Overrides{}, nil, now)
	ir := r.Interfaces[0]
	// Root: default 1 + guest aggregate 10 + 3 x gold 50 = 161 mbit on 100:
	// scale floor(100*256/161) = 159/256 (79/128 is below ScaleMin).
	// Guest: 3 x 5 = 15 mbit on its aggregate, itself scaled first to
	// 10mbit*159/256 = 6210937 bit/s: scale floor(6210937*512/15e6) =
	// 211/512 (105/256 is below ScaleMin).
	if len(ir.Oversubscriptions) != 2 {
		t.Fatalf("oversubscriptions %+v, want the interface and tier guest", ir.Oversubscriptions)
	}
	root, guest := ir.Oversubscriptions[0], ir.Oversubscriptions[1]
	if root.Tier != "" || root.Guaranteed != mbit(161) || root.Capacity != mbit(100) || root.Num != 159 || root.Shift != 8 {
		t.Errorf("root %+v, want 161mbit guaranteed on 100mbit, scale 159/2^8", root)
	}
	if guest.Num != 211 || guest.Shift != 9 {
		t.Errorf("guest scale %d/2^%d, want 211/2^9", guest.Num, guest.Shift)
	}
	aggRate := tbf.Rate(6210937)
	if guest.Tier != "guest" || guest.Guaranteed != mbit(15) || guest.Capacity != aggRate {
		t.Errorf("guest %+v, want 15mbit guaranteed on %v", guest, aggRate)
	}
	if got := ir.Targets.Tiers[0].Rate; got != aggRate {
		t.Errorf("guest aggregate rate %v, want %v", got, aggRate)
	}
	if got, want := ir.Targets.Interface.DefaultRate, tbf.Rate(621093); got != want { // 1e6*159/256
		t.Errorf("default class %v, want %v", got, want)
	}
	var rootSum, guestSum tbf.Rate = ir.Targets.Interface.DefaultRate + ir.Targets.Tiers[0].Rate, 0
	for j, u := range ir.Targets.Users {
		x := ir.Users[j]
		want := tbf.Rate(31054687) // 50e6*159/256
		if u.Tier == "guest" {
			want = tbf.Rate(2060546) // 5e6*211/512
			guestSum += u.Rate
		} else {
			rootSum += u.Rate
		}
		if u.Rate != want || x.Rate != want || !x.Oversubscribed || !strings.Contains(x.Reason, "oversubscribed x") {
			t.Errorf("%s: rate %v (%+v), want %v and the reason", u.Name, u.Rate, x, want)
		}
		if x.Guaranteed != x.ConfiguredRate || u.Ceil != x.ConfiguredCeil {
			t.Errorf("%s: guaranteed %v ceil %v, want the configured %v/%v kept", u.Name, x.Guaranteed, u.Ceil, x.ConfiguredRate, x.ConfiguredCeil)
		}
	}
	if rootSum > mbit(100) || guestSum > aggRate {
		t.Errorf("scaled sums %v (root) %v (guest) exceed their parents", rootSum, guestSum)
	}
	if notes := r.OversubscriptionNotes(); len(notes) != 2 || !strings.Contains(notes[0], "x1.61") {
		t.Errorf("notes %q", notes)
	}

	// Fitting guarantees are left alone.
	r = Evaluate(loadPlan(t, oversubMain, oversubUsers(1, 2)), Overrides{}, nil, now)
	if len(r.Interfaces[0].Oversubscriptions) != 0 || r.Interfaces[0].Users[0].Rate != mbit(50) {
		t.Errorf("1 gold + 2 guest users: %+v", r.Interfaces[0].Oversubscriptions)
	}
}

// A single user's change changes that user alone while every parent's
// quantized scale stays; when the change makes a parent oversubscribed
// (or fit again), or moves its scale, UpdateUser reports false and leaves
// r as it was: the caller evaluates everything.
func TestUpdateUserOversubscribed(t *testing.T) {
	p := loadPlan(t, oversubMain, oversubUsers(1, 0))
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var ov Overrides
	r := Evaluate(p, ov, nil, now)
	mustSet(t, &ov, Override{Target: Target{TargetUser, "g0"}, Rate: mbit(20)})
	if !r.UpdateUser(p, ov, nil, now, "g0") || r.Interfaces[0].Targets.Users[0].Rate != mbit(20) {
		t.Fatalf("fitting change: %+v", r.Interfaces[0].Targets.Users[0])
	}
	mustSet(t, &ov, Override{Target: Target{TargetUser, "g0"}, Rate: mbit(100)}) // 101 > 100 with the default class
	if r.UpdateUser(p, ov, nil, now, "g0") || r.Interfaces[0].Targets.Users[0].Rate != mbit(20) {
		t.Fatalf("oversubscribing change: UpdateUser true or r changed: %+v", r.Interfaces[0].Targets.Users[0])
	}

	// 40 gold users at 50mbit on 100mbit: scale floor(100*2^14/2001) = 818/2^14.
	p = loadPlan(t, oversubMain, oversubUsers(40, 0))
	ov = Overrides{}
	r = Evaluate(p, ov, nil, now)
	before := slices.Clone(r.Interfaces[0].Targets.Users)
	// g0 50 -> 51mbit: 2002mbit, scale still 818: g0 alone changes.
	mustSet(t, &ov, Override{Target: Target{TargetUser, "g0"}, Rate: mbit(51), Ceil: mbit(100)})
	if !r.UpdateUser(p, ov, nil, now, "g0") {
		t.Fatal("a change that keeps the scale: UpdateUser false")
	}
	full := Evaluate(p, ov, nil, now)
	if !reflect.DeepEqual(r.Interfaces[0].Targets, full.Interfaces[0].Targets) {
		t.Errorf("UpdateUser's targets differ from a full evaluation")
	}
	for j, u := range r.Interfaces[0].Targets.Users {
		if (u.Rate != before[j].Rate) != (u.Name == "g0") {
			t.Errorf("%s: %v -> %v; only g0 may change", u.Name, before[j].Rate, u.Rate)
		}
	}
	// g0 -> 1mbit: 1952mbit, scale 839: everyone changes.
	saved := slices.Clone(r.Interfaces[0].Targets.Users)
	mustSet(t, &ov, Override{Target: Target{TargetUser, "g0"}, Rate: mbit(1), Ceil: mbit(100)})
	if r.UpdateUser(p, ov, nil, now, "g0") || !reflect.DeepEqual(r.Interfaces[0].Targets.Users, saved) {
		t.Fatal("a change that moves the scale: UpdateUser true or r changed")
	}
}

// floor(r*num/2^shift) without overflow at the largest rates.
func TestScaleRate(t *testing.T) {
	for _, c := range []struct {
		r     tbf.Rate
		num   uint64
		shift uint
		want  tbf.Rate
	}{
		{50e6, 512, 10, 25e6},
		{1 << 62, 512, 10, 1 << 61},
		{^tbf.Rate(0), 1023, 10, 1023*(1<<54-1) + 1022}, // (1024k+1023)*1023/1024, k = 2^54-1
		{10, 1, 10, 8},                                  // at least config.MinRate
		{10e6, 524, 20, 4997},                           // 10e6*524/2^20 = 4997.2
		{^tbf.Rate(0), 1<<62 + 1, 63, 1<<63 + 1},        // (2^64-1)(2^62+1)/2^63 = 2^63 + 1.5 - 2^-63
	} {
		if got := scaleRate(c.r, c.num, c.shift); got != c.want {
			t.Errorf("scaleRate(%d, %d, %d) = %d, want %d", c.r, c.num, c.shift, got, c.want)
		}
	}
}

// For random plans, every parent's scaled children fit it.
func TestOversubscribedProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for n := range 200 {
		bw := 20 + rng.IntN(200) // mbit; every rate and ceil fits it
		main := strings.NewReplacer(`ceil = "100mbit"`, fmt.Sprintf(`ceil = "%dmbit"`, bw),
			`aggregate_ceil = "20mbit"`, fmt.Sprintf(`aggregate_ceil = "%dmbit"`, bw),
			`bandwidth = "100mbit"`, fmt.Sprintf(`bandwidth = "%dmbit"`, bw),
			`rate = "50mbit"`, fmt.Sprintf(`rate = "%dkbit"`, 8+rng.IntN(bw*1000-8)),
			`aggregate_rate = "10mbit"`, fmt.Sprintf(`aggregate_rate = "%dkbit"`, 8+rng.IntN(bw*1000-8))).Replace(oversubMain)
		r := Evaluate(loadPlan(t, main, oversubUsers(rng.IntN(20), rng.IntN(20))), Overrides{}, nil, now)
		tg := r.Interfaces[0].Targets
		root, tiers := uint64(tg.Interface.DefaultRate), map[string]uint64{}
		for _, a := range tg.Tiers {
			root += uint64(a.Rate)
		}
		for _, u := range tg.Users {
			if u.Tier == "guest" && len(tg.Tiers) > 0 {
				tiers["guest"] += uint64(u.Rate)
			} else {
				root += uint64(u.Rate)
			}
			if u.Ceil < u.Rate {
				t.Fatalf("plan %d: %s ceil %v below rate %v", n, u.Name, u.Ceil, u.Rate)
			}
		}
		if root > uint64(tg.Interface.Bandwidth) {
			t.Fatalf("plan %d: root children %d > bandwidth %v", n, root, tg.Interface.Bandwidth)
		}
		for _, a := range tg.Tiers {
			if tiers[a.Name] > uint64(a.Rate) {
				t.Fatalf("plan %d: %s users %d > aggregate %v", n, a.Name, tiers[a.Name], a.Rate)
			}
		}
	}
}

// 10,000 users guaranteed 25 or 50 mbit on a 50mbit interface
// (oversubscribed x7500): each guarantee is scaled in proportion, not to
// the kernel's 8bit minimum, so the sum still fills the interface and a
// dorm50 user keeps twice a dorm25 user's guarantee; quanta (the share of
// what each borrows) are those of the configured rates; the note prints
// the factor with digits.
func TestOversubscribedThousandsFold(t *testing.T) {
	const main = `
[policy]
timezone = "UTC"

[[interface]]
name = "lan0"
bandwidth = "50mbit"
default_rate = "1mbit"

[tiers.dorm25]
rate = "25mbit"

[tiers.dorm50]
rate = "50mbit"
`
	var b strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = \"dorm%d\"\naddresses = [\"198.18.%d.%d\"]\n", i, 25*(1+i%2), i/250, i%250+1)
	}
	r := Evaluate(loadPlan(t, main, b.String()), Overrides{}, nil, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	ir := r.Interfaces[0]
	if len(ir.Oversubscriptions) != 1 {
		t.Fatalf("oversubscriptions %v, want the interface's", ir.Oversubscriptions)
	}
	o := ir.Oversubscriptions[0]
	if o.Num < ScaleMin || o.Num >= 2*ScaleMin {
		t.Errorf("scale %d/2^%d: fewer than 8 significant bits", o.Num, o.Shift)
	}
	sum := uint64(ir.Targets.Interface.DefaultRate)
	rates, quanta := map[string]tbf.Rate{}, map[string]uint32{}
	for _, u := range ir.Targets.Users {
		sum += uint64(u.Rate)
		if r, ok := rates[u.Tier]; ok && (r != u.Rate || quanta[u.Tier] != u.Quantum) {
			t.Fatalf("%s: rate %v quantum %d, others of tier %s %v %d", u.Name, u.Rate, u.Quantum, u.Tier, r, quanta[u.Tier])
		}
		rates[u.Tier], quanta[u.Tier] = u.Rate, u.Quantum
	}
	// 25mbit * 2^shift/(375.001 gbit/50mbit) is about 3333 bit/s.
	if lo := rates["dorm25"]; lo < 3300 || rates["dorm50"] < 2*lo || rates["dorm50"] > 2*lo+1 {
		t.Errorf("scaled guarantees dorm25 %v dorm50 %v, want about 3333bit and twice that", lo, rates["dorm50"])
	}
	if sum > 50e6 || sum < (1-1.0/ScaleMin)*50e6 {
		t.Errorf("scaled guarantees add up to %d bit/s, want within 1/%d below the 50mbit interface", sum, ScaleMin)
	}
	// The quantum of the configured rate (rate/10 bytes, at most 200000),
	// not HTB's 1000 B minimum of the scaled one.
	if quanta["dorm25"] != 200000 || quanta["dorm50"] != 200000 {
		t.Errorf("quanta dorm25 %d dorm50 %d, want HTB's 200000 for 25 and 50mbit", quanta["dorm25"], quanta["dorm50"])
	}
	notes := r.OversubscriptionNotes()
	if len(notes) != 1 || !strings.Contains(notes[0], "oversubscribed x7500.02)") || !strings.Contains(notes[0], "scaled by x0.000133 ") {
		t.Errorf("notes %q, want the factor x7500.02 and the scale x0.000133", notes)
	}
	if x := ir.Users[0]; !strings.HasSuffix(x.Reason, "oversubscribed x7500.02") {
		t.Errorf("u0's reason %q", x.Reason)
	}
}
