package smoothness

import (
	"net/netip"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestPlanHTB(t *testing.T) {
	addr := netip.MustParseAddr("198.18.0.10")
	p, err := Plan(Case{Shaper: model.ShaperHTB, From: 50 * tbf.Mbit, To: 10 * tbf.Mbit}, "r-lan", addr, 250*time.Millisecond, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if p.Policy.Interval != 250*time.Millisecond || p.Policy.Ramp != 2*time.Second {
		t.Errorf("policy %+v", p.Policy)
	}
	res := policy.Evaluate(p, policy.Overrides{}, nil, time.Unix(0, 0))
	if len(res.Interfaces) != 1 {
		t.Fatalf("interfaces: %d", len(res.Interfaces))
	}
	tg := res.Interfaces[0].Targets
	if tg.Interface.Name != "r-lan" || tg.Interface.Shaper != model.ShaperHTB || tg.Interface.Bandwidth != HTBBandwidth {
		t.Errorf("interface %+v", tg.Interface)
	}
	if len(tg.Users) != 1 || tg.Users[0].Name != UserName || tg.Users[0].Rate != 50*tbf.Mbit || tg.Users[0].Ceil != 50*tbf.Mbit {
		t.Fatalf("users %+v", tg.Users)
	}
	if got := tg.Users[0].Prefixes; len(got) != 1 || got[0] != netip.PrefixFrom(addr, 32) {
		t.Errorf("prefixes %v", got)
	}
}

func TestPlanTBF(t *testing.T) {
	p, err := Plan(Case{Shaper: model.ShaperTBF, From: 10 * tbf.Mbit, To: 50 * tbf.Mbit, Burst: 256 * tbf.Kibibyte}, "r-lan",
		netip.MustParseAddr("198.18.0.10"), 250*time.Millisecond, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	in := policy.Evaluate(p, policy.Overrides{}, nil, time.Unix(0, 0)).Interfaces[0].Targets.Interface
	// The bandwidth is the higher rate (a run starts at From by an
	// interface override: the daemon refuses one above the bandwidth).
	if in.Shaper != model.ShaperTBF || in.Bandwidth != 50*tbf.Mbit || in.Burst != 256*tbf.Kibibyte {
		t.Errorf("interface %+v", in)
	}
}
