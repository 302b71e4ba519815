package policy

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

const checkUsers = `
[[user]]
name = "alice"
tier = "t"
addresses = ["198.18.0.1"]
`

// TestCheckRefusesWhatBuildRefuses: each configuration passes config.Load
// but cannot be built (or would promise more than the link has); Check
// reports it at the key that causes it.
func TestCheckRefusesWhatBuildRefuses(t *testing.T) {
	tbfIface := func(extra string) string {
		return "[[interface]]\nname = \"wan0\"\nshaper = \"tbf\"\n" + extra + "\n[tiers.t]\nrate = \"1mbit\"\n"
	}
	htb := func(tier string) string {
		return "[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n\n[tiers.t]\n" + tier + "\n"
	}
	tests := []struct {
		name, main, users string
		key, msg          string
	}{
		{"tbf 8bit", tbfIface(`bandwidth = "8bit"`), "", "interface[0].bandwidth", "32-bit tick"},
		{"tbf burst 1mb at 1mbit", tbfIface("bandwidth = \"1mbit\"\nburst = \"1mb\""), "", "interface[0].burst", "4.29s"},
		{"tbf burst 8gb", tbfIface("bandwidth = \"1gbit\"\nburst = \"8gb\""), "", "interface[0].burst", "32-bit"},
		{"tbf latency 1h at 10gbit", tbfIface("bandwidth = \"10gbit\"\nlatency = \"1h\""), "", "interface[0].latency", "limit"},
		{"tbf 700gbit default latency", tbfIface(`bandwidth = "700gbit"`), "", "interface[0].bandwidth", "limit"},
		{"tbf mtu 1gb at peak 2mbit", tbfIface("bandwidth = \"1mbit\"\npeakrate = \"2mbit\"\nmtu = \"1gb\""), "", "interface[0].mtu", "mtu"},
		{"tbf 1000bit", tbfIface(`bandwidth = "1000bit"`), "", "interface[0].bandwidth", "4.29s"},
		{"tbf peakrate 100007bit", tbfIface("bandwidth = \"100000bit\"\npeakrate = \"100007bit\"\nmtu = \"1514b\""), "", "interface[0].peakrate", "peak rate"},
		{"tbf peakrate 1007bit", tbfIface("bandwidth = \"1000bit\"\nburst = \"1514b\"\npeakrate = \"1007bit\"\nmtu = \"1514b\""), "", "interface[0].burst", "4.29s"},
		{"htb rate 8bit burst 64kb", htb("rate = \"8bit\"\nburst = \"64kb\""), checkUsers, "tiers.t.rate", "burst 64kb does not fit rate 8bit"},
		{"htb burst 4gb at 1mbit", htb("rate = \"1mbit\"\nburst = \"4gb\""), checkUsers, "tiers.t.rate", "burst 4gb does not fit"},
		{"htb cburst 4gb at 1mbit", htb("rate = \"1mbit\"\ncburst = \"4gb\""), checkUsers, "tiers.t.rate", "cburst 4gb does not fit ceil"},
		{"schedule rate 8bit", htb("rate = \"10mbit\"\nburst = \"64kb\"\n[[tiers.t.schedule]]\ndays = [\"all\"]\nfrom = \"00:00\"\nto = \"01:00\"\nrate = \"8bit\""),
			checkUsers, "tiers.t.schedule[0].rate", "burst 64kb does not fit rate 8bit"},
		{"over quota 1kbit", htb("rate = \"10mbit\"\nburst = \"64kb\"\nquota = \"1gb\"\nover_quota_rate = \"1kbit\""),
			checkUsers, "tiers.t.over_quota_rate", "quota exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			users := tt.users
			if users == "" {
				users = "user = []\n"
			}
			plan := loadPlan(t, tt.main, users)
			errs := Check(plan)
			if len(errs) == 0 {
				t.Fatalf("Check passed; want an error at %s", tt.key)
			}
			for _, e := range errs {
				if e.Key == tt.key && strings.Contains(e.Msg, tt.msg) {
					if e.Line == 0 {
						t.Errorf("%v: no position", e)
					}
					return
				}
			}
			t.Errorf("want an error at %s containing %q; got %v", tt.key, tt.msg, errs)
		})
	}
}

func TestCheckTooManyUsers(t *testing.T) {
	var b strings.Builder
	n := model.MaxUsers + 1
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = \"t\"\naddresses = [\"10.%d.%d.%d\"]\n", i, i>>16&255, i>>8&255, i&255)
	}
	plan := loadPlan(t, "[[interface]]\nname = \"lan0\"\nbandwidth = \"10gbit\"\n[tiers.t]\nrate = \"1mbit\"\n", b.String())
	errs := Check(plan)
	if len(errs) != 1 || errs[0].Key != fmt.Sprintf("user[%d].name", model.MaxUsers) || errs[0].Line == 0 {
		t.Fatalf("want one positioned error at user[%d].name; got %d: %.300v", model.MaxUsers, len(errs), errs)
	}
}

