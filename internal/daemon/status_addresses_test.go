package daemon

import (
	"context"
	"slices"
	"testing"
)

// TestStatusCarriesAddresses: every user row of the status has the user's
// configured prefixes (shaperctl export writes them).
func TestStatusCarriesAddresses(t *testing.T) {
	d, _ := newTestDaemon(t, newFakeKernel("lan0"), newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"alice": {"198.18.1.10/32", "2001:db8:1::10/128"}, "bob": {"198.18.1.20/32"}}
	st := d.status()
	if len(st.Users) == 0 {
		t.Fatal("no users in the status")
	}
	for _, u := range st.Users {
		if !slices.Equal(u.Addresses, want[u.Name]) {
			t.Errorf("%s on %s: addresses %v, want %v", u.Name, u.Interface, u.Addresses, want[u.Name])
		}
	}
}
