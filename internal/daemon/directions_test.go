package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// set-rate --direction download changes alice's egress class only; a
// later upload-only override changes only the ingress one; status labels
// each row with its direction and device; iface:lan0/upload sets only the
// ingress bandwidth and status shows it as an override of the plan.
func TestSetRateDirection(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, dir := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	rate := 5 * tbf.Mbit
	resp, err := d.setRate(control.SetRateRequest{Target: "alice", Rate: rate, Direction: "download", Ramp: control.DurationPtr(0)}, nil)
	if err != nil {
		t.Fatalf("set-rate: %v", err)
	}
	if resp.Direction != "download" {
		t.Errorf("response direction %q", resp.Direction)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "alice"); c.Rate != rate || c.Ceil != rate {
		t.Errorf("download class %v/%v, want 5mbit/5mbit", c.Rate, c.Ceil)
	}
	if c := userClass(t, d, k, "lan0/ingress", "ifb-lan0", "alice"); c.Rate != 50*tbf.Mbit || c.Ceil != 100*tbf.Mbit {
		t.Errorf("upload class %v/%v changed by a download-only override; want gold's 50mbit/100mbit", c.Rate, c.Ceil)
	}
	up := 2 * tbf.Mbit
	if _, err := d.setRate(control.SetRateRequest{Target: "alice", Rate: up, Direction: "upload", Ramp: control.DurationPtr(0)}, nil); err != nil {
		t.Fatal(err)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "alice"); c.Rate != rate {
		t.Errorf("download class %v after an upload override, want 5mbit", c.Rate)
	}
	if c := userClass(t, d, k, "lan0/ingress", "ifb-lan0", "alice"); c.Rate != up {
		t.Errorf("upload class %v, want 2mbit", c.Rate)
	}
	for _, u := range d.status().Users {
		if u.Name != "alice" {
			continue
		}
		want := map[string]string{"download": "lan0", "upload": "ifb-lan0"}[u.Direction]
		if want == "" || u.Device != want {
			t.Errorf("alice row: direction %q device %q", u.Direction, u.Device)
		}
	}
	// iface:lan0/upload: only the ingress side, shown against the plan.
	if _, err := d.setRate(control.SetRateRequest{Target: "iface:lan0/upload", Rate: 80 * tbf.Mbit, Ramp: control.DurationPtr(0)}, nil); err != nil {
		t.Fatal(err)
	}
	for _, is := range d.status().Interfaces {
		switch is.Direction {
		case "ingress":
			if is.EffectiveBandwidth != 80*tbf.Mbit || is.Override == nil || is.Override.Direction != "upload" {
				t.Errorf("ingress: effective %v override %+v, want 80mbit from iface:lan0 upload", is.EffectiveBandwidth, is.Override)
			}
		default:
			if is.EffectiveBandwidth != 0 || is.Override != nil {
				t.Errorf("egress changed by an upload override: %v %+v", is.EffectiveBandwidth, is.Override)
			}
		}
	}
	// A direction the target names differently is refused.
	_, err = d.setRate(control.SetRateRequest{Target: "iface:lan0/upload", Rate: rate, Direction: "download"}, nil)
	var br *control.BadRequestError
	if !errors.As(err, &br) {
		t.Errorf("conflicting directions: %v, want a bad request", err)
	}
	// Restart: every override is back with its direction.
	d2, _ := newTestDaemon(t, k, clk, dir)
	if got := len(d2.overrideList(clk.Now())); got != 3 {
		t.Errorf("after restart %d overrides, want 3: %+v", got, d2.overrideList(clk.Now()))
	}
}

