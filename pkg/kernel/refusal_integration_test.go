package kernel

import (
	"errors"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
)

// TestRefusedClassSkipsItsFilters (one refused object must not take down
// the rest): the kernel refuses one
// user's class (no rate); Apply goes on, skips that
// user's filter (it would point at nothing), applies every other user,
// and reports both the refusal and the skipped filter with the user.
func TestRefusedClassSkipsItsFilters(t *testing.T) {
	const dev = "rf0"
	k := vethNS(t, dev)
	desired, err := model.Build(manyUsers(dev, 20, true), nil)
	if err != nil {
		t.Fatal(err)
	}
	changes := model.Diff(model.Tree{Device: dev}, desired)
	var bad model.Class
	for i := range changes {
		if c := changes[i].Class; c != nil && c.Labels.User == "u00007" {
			bad = *c
			bad.Rate, bad.Ceil = 0, 0 // HTB refuses a class without a rate
			changes[i].Class = &bad
		}
	}
	res, err := k.Apply(changes)
	var ke *Error
	if !errors.As(err, &ke) || ke.Labels.User != "u00007" {
		t.Fatalf("Apply: %v; want the kernel's refusal of user u00007's class with its message", err)
	}
	var skipped int
	for _, r := range res.Refused {
		if r.Labels.User != "u00007" {
			t.Errorf("refused %v: only u00007's objects should be", r)
		}
		if errors.Is(r, ErrDependencyRefused) {
			skipped++
			if !strings.HasPrefix(r.Object, "filter ") || !strings.Contains(r.Error(), "class "+bad.Handle.String()) {
				t.Errorf("skipped %v; want u00007's filter, naming its refused class", r)
			}
		}
	}
	if skipped != 1 {
		t.Errorf("%d skipped changes, want 1 (u00007's filter): %v", skipped, res.Refused)
	}
	actual, err := k.Dump(dev)
	if err != nil {
		t.Fatal(err)
	}
	if len(actual.Classes) != len(desired.Classes)-1 || len(actual.Filters) != len(desired.Filters)-1 {
		t.Errorf("kernel holds %d classes and %d filters; want all %d and %d but u00007's", len(actual.Classes), len(actual.Filters),
			len(desired.Classes), len(desired.Filters))
	}
	mm := model.Mismatches(actual, desired)
	for _, m := range mm {
		if !strings.Contains(m, bad.Handle.String()) && !strings.Contains(m, "u00007") {
			t.Errorf("mismatch %q: only u00007's objects should differ", m)
		}
	}
}
