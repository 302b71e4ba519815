package simulate

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/sim"
	"github.com/shaperd/shaperd/pkg/tbf"
)

const mbit = 1e6

func loadPlan(t *testing.T) *config.Plan {
	t.Helper()
	plan, err := config.Load("testdata/shaperd.toml")
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func simulateAt(t *testing.T, spec, at string) *Report {
	t.Helper()
	plan := loadPlan(t)
	sp, err := ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	when, err := ParseAt(at, time.Time{}, plan.Policy.Location)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Simulate(plan, sp, when, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// row finds user's row on iface in direction d.
func row(t *testing.T, rep *Report, user, iface string, d model.Direction) UserRow {
	t.Helper()
	for _, u := range rep.Users {
		if u.User == user && u.Interface == iface && u.Direction == d {
			return u
		}
	}
	t.Fatalf("no row for %s on %s %s", user, iface, d)
	return UserRow{}
}

type expect struct {
	user, iface string
	dir         model.Direction
	rate        float64 // mbit
	limited     string
	detail      string
}

func checkRows(t *testing.T, rep *Report, es ...expect) {
	t.Helper()
	for _, e := range es {
		u := row(t, rep, e.user, e.iface, e.dir)
		if math.Abs(u.Rate-e.rate*mbit) > 1 || u.LimitedBy != e.limited || u.Detail != e.detail {
			t.Errorf("%s %s %s: %.3f mbit, %s (%s); want %.3f mbit, %s (%s)",
				e.user, e.iface, e.dir, u.Rate/mbit, u.LimitedBy, u.Detail, e.rate, e.limited, e.detail)
		}
	}
}

// Friday 18:30 in Berlin (the plan's timezone; 17:30 UTC) is before
// gold's peak schedule: on the 100mbit download 65mbit are guaranteed and
// gold (prio 0) takes the 35mbit spare, equal quanta: 37.5 each. The
// upload's guarantees (65mbit and the default class) oversubscribe its
// 20mbit: the policy scales them to fit (the bandwidth stays a cap), so
// the upload passes 20mbit, a1 at least its scaled 20*20/65.2mbit. The TBF
// splits 50mbit five ways.
func TestSimulateOffPeak(t *testing.T) {
	rep := simulateAt(t, DefaultSpec, "2026-12-04 18:30")
	checkRows(t, rep,
		expect{"a1", "lan0", model.Egress, 37.5, "share", "interface"},
		expect{"b1", "lan0", model.Egress, 10, "prio", "interface"},
		expect{"c1", "lan0", model.Egress, 5, "prio", "interface"},
		expect{"c1", "wan0", model.Egress, 10, "fifo", ""},
	)
	up := rep.Interfaces[1]
	if up.Oversubscribed || math.Abs(up.Rate-20*mbit) > 1 || up.Bandwidth != 20*mbit {
		t.Errorf("upload: %+v, want 20mbit through 20mbit (guarantees scaled to fit)", up)
	}
	if a1 := row(t, rep, "a1", "lan0", model.Ingress); a1.Rate < 20*mbit*20/65.2 {
		t.Errorf("a1's upload %.3f mbit, below its scaled guarantee", a1.Rate/mbit)
	}
	down := rep.Interfaces[0]
	want := []TierTotal{{"gold", 75 * mbit}, {"silver", 20 * mbit}, {"bronze", 5 * mbit}}
	if len(down.Tiers) != len(want) {
		t.Fatalf("download tiers %+v, want %+v", down.Tiers, want)
	}
	for i, w := range want {
		if down.Tiers[i].Tier != w.Tier || math.Abs(down.Tiers[i].Rate-w.Rate) > 1 {
			t.Errorf("download tier %d: %+v, want %+v", i, down.Tiers[i], w)
		}
	}
}

// At 19:30 Berlin gold's schedule caps it at 30mbit; b1 asks 2mbit down
// and nothing up, unclassified traffic saturates the default class
// (1mbit) on the download. Spare 100-58 = 42: gold +10 each to its
// scheduled ceil, b2 takes the remaining 22.
func TestSimulatePeakWithDemands(t *testing.T) {
	rep := simulateAt(t, "*=max,default:lan0=max/0,b1=2mbit/0", "2026-12-04 19:30")
	checkRows(t, rep,
		expect{"a1", "lan0", model.Egress, 30, "ceil", "schedule gold#0 fri 19:00-23:00"},
		expect{"b1", "lan0", model.Egress, 2, "demand", ""},
		expect{"b2", "lan0", model.Egress, 32, "prio", "interface"},
		expect{Unclassified, "lan0", model.Egress, 1, "ceil", ""},
		expect{"b1", "lan0", model.Ingress, 0, "demand", ""},
		expect{"b1", "wan0", model.Egress, 2, "demand", ""},
		expect{"b2", "wan0", model.Egress, 12, "fifo", ""},
	)
}

// The packet size reaches the solver: with 64 KiB packets the quanta of
// a1 (gold, 20mbit: 200000 B) and of a2 at 4mbit (50000 B) weigh
// 200000:65536 instead of 200000:50000.
func TestPacketSize(t *testing.T) {
	plan := loadPlan(t)
	plan.Users[1].Rate = 4_000_000 // a2: 4mbit, ceil stays 60mbit
	sp, _ := ParseSpec(DefaultSpec)
	at, _ := ParseAt("2026-12-04 18:30", time.Time{}, plan.Policy.Location)
	share := func(pkt uint64) float64 {
		rep, err := Simulate(plan, sp, at, sim.Options{PacketSize: tbf.Size(pkt)})
		if err != nil {
			t.Fatal(err)
		}
		return row(t, rep, "a2", "lan0", model.Egress).Rate
	}
	// Guarantees 20+4+10+10+5 = 49, spare 51 to gold by weight. 1514-byte
	// packets: 200000:50000 would give a1 40.8 > its 40 of headroom, so a1
	// stops at its ceil and a2 gets 11. 64 KiB: 200000:65536, a1 38.41.
	if got, want := share(0), 15*mbit; math.Abs(got-want) > 1 {
		t.Errorf("1514-byte packets: a2 %.3f mbit, want %.3f", got/mbit, want/mbit)
	}
	if got, want := share(65536), 4*mbit+51*mbit*65536/265536; math.Abs(got-want) > 1 {
		t.Errorf("64 KiB packets: a2 %.3f mbit, want %.3f", got/mbit, want/mbit)
	}
	// The default bursts (15140 B) are short for 64 KiB packets: the
	// borrowing users are marked in the table and the JSON.
	rep, err := Simulate(plan, sp, at, sim.Options{PacketSize: 65536})
	if err != nil {
		t.Fatal(err)
	}
	if u := row(t, rep, "a2", "lan0", model.Egress); !u.ShortBurst {
		t.Errorf("a2 borrows with a 15140-byte cburst and 64 KiB packets: not marked")
	}
	var tb, js bytes.Buffer
	_ = rep.WriteTable(&tb)
	_ = rep.WriteJSON(&js)
	if !strings.Contains(tb.String(), "share (interface) *") || !strings.Contains(tb.String(), "* borrows with a cburst below 4 packets") {
		t.Errorf("table does not mark short bursts:\n%s", tb.String())
	}
	if !strings.Contains(js.String(), `"short_burst": true`) {
		t.Errorf("JSON does not mark short bursts")
	}
}

func TestParseSpec(t *testing.T) {
	sp, err := ParseSpec("*=1mbit, tier:gold=max/0,a1=0,default:*=3mbit")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, tier string
		dir        model.Direction
		want       sim.Demand
	}{
		{"a1", "gold", model.Egress, 0}, {"a2", "gold", model.Egress, sim.Max}, {"a2", "gold", model.Ingress, 0},
		{"b1", "silver", model.Ingress, sim.Demand(mbit)},
	} {
		if got := sp.user(c.user, c.tier, c.dir); got != c.want {
			t.Errorf("%s (%s) %s: %v, want %v", c.user, c.tier, c.dir, got, c.want)
		}
	}
	if got := sp.unclassified("lan0", model.Egress); got != sim.Demand(3*mbit) {
		t.Errorf("default: %v, want 3mbit", got)
	}
	if sp, _ := ParseSpec(""); sp.user("a1", "gold", model.Egress) != 0 {
		t.Error("empty spec: want no demand")
	}
	for _, bad := range []string{"a1", "a1=fast", "=max", "iface:lan0=max", "a1=1mbit,a1=2mbit", "tier:=max", "a1=max/x"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q): no error", bad)
		}
	}
	plan := loadPlan(t)
	for _, unknown := range []string{"zed=max", "tier:platinum=max", "default:eth9=max"} {
		sp, err := ParseSpec(unknown)
		if err != nil {
			t.Fatal(err)
		}
		if err := sp.check(plan); err == nil || !strings.Contains(err.Error(), "no ") {
			t.Errorf("%s: %v, want an unknown-name error", unknown, err)
		}
	}
}

