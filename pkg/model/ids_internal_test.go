package model

import "testing"

func TestPoolWrapsToFreedMinors(t *testing.T) {
	p := newPool(10, 13)
	if err := p.assign([]string{"a", "b", "c", "d"}); err != nil {
		t.Fatal(err)
	}
	if err := p.assign([]string{"a", "c", "d", "e"}); err != nil { // b (11) freed; cursor wrapped to 10
		t.Fatal(err)
	}
	if p.byName["e"] != 11 {
		t.Errorf("e got %d, want the freed 11 after wrapping", p.byName["e"])
	}
	if err := p.assign([]string{"a", "c", "d", "e", "f"}); err == nil {
		t.Error("a full pool accepted a fifth name")
	}
	if len(p.byName) != 4 || p.byName["e"] != 11 {
		t.Errorf("a failed assign changed the pool: %v", p.byName)
	}
}
