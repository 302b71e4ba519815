package policy

import (
	"reflect"
	"testing"
	"time"
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
