package config

import (
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
	err := CheckUser(p, User{Name: "c", Tier: "gold", Prefixes: users[2].Prefixes})
	if err == nil || !strings.Contains(err.Error(), `198.18.1.7 of user "c" overlaps 198.18.1.0/24 of user "a"`) {
		t.Errorf("CheckUser: %v", err)
	}
	if err := CheckUser(p, User{Name: "c", Tier: "gold", Prefixes: users[2].Prefixes[1:]}); err != nil {
		t.Errorf("CheckUser of a fitting user: %v", err)
	}
}