// A tier override without --direction scales uploads by the tier's
// upload/download ratio; the answer says so and the bound of the upload
// side is checked with the scaled rates.
func TestSetRateBothScalesUploads(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	dir := t.TempDir()
	writeConfig(t, dir, strings.Replace(testConfig, "[tiers.gold]\nrate = \"50mbit\"\nceil = \"100mbit\"",
		"[tiers.gold]\nrate = \"50mbit\"\nceil = \"100mbit\"\nupload_rate = \"10mbit\"\nupload_ceil = \"20mbit\"", 1), testUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	ceil := 40 * tbf.Mbit
	resp, err := d.setRate(control.SetRateRequest{Target: "tier:gold", Rate: 30 * tbf.Mbit, Ceil: &ceil, Ramp: control.DurationPtr(0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.UploadRate != 6*tbf.Mbit || resp.UploadCeil != 8*tbf.Mbit {
		t.Errorf("answer's upload %v/%v, want 6mbit/8mbit", resp.UploadRate, resp.UploadCeil)
	}
	if c := userClass(t, d, k, "lan0/ingress", "ifb-lan0", "alice"); c.Rate != 6*tbf.Mbit || c.Ceil != 8*tbf.Mbit {
		t.Errorf("upload class %v/%v, want 6mbit/8mbit", c.Rate, c.Ceil)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "alice"); c.Rate != 30*tbf.Mbit || c.Ceil != 40*tbf.Mbit {
		t.Errorf("download class %v/%v, want 30mbit/40mbit", c.Rate, c.Ceil)
	}
	// 300mbit down is within lan0's 1gbit; scaled to 60mbit up, within
	// the 100mbit ingress: accepted although 300mbit > 100mbit.
	if _, err := d.setRate(control.SetRateRequest{Target: "alice", Rate: 300 * tbf.Mbit}, nil); err != nil {
		t.Errorf("alice 300mbit (60mbit up): %v", err)
	}
	// 600mbit scales to 120mbit up: above the ingress bandwidth.
	if _, err := d.setRate(control.SetRateRequest{Target: "alice", Rate: 600 * tbf.Mbit}, nil); err == nil ||
		!strings.Contains(err.Error(), "upload side of alice") {
		t.Errorf("alice 600mbit (120mbit up): %v, want a refusal naming the upload side", err)
	}
}

// Overrides are listed with who set them (the peer's uid) and when, also
// after a restart; status shows a tier override on the tier and on the
// default class; clear of a target with nothing set says so.
func TestOverridesVisible(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, dir := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	uid := uint32(1234)
	ceil := 9 * tbf.Mbit
	resp, err := d.setRate(control.SetRateRequest{Target: "tier:bronze", Rate: 7 * tbf.Mbit, Ceil: &ceil, For: control.DurationPtr(3600e9)}, &uid)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.DefaultOf) != 2 {
		t.Errorf("default_of %v, want both lan0 directions", resp.DefaultOf)
	}
	list := d.overrideList(clk.Now())
	if len(list) != 1 || list[0].Target != "tier:bronze" || list[0].SetBy == nil || *list[0].SetBy != uid ||
		!list[0].Set.Equal(clk.Now()) || list[0].Until == nil || list[0].Direction != "both" {
		t.Fatalf("overrides %+v", list)
	}
	for _, is := range d.status().Interfaces {
		var bronze *control.TierStatus
		for i := range is.Tiers {
			if is.Tiers[i].Name == "bronze" {
				bronze = &is.Tiers[i]
			}
		}
		if is.DefaultTier != "bronze" || bronze == nil || bronze.Override == nil || bronze.EffectiveRate != 7*tbf.Mbit {
			t.Errorf("%s %s: default tier %q, bronze %+v", is.Name, is.Direction, is.DefaultTier, bronze)
		}
	}
	d2, _ := newTestDaemon(t, k, clk, dir)
	if l := d2.overrideList(clk.Now()); len(l) != 1 || l[0].SetBy == nil || *l[0].SetBy != uid || !l[0].Set.Equal(list[0].Set) {
		t.Errorf("after restart: %+v", l)
	}
	cr, err := d2.clear(control.ClearRequest{Target: "alice"})
	if err != nil || len(cr.Cleared) != 0 {
		t.Errorf("clear of nothing: %+v, %v", cr, err)
	}
	cr, err = d2.clear(control.ClearRequest{Target: "tier:bronze", Direction: "upload"})
	if err != nil || len(cr.Cleared) != 0 || !strings.Contains(cr.Note, "both directions") {
		t.Errorf("clear upload of a both override: %+v, %v", cr, err)
	}
	cr, err = d2.clear(control.ClearRequest{Target: "tier:bronze"})
	if err != nil || len(cr.Cleared) != 1 || cr.Cleared[0].Rate != 7*tbf.Mbit {
		t.Errorf("clear: %+v, %v", cr, err)
	}
}

// iface:NAME/upload of an interface shaped only for downloads is refused
// naming the missing side; an unknown interface stays a 404.
func TestSetRateIfaceWithoutThatSide(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	dir := t.TempDir()
	// lan0 egress only: drop the ingress entry.
	cfg := strings.Replace(testConfig, "[[interface]]\nname = \"lan0\"\ndirection = \"ingress\"\nifb = \"ifb-lan0\"\nbandwidth = \"100mbit\"\ndefault_tier = \"bronze\"\n", "", 1)
	writeConfig(t, dir, cfg, testUsers)
	d, _ := newTestDaemon(t, k, clk, dir)
	_, err := d.setRate(control.SetRateRequest{Target: "iface:lan0/upload", Rate: tbf.Mbit}, nil)
	var br *control.BadRequestError
	if !errors.As(err, &br) || !strings.Contains(err.Error(), `interface "lan0" has no upload side`) {
		t.Errorf("iface:lan0/upload on an egress-only lan0: %v", err)
	}
	var nf *control.NotFoundError
	if _, err := d.setRate(control.SetRateRequest{Target: "iface:eth9/upload", Rate: tbf.Mbit}, nil); !errors.As(err, &nf) {
		t.Errorf("iface:eth9/upload: %v, want not found", err)
	}
}
