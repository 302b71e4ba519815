package policy

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// AddUser and RemoveUser leave r as a full evaluation of the plan with
// (without) the user would, or report false and leave r alone when the
// change is not the user's alone: the first user of a tier with an
// aggregate class, or guarantees that no longer fit.
func TestAddAndRemoveUserMatchEvaluate(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	without := loadPlan(t, oversubMain, oversubUsers(1, 1))
	with := loadPlan(t, oversubMain, oversubUsers(1, 1)+"[[user]]\nname = \"late\"\ntier = \"guest\"\naddresses = [\"198.18.3.1\"]\n")
	with.Users[2].Source = "runtime"

	r := Evaluate(without, Overrides{}, nil, now)
	if !r.AddUser(with, Overrides{}, nil, now, "late") {
		t.Fatal("AddUser of a guest (the guest aggregate exists, guarantees fit): false")
	}
	full := Evaluate(with, Overrides{}, nil, now)
	if !reflect.DeepEqual(r.Interfaces[0].Targets, full.Interfaces[0].Targets) {
		t.Errorf("AddUser's targets differ from a full evaluation:\n%+v\n%+v", r.Interfaces[0].Targets.Users, full.Interfaces[0].Targets.Users)
	}
	if !r.RemoveUser("late") {
		t.Fatal("RemoveUser of one of two guests: false")
	}
	if back := Evaluate(without, Overrides{}, nil, now); !reflect.DeepEqual(r.Interfaces[0].Targets, back.Interfaces[0].Targets) {
		t.Errorf("RemoveUser's targets differ from a full evaluation")
	}

	// The first guest: the tier's aggregate class is new too.
	noGuest := loadPlan(t, oversubMain, oversubUsers(1, 0))
	firstGuest := loadPlan(t, oversubMain, oversubUsers(1, 1))
	r = Evaluate(noGuest, Overrides{}, nil, now)
	before := Evaluate(noGuest, Overrides{}, nil, now)
	if r.AddUser(firstGuest, Overrides{}, nil, now, "x0") || !reflect.DeepEqual(r, before) {
		t.Error("AddUser of a tier's first user: true, or r changed")
	}
	r = Evaluate(firstGuest, Overrides{}, nil, now)
	if r.RemoveUser("x0") {
		t.Error("RemoveUser of a tier's last user: true")
	}

	// A second gold user (2 x 50mbit + the default class > 100mbit).
	twoGold := loadPlan(t, oversubMain, oversubUsers(2, 0))
	r = Evaluate(noGuest, Overrides{}, nil, now)
	if r.AddUser(twoGold, Overrides{}, nil, now, "g1") || !reflect.DeepEqual(r, before) {
		t.Error("AddUser that oversubscribes: true, or r changed")
	}
}

