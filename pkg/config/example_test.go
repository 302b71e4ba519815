package config

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestExampleConfig loads configs/shaperd.toml and configs/users.toml.
func TestExampleConfig(t *testing.T) {
	plan, err := Load("../../configs/shaperd.toml")
	if err != nil {
		t.Fatalf("example config is invalid:\n%v", err)
	}
	if got := len(plan.Interfaces); got != 2 {
		t.Fatalf("interfaces: got %d, want 2", got)
	}
	lan, up := plan.Interfaces[0], plan.Interfaces[1]
	if lan.Name != "lan0" || lan.Direction != Egress || lan.Match != MatchDst || lan.Bandwidth != tbf.Gbit {
		t.Errorf("lan0: %+v", lan)
	}
	if up.Name != "lan0" || up.Direction != Ingress || up.Match != MatchSrc || up.IFB != "ifb-lan0" {
		t.Errorf("lan0 ingress: %+v", up)
	}
	var names []string
	for _, tier := range plan.Tiers {
		names = append(names, tier.Name)
	}
	if want := []string{"bronze", "gold", "guest", "silver"}; !slices.Equal(names, want) {
		t.Errorf("tiers: got %v, want %v (sorted)", names, want)
	}
	gold, ok := plan.Tier("gold")
	if !ok || len(gold.Schedules) == 0 {
		t.Fatalf("gold has no schedule: %+v", gold)
	}
	if s := gold.Schedules[0]; s.Ceil != 60*tbf.Mbit || s.Rate != gold.Rate || s.UploadCeil != gold.UploadCeil {
		t.Errorf("gold peak schedule resolved to %+v", s)
	}
	silver, _ := plan.Tier("silver")
	if silver.Quota == 0 || silver.OverQuotaRate == 0 {
		t.Errorf("silver has no quota: %+v", silver)
	}
	if len(plan.Users) != 5 || plan.Users[0].Name != "alice" {
		t.Fatalf("users: %+v", plan.Users)
	}
	if erin := plan.Users[4]; erin.Name != "erin" || !erin.PrioSet || erin.Quota == 0 || erin.QuotaPeriod != PeriodDay || erin.QueueLatency == 0 {
		t.Errorf("erin's own settings: %+v", erin)
	}
	var v4, v6, prefix bool
	for _, u := range plan.Users {
		for _, p := range u.Prefixes {
			v4 = v4 || p.Addr().Is4() && p.IsSingleIP()
			v6 = v6 || p.Addr().Is6()
			prefix = prefix || !p.IsSingleIP()
		}
	}
	if !v4 || !v6 || !prefix {
		t.Errorf("example users lack an IPv4 address (%v), an IPv6 address (%v) or a prefix (%v)", v4, v6, prefix)
	}
	if got := plan.Users[2].Prefixes[0]; got != netip.MustParsePrefix("198.18.2.0/28") {
		t.Errorf("carol's first prefix: %v", got)
	}
	if plan.Daemon.ReconcileInterval != 5*time.Second || plan.Policy.Ramp != 2*time.Second {
		t.Errorf("daemon/policy: %+v %+v", plan.Daemon, plan.Policy)
	}
	if plan.UsersPath != "../../configs/users.toml" {
		t.Errorf("UsersPath = %q", plan.UsersPath)
	}
}