func TestCheckPassesTheExample(t *testing.T) {
	plan := loadPlan(t, baseMain, baseUsers)
	if errs := Check(plan); errs != nil {
		t.Fatalf("Check: %v", errs)
	}
}

const goldBurstMain = `
[[interface]]
name = "lan0"
bandwidth = "1gbit"

[[interface]]
name = "wan0"
shaper = "tbf"
bandwidth = "100mbit"

[tiers.gold]
rate = "50mbit"
burst = "64kb"
`

// TestOverrideBelowTheBurstBuilds: an accepted set-rate must build on every
// interface, even set-rate alice 1900bit with gold's burst 64kb (far more
// than the kernel holds at that rate): the override is accepted, and the burst is cut
// to fit (and said so), so every interface still builds.
func TestOverrideBelowTheBurstBuilds(t *testing.T) {
	plan := loadPlan(t, goldBurstMain, "[[user]]\nname = \"alice\"\ntier = \"gold\"\naddresses = [\"198.18.0.1\"]\n")
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	o := Override{Target: Target{TargetUser, "alice"}, Rate: 1900 * tbf.Bit, Set: now}
	if err := CheckOverrideBuild(plan, Overrides{}, o, now); err != nil {
		t.Fatalf("CheckOverrideBuild: %v", err)
	}
	var ov Overrides
	if err := ov.Set(o); err != nil {
		t.Fatal(err)
	}
	res := Evaluate(plan, ov, nil, now)
	for _, tg := range res.Targets() {
		if _, err := model.Build(tg, nil); err != nil {
			t.Fatalf("Build after the override: %v", err)
		}
	}
	x := explain(t, res, 0, "alice")
	if !x.BurstCut || x.Burst != tbf.MaxBurst(1900*tbf.Bit) || !strings.Contains(x.Reason, "burst 64kb cut to") {
		t.Errorf("explanation: cut %v burst %s reason %q; want the burst cut to %s and said so", x.BurstCut, x.Burst, x.Reason, tbf.MaxBurst(1900*tbf.Bit))
	}
	// A ramp towards it builds at every step too.
	if b := StepBurst(1900*tbf.Bit, 64*1024, 50*tbf.Mbit); b > tbf.MaxBurst(1900*tbf.Bit) {
		t.Errorf("StepBurst = %s, above MaxBurst", b)
	}
}

// TestOverrideThatCannotBuildIsRefused: an iface override that leaves the
// TBF no room for one frame is refused, naming the interface and why.
func TestOverrideThatCannotBuildIsRefused(t *testing.T) {
	plan := loadPlan(t, goldBurstMain, "[[user]]\nname = \"alice\"\ntier = \"gold\"\naddresses = [\"198.18.0.1\"]\n")
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	o := Override{Target: Target{TargetIface, "wan0"}, Rate: 8 * tbf.Bit, Set: now}
	err := CheckOverrideBuild(plan, Overrides{}, o, now)
	if err == nil || !strings.Contains(err.Error(), "iface:wan0") || !strings.Contains(err.Error(), "interface wan0") {
		t.Fatalf("CheckOverrideBuild = %v; want a refusal naming iface:wan0", err)
	}
	ok := Override{Target: Target{TargetIface, "wan0"}, Rate: 10 * tbf.Mbit, Set: now}
	if err := CheckOverrideBuild(plan, Overrides{}, ok, now); err != nil {
		t.Fatalf("a 10mbit override: %v", err)
	}
}

// BenchmarkCheckOverrideBuild65k: a set-rate is built before it is
// accepted; on a plan of 65,000 users of one tier that must stay cheap.
func BenchmarkCheckOverrideBuild65k(b *testing.B) {
	var u strings.Builder
	for i := 0; i < 65000; i++ {
		fmt.Fprintf(&u, "[[user]]\nname = \"u%d\"\ntier = \"gold\"\naddresses = [\"10.%d.%d.%d\"]\n", i, i>>16, i>>8&255, i&255)
	}
	plan, err := config.LoadFS(fstest.MapFS{"shaperd.toml": {Data: []byte(goldBurstMain)}, "users.toml": {Data: []byte(u.String())}}, "shaperd.toml")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, target := range []Target{{TargetUser, "u7"}, {TargetTier, "gold"}, {TargetIface, "lan0"}} {
		b.Run(string(target.Kind), func(b *testing.B) {
			o := Override{Target: target, Rate: 3 * tbf.Mbit, Set: now}
			for b.Loop() {
				if err := CheckOverrideBuild(plan, Overrides{}, o, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