// Random single-user changes (rates up and down across the point where
// the guarantees stop fitting, users removed and added back) applied
// incrementally leave the same targets as a full evaluation, and the
// cached guarantee sums equal sums made afresh.
func TestIncrementalChangesKeepSums(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(5, 6))
	all := loadPlan(t, oversubMain, oversubUsers(3, 2))
	less := loadPlan(t, oversubMain, oversubUsers(3, 1)) // without x1, the last
	var ov Overrides
	r := Evaluate(all, ov, nil, now)
	incremental, removed, indexed := 0, 0, 0
	checkSums := func(step int, what string) {
		t.Helper()
		ir := &r.Interfaces[0]
		cached := maps.Clone(ir.sums())
		fresh := *ir
		fresh.gsums = nil
		if got := fresh.sums(); !maps.Equal(cached, got) {
			t.Fatalf("step %d (%s): cached sums %v, afresh %v", step, what, cached, got)
		}
		// The user index, kept by the same changes, names every user
		// where it is.
		if x := ir.uidx; x != nil && x.owner == ir {
			indexed++
			if len(x.at) != len(ir.Targets.Users) || x.n != len(ir.Targets.Users) {
				t.Fatalf("step %d (%s): user index of %d (n %d) for %d users", step, what, len(x.at), x.n, len(ir.Targets.Users))
			}
			for j, u := range ir.Targets.Users {
				if x.at[u.Name] != j {
					t.Fatalf("step %d (%s): user index has %s at %d, it is at %d", step, what, u.Name, x.at[u.Name], j)
				}
			}
		}
	}
	for step := range 400 {
		if step%10 == 9 { // x1 leaves and comes back
			if r.RemoveUser("x1") {
				removed++
				if full := Evaluate(less, ov, nil, now); !reflect.DeepEqual(r.Interfaces[0].Targets, full.Interfaces[0].Targets) {
					t.Fatalf("step %d: RemoveUser's targets differ from a full evaluation", step)
				}
				checkSums(step, "x1 removed")
				if !r.AddUser(all, ov, nil, now, "x1") {
					r = Evaluate(all, ov, nil, now)
				}
			}
			checkSums(step, "x1 back")
		}
		u := all.Users[rng.IntN(len(all.Users)-1)].Name // not x1
		mustSet(t, &ov, Override{Target: Target{TargetUser, u}, Rate: tbf.Rate(1+rng.IntN(40)) * tbf.Mbit, Ceil: 100 * tbf.Mbit})
		if r.UpdateUser(all, ov, nil, now, u) {
			incremental++
		} else {
			r = Evaluate(all, ov, nil, now)
		}
		full := Evaluate(all, ov, nil, now)
		ir := &r.Interfaces[0]
		if !reflect.DeepEqual(ir.Targets, full.Interfaces[0].Targets) {
			t.Fatalf("step %d (%s): incremental targets differ from a full evaluation:\n%+v\n%+v", step, u, ir.Targets.Users, full.Interfaces[0].Targets.Users)
		}
		checkSums(step, u)
	}
	if incremental < 100 || removed < 5 || indexed < 100 {
		t.Errorf("%d of 400 changes incremental, %d of 40 removals, %d checks of the user index; the test shows little", incremental, removed, indexed)
	}
}

// Under an oversubscribed parent a user's removal changes that user's
// class alone while the quantized scale stays (most removals among 2,000
// users), and matches a full evaluation either way.
func TestRemoveUserUnderOversubscription(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	const n, removals = 2000, 20
	users := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "[[user]]\nname = \"g%d\"\ntier = \"gold\"\naddresses = [\"198.18.%d.%d\"]\n", i, 4+i/250, 1+i%250)
		}
		return b.String()
	}
	r := Evaluate(loadPlan(t, oversubMain, users(n)), Overrides{}, nil, now)
	if len(r.Interfaces[0].Oversubscriptions) != 1 {
		t.Fatalf("oversubscriptions %v, want the interface's", r.Interfaces[0].Oversubscriptions)
	}
	incremental := 0
	for k := 1; k <= removals; k++ {
		less := loadPlan(t, oversubMain, users(n-k))
		full := Evaluate(less, Overrides{}, nil, now)
		if r.RemoveUser(fmt.Sprintf("g%d", n-k)) {
			incremental++
			if !reflect.DeepEqual(r.Interfaces[0].Targets, full.Interfaces[0].Targets) {
				t.Fatalf("removal %d: targets differ from a full evaluation", k)
			}
			if got, want := r.Interfaces[0].Oversubscriptions, full.Interfaces[0].Oversubscriptions; !reflect.DeepEqual(got, want) {
				t.Fatalf("removal %d: oversubscriptions %v, a full evaluation %v", k, got, want)
			}
			continue
		}
		r = full
	}
	// One user is 1/2000 of the guarantees; a step of the scale 1/128 to
	// 1/256 of it: about one removal in ten moves the scale.
	if incremental < removals/2 {
		t.Errorf("%d of %d removals under the oversubscribed root were incremental, want most", incremental, removals)
	}
	t.Logf("%d of %d removals incremental", incremental, removals)
}