func TestParseAt(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	got, err := ParseAt("2026-12-04 21:00", time.Time{}, berlin)
	if err != nil || !got.Equal(time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseAt: %v, %v; want 20:00 UTC", got, err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if got, _ := ParseAt("", now, berlin); !got.Equal(now) {
		t.Errorf("default: %v, want now", got)
	}
	if _, err := ParseAt("tomorrow", now, berlin); err == nil {
		t.Error("ParseAt(tomorrow): no error")
	}
}

// --json has the keys scripts rely on (user, interface, direction,
// demand_bits_per_second, bits_per_second, limited_by) with numbers in bits
// per second and null for a demand of max.
func TestJSON(t *testing.T) {
	rep := simulateAt(t, "*=max,b1=2mbit", "2026-12-04 18:30")
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Users []map[string]any `json:"users"`
		Ifs   []map[string]any `json:"interfaces"`
	}
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Users) != 15 || len(out.Ifs) != 3 {
		t.Fatalf("%d users, %d interfaces; want 15 and 3", len(out.Users), len(out.Ifs))
	}
	u := out.Users[0]
	for _, k := range []string{"user", "interface", "direction", "demand_bits_per_second", "bits_per_second", "limited_by"} {
		if _, ok := u[k]; !ok {
			t.Errorf("user entry without %q: %v", k, u)
		}
	}
	// a1: spare 100-57 = 43 shared by gold: 20+21.5.
	if u["user"] != "a1" || u["demand_bits_per_second"] != nil || u["demand_text"] != "max" || u["bits_per_second"] != 41.5e6 {
		t.Errorf("a1: %v", u)
	}
	if b1 := out.Users[2]; b1["demand_bits_per_second"] != 2e6 || b1["bits_per_second"] != 2e6 || b1["limited_by"] != "demand" {
		t.Errorf("b1: %v", b1)
	}
	if up := out.Ifs[1]; up["oversubscribed"] != false || up["bits_per_second"] != 20e6 {
		t.Errorf("upload interface: %v, want 20mbit through 20mbit (the policy scales guarantees to fit)", up)
	}
}

