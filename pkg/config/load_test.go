package config

import (
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

func mapFS(main, users string) fstest.MapFS {
	return fstest.MapFS{
		"etc/shaperd.toml": {Data: []byte(main)},
		"etc/users.toml":   {Data: []byte(users)},
	}
}

func mustLoad(t *testing.T, main, users string) *Plan {
	t.Helper()
	plan, err := LoadFS(mapFS(main, users), "etc/shaperd.toml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return plan
}

// TestDefaults loads a minimal config and checks every documented default.
func TestDefaults(t *testing.T) {
	plan := mustLoad(t, `
[[interface]]
name = "eth0"
bandwidth = "100mbit"

[[interface]]
name = "eth0"
direction = "ingress"
bandwidth = "20mbit"

[[interface]]
name = "uplink-number-1"
direction = "ingress"
shaper = "tbf"
bandwidth = "20mbit"

[tiers.basic]
rate = "2mbit"
`, "")
	d := plan.Daemon
	if d.Socket != DefaultSocket || d.StateDir != DefaultStateDir || d.Metrics != "" || d.SocketGroup != "" ||
		d.ReconcileInterval != 5*time.Second || d.UsersFile != "users.toml" || d.LogLevel != slog.LevelInfo {
		t.Errorf("daemon defaults: %+v", d)
	}
	if plan.UsersPath != "etc/users.toml" {
		t.Errorf("UsersPath %q, want etc/users.toml", plan.UsersPath)
	}
	p := plan.Policy
	if p.Interval != time.Second || p.Ramp != 2*time.Second || p.SmoothWindow != time.Second || p.QuotaInterval != time.Second || p.Location != time.Local {
		t.Errorf("policy defaults: %+v", p)
	}
	eg, in, tb := plan.Interfaces[0], plan.Interfaces[1], plan.Interfaces[2]
	if eg.Source != "etc/shaperd.toml:2:1" || in.Source != "etc/shaperd.toml:6:1" {
		t.Errorf("interface sources %q, %q", eg.Source, in.Source)
	}
	if eg.Shaper != ShaperHTB || eg.Direction != Egress || eg.Match != MatchDst || eg.IFB != "" {
		t.Errorf("egress defaults: %+v", eg)
	}
	if eg.DefaultTier != "" || eg.DefaultRate != eg.Bandwidth/100 || eg.DefaultCeil != eg.Bandwidth {
		t.Errorf("default class without default_tier: rate %v ceil %v", eg.DefaultRate, eg.DefaultCeil)
	}
	if in.Direction != Ingress || in.Match != MatchSrc || in.IFB != "ifb-eth0" {
		t.Errorf("ingress defaults: %+v", in)
	}
	if tb.IFB != "ifb-uplink-numb" || len(tb.IFB) != 15 || tb.Latency != DefaultLatency || tb.Burst != 0 {
		t.Errorf("tbf defaults: %+v", tb)
	}
	tier := plan.Tiers[0]
	if tier.Ceil != tier.Rate || tier.UploadRate != tier.Rate || tier.UploadCeil != tier.Rate ||
		tier.AggregateRate != 0 || tier.Quota != 0 || tier.QuotaPeriod != PeriodMonth {
		t.Errorf("tier defaults: %+v", tier)
	}
	if len(plan.Users) != 0 {
		t.Errorf("users from an empty file: %+v", plan.Users)
	}
}

// TestResolution checks how upload values, aggregates and schedules are
// derived from what a tier sets.
func TestResolution(t *testing.T) {
	plan := mustLoad(t, `
[policy]
timezone = "UTC"

[[interface]]
name = "lan0"
bandwidth = "1gbit"
default_tier = "b"

[tiers.b]
rate = "10mbit"
ceil = "20mbit"
upload_rate = "30mbit"
aggregate_rate = "100mbit"
quota = "20GB"
quota_period = "week"
over_quota_rate = "1mbit"
[[tiers.b.schedule]]
days = ["sat", "sun"]
from = "22:00"
to = "02:00"
rate = "40mbit"

[tiers.a]
rate = "10mbit"
ceil = "20mbit"
[[tiers.a.schedule]]
days = ["all"]
from = "08:00"
to = "24:00"
ceil = "50mbit"
`, `user = [
  { name = "x", tier = "a", addresses = ["198.18.0.0/31", "2001:db8::1"], rate = "5mbit" },
  { name = "y", tier = "b", addresses = ["198.18.0.2"], upload_rate = "1mbit", upload_ceil = "2mbit" },
]`)
	if plan.Policy.Location != time.UTC {
		t.Errorf("timezone: %v", plan.Policy.Location)
	}
	if plan.Tiers[0].Name != "a" || plan.Tiers[1].Name != "b" {
		t.Fatalf("tiers not sorted by name: %v, %v", plan.Tiers[0].Name, plan.Tiers[1].Name)
	}
	lan := plan.Interfaces[0]
	if lan.DefaultTier != "b" || lan.DefaultRate != 0 || lan.DefaultCeil != 0 {
		t.Errorf("default_tier without default_rate: %+v", lan)
	}
	a, b := plan.Tiers[0], plan.Tiers[1]
	// b sets upload_rate above its ceil: upload_ceil defaults to the larger.
	if b.UploadRate != 30*tbf.Mbit || b.UploadCeil != 30*tbf.Mbit {
		t.Errorf("b upload: %v/%v", b.UploadRate, b.UploadCeil)
	}
	if b.AggregateRate != 100*tbf.Mbit || b.AggregateCeil != 100*tbf.Mbit ||
		b.AggregateUploadRate != b.AggregateRate || b.AggregateUploadCeil != b.AggregateCeil {
		t.Errorf("b aggregate: %+v", b)
	}
	if b.Quota != 20*tbf.Gibibyte || b.QuotaPeriod != PeriodWeek || b.OverQuotaRate != tbf.Mbit || b.OverQuotaCeil != tbf.Mbit {
		t.Errorf("b quota: %+v", b)
	}
	// b's schedule raises rate above the tier's ceil: ceil follows; the
	// upload rate is the tier's own (it sets upload_rate).
	if s := b.Schedules[0]; s.Rate != 40*tbf.Mbit || s.Ceil != 40*tbf.Mbit || s.UploadRate != 30*tbf.Mbit || s.UploadCeil != 40*tbf.Mbit {
		t.Errorf("b schedule: %+v", s)
	}
	// a sets no upload values: its schedule's upload follows the scheduled download.
	if s := a.Schedules[0]; s.Rate != 10*tbf.Mbit || s.Ceil != 50*tbf.Mbit || s.UploadRate != 10*tbf.Mbit || s.UploadCeil != 50*tbf.Mbit || s.Days != 0x7f || s.To != 24*60 {
		t.Errorf("a schedule: %+v", s)
	}
	x, y := plan.Users[0], plan.Users[1]
	if x.Source != "etc/users.toml:2:3" || y.Source != "etc/users.toml:3:3" || b.Source != "etc/shaperd.toml:10:1" {
		t.Errorf("sources: %q %q %q", x.Source, y.Source, b.Source)
	}
	if x.Rate != 5*tbf.Mbit || x.Ceil != 0 || x.UploadRate != 0 {
		t.Errorf("user x overrides: %+v", x)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("198.18.0.0/31"), netip.MustParsePrefix("2001:db8::1/128")}; len(x.Prefixes) != 2 || x.Prefixes[0] != want[0] || x.Prefixes[1] != want[1] {
		t.Errorf("user x prefixes: %v", x.Prefixes)
	}
	if y.UploadRate != tbf.Mbit || y.UploadCeil != 2*tbf.Mbit || y.Rate != 0 {
		t.Errorf("user y overrides: %+v", y)
	}
	if r, c := b.Rates(Ingress); r != b.UploadRate || c != b.UploadCeil {
		t.Errorf("Rates(Ingress) = %v, %v", r, c)
	}
	if _, ok := plan.Tier("nope"); ok {
		t.Errorf("Tier found a tier that does not exist")
	}
}

// TestAllErrorsAtOnce writes a config with problems in both files and
// checks that Check reports every one of them, sorted, with real paths.
func TestAllErrorsAtOnce(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "shaperd.toml")
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(main, `[daemon]
users_file = "people/u.toml"
[[interface]]
name = "lan0"
bandwidth = "1gbyte"
[tiers.gold]
rate = "10mbit"
ceil = "5mbit"
`)
	if err := os.Mkdir(filepath.Join(dir, "people"), 0o755); err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(dir, "people", "u.toml")
	write(users, `[[user]]
name = "alice"
tier = "silver"
addresses = ["198.18.0.1"]
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.0.1"]
`)
	errs := Check(main)
	want := []struct {
		file      string
		line, col int
		key       string
	}{
		{main, 5, 1, "interface[0].bandwidth"},
		{main, 8, 1, "tiers.gold.ceil"},
		{users, 3, 1, "user[0].tier"},
		{users, 6, 1, "user[1].name"},
		{users, 8, 14, "user[1].addresses[0]"},
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), (&Errors{List: errs}).Error())
	}
	for i, w := range want {
		e := errs[i]
		if e.File != w.file || e.Line != w.line || e.Col != w.col || e.Key != w.key {
			t.Errorf("error %d: got %s:%d:%d %s, want %s:%d:%d %s", i, e.File, e.Line, e.Col, e.Key, w.file, w.line, w.col, w.key)
		}
		if prefix := e.File + ":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Col) + ": " + e.Key + ": "; !strings.HasPrefix(e.Error(), prefix) {
			t.Errorf("error %d formats as %q, want prefix %q", i, e.Error(), prefix)
		}
	}
	_, err := Load(main)
	var all *Errors
	if !errors.As(err, &all) || len(all.List) != len(want) {
		t.Errorf("Load: %v", err)
	}
	if Check("../../configs/shaperd.toml") != nil {
		t.Errorf("Check reports errors for the example config")
	}
	if errs := Check(filepath.Join(dir, "missing.toml")); len(errs) != 1 || errs[0].Line != 0 || !strings.HasSuffix(errs[0].File, "missing.toml") {
		t.Errorf("missing file: %v", errs)
	}
}

func TestFormatErrorsCaps(t *testing.T) {
	errs := make([]Error, 250)
	for i := range errs {
		errs[i] = Error{File: "f", Line: i + 1, Col: 1, Msg: "bad"}
	}
	got := FormatErrors(errs, MaxPrinted)
	if len(got) != MaxPrinted+1 || got[0] != "f:1:1: bad" || got[MaxPrinted] != "... and 150 more errors" {
		t.Errorf("FormatErrors(250, %d): %d lines, first %q, last %q", MaxPrinted, len(got), got[0], got[len(got)-1])
	}
	if got := FormatErrors(errs[:3], MaxPrinted); len(got) != 3 {
		t.Errorf("3 errors: %q", got)
	}
	if got := FormatErrors(errs, 0); len(got) != 250 {
		t.Errorf("limit 0: %d lines, want all 250", len(got))
	}
}
