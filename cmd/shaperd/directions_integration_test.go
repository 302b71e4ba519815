package main

import (
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestSetRateDirectionAsUnit: with shaperd running as the unit runs it,
// `set-rate u0 5mbit --direction download` changes u0's class on r-lan
// (downloads) and leaves its class on r-ifb (uploads) at the tier's
// 10mbit, in the kernel; iperf3 measures the new download rate; status and
// overrides show the direction, the device and who set it.
func TestSetRateDirectionAsUnit(t *testing.T) {
	u := newUnitLab(t, 3, daemonConfig, labUsers)
	u0 := u.Users4[0] // bronze: 10mbit/10mbit both ways

	out := u.mustCtl("set-rate", "u0", "5mbit", "--direction", "download", "--ramp", "0s")
	if !strings.Contains(out, "u0: download rate 5mbit, ceil 5mbit") {
		t.Errorf("set-rate output:\n%s", out)
	}
	if c := u.classOf("r-lan", u0); c.Rate != 5*tbf.Mbit || c.Ceil != 5*tbf.Mbit {
		t.Errorf("u0 download class (r-lan): %v/%v, want 5mbit/5mbit", c.Rate, c.Ceil)
	}
	if c := u.classOf("r-ifb", u0); c.Rate != 10*tbf.Mbit || c.Ceil != 10*tbf.Mbit {
		t.Errorf("u0 upload class (r-ifb): %v/%v, want bronze's 10mbit/10mbit untouched", c.Rate, c.Ceil)
	}
	got := measureDownload(t, u.RouterLab, u0, 5*tbf.Mbit)
	t.Logf("u0 download after set-rate --direction download: %.2f Mbit/s (want ~5)", got/1e6)
	if !within(got, 5*tbf.Mbit, 0.8, 1.1) {
		t.Errorf("u0 download %.2f Mbit/s, want ~5", got/1e6)
	}

	// The upload side keeps bronze's 10mbit (measured on its own, not
	// alongside a download).
	up := u.Upload(t, u0, 2)
	t.Logf("u0 upload after set-rate --direction download: %.2f Mbit/s (want ~10)", up/1e6)
	if !within(up, 10*tbf.Mbit, 0.8, 1.1) {
		t.Errorf("u0 upload %.2f Mbit/s, want ~10 (the download-only override must not touch it)", up/1e6)
	}

	rows := map[string]control.UserStatus{}
	for _, us := range u.status().Users {
		if us.Name == "u0" {
			rows[us.Direction+" "+us.Device] = us
		}
	}
	if d, ok := rows["download r-lan"]; !ok || d.EffectiveRate != 5*tbf.Mbit {
		t.Errorf("status: u0 download row on r-lan: %+v (rows %v)", d, rows)
	}
	if up, ok := rows["upload r-ifb"]; !ok || up.EffectiveRate != 10*tbf.Mbit {
		t.Errorf("status: u0 upload row on r-ifb: %+v (rows %v)", up, rows)
	}
	// r-x0 does not exist in this lab: status prints everything and exits
	// 1 naming it (scripts rely on the exit code).
	code, text := u.shaperctl("status")
	if !strings.Contains(text, "DIRECTION") || code != 1 || !strings.Contains(text, "not every interface is ok: r-x0 (egress) is missing") {
		t.Errorf("status: exit %d, want 1 naming the missing r-x0\n%s", code, text)
	}

	var ov control.OverridesResponse
	if err := jsonout.Decode([]byte(u.mustCtl("overrides", "--json")), &ov); err != nil {
		t.Fatal(err)
	}
	if len(ov.Overrides) != 1 || ov.Overrides[0].Target != "u0" || ov.Overrides[0].Direction != "download" ||
		ov.Overrides[0].SetBy == nil || *ov.Overrides[0].SetBy != 0 {
		t.Errorf("overrides: %+v, want u0 download set by uid 0", ov.Overrides)
	}
	if out := u.mustCtl("clear", "u0", "--direction", "upload"); !strings.Contains(out, "nothing to clear") {
		t.Errorf("clear of the upload side with nothing set: %q", out)
	}
	u.mustCtl("clear", "u0")
	if c := u.classOf("r-lan", u0); c.Rate != 10*tbf.Mbit {
		t.Errorf("u0 download after clear: %v, want 10mbit", c.Rate)
	}
}