func TestTable(t *testing.T) {
	rep := simulateAt(t, DefaultSpec, "2026-12-04 18:30")
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{
		"simulated at 2026-12-04 18:30 CET",
		"USER  TIER    INTERFACE  DIRECTION  DEMAND  RATE      LIMITED_BY",
		"a1    gold    lan0       egress     max     37.5mbit  share (interface)",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "> bandwidth") {
		t.Errorf("an interface of a plan is oversubscribed (the policy scales guarantees to fit):\n%s", out)
	}
}

func TestMainExitCodes(t *testing.T) {
	run := func(f Flags, path string) (int, string, string) {
		var o, e bytes.Buffer
		code := Main(path, &f, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC), &o, &e)
		return code, o.String(), e.String()
	}
	if code, out, errOut := run(Flags{Simulate: true, Demand: DefaultSpec, JSON: true}, "testdata/shaperd.toml"); code != 0 || !strings.Contains(out, `"users"`) || errOut != "" {
		t.Errorf("ok: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, errOut := run(Flags{Demand: "zed=max"}, "testdata/shaperd.toml"); code != 2 || !strings.Contains(errOut, "zed") {
		t.Errorf("unknown user: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(Flags{Demand: DefaultSpec, At: "noon"}, "testdata/shaperd.toml"); code != 2 || !strings.Contains(errOut, "--at") {
		t.Errorf("bad --at: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(Flags{Demand: DefaultSpec, PacketSize: "huge"}, "testdata/shaperd.toml"); code != 2 || !strings.Contains(errOut, "--packet-size") {
		t.Errorf("bad --packet-size: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(Flags{Demand: DefaultSpec}, "testdata/missing.toml"); code != 1 || errOut == "" {
		t.Errorf("missing config: exit %d, %q", code, errOut)
	}
}

// TestCappedCeilings: the plan's tiers (ceils 40..60mbit) on the 20mbit
// upload side are capped to it; the report lists them per interface, in
// the table and in JSON, and no user's class is given more than 20mbit.
func TestCappedCeilings(t *testing.T) {
	rep := simulateAt(t, "*=max", "2026-12-04 12:00")
	var up, down *IfaceRow
	for i := range rep.Interfaces {
		in := &rep.Interfaces[i]
		if in.Interface == "lan0" && in.Direction == model.Ingress {
			up = in
		}
		if in.Interface == "lan0" && in.Direction == model.Egress {
			down = in
		}
	}
	if up == nil || down == nil {
		t.Fatalf("interfaces %+v", rep.Interfaces)
	}
	want := "tier gold: ceil 60mbit capped to the bandwidth 20mbit (2 users)"
	if !slices.Contains(up.Capped, want) || len(down.Capped) != 0 {
		t.Errorf("upload capped %q (want %q), download capped %q (want none)", up.Capped, want, down.Capped)
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "lan0 ingress: "+want+"\n") {
		t.Errorf("table lacks the cap:\n%s", b.String())
	}
	b.Reset()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"capped": [`) || !strings.Contains(b.String(), want) {
		t.Errorf("JSON lacks the cap:\n%s", b.String())
	}
}
