package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestConflictsReportTheLaterUser(t *testing.T) {
	users := []User{
		{Name: "a", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")}},
		{Name: "b", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.2.1/32"), netip.MustParsePrefix("2001:db8::/64")}},
		{Name: "c", Source: RuntimeSource, Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.1.7/32"), netip.MustParsePrefix("198.18.3.1/32")}},
	}
	got := Conflicts(users)
	if len(got) != 1 || got[0].User != 2 || got[0].Other != 0 || got[0].Prefix != netip.MustParsePrefix("198.18.1.7/32") {
		t.Fatalf("Conflicts = %+v, want c's 198.18.1.7 against a's 198.18.1.0/24", got)
	}
	p := &Plan{Users: users[:2], Tiers: []Tier{{Name: "gold"}}}
	err := checkUserScan(p, User{Name: "c", Tier: "gold", Prefixes: users[2].Prefixes})
	if err == nil || !strings.Contains(err.Error(), `198.18.1.7 of user "c" overlaps 198.18.1.0/24 of user "a"`) {
		t.Errorf("checkUserScan: %v", err)
	}
	if err := checkUserScan(p, User{Name: "c", Tier: "gold", Prefixes: users[2].Prefixes[1:]}); err != nil {
		t.Errorf("checkUserScan of a fitting user: %v", err)
	}
}

// checkUserScan is CheckUserIndexed with the other users' addresses
// scanned one by one instead of looked up in an index: the plain version
// the tests hold CheckUserIndexed to (the same problems, maybe in another
// order).
func checkUserScan(plan *Plan, u User) error {
	errs := checkUserOwn(plan, u)
	for i := range plan.Users {
		o := &plan.Users[i]
		if o.Name == u.Name {
			continue
		}
		for _, q := range o.Prefixes {
			for _, p := range u.Prefixes {
				if p.Overlaps(q) {
					errs = append(errs, overlapError(p, u.Name, q, o.Name, o.Source))
				}
			}
		}
	}
	return errors.Join(errs...)
}
