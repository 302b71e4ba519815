package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/control/controltest"
	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// set-rate --direction and iface:NAME/upload send the direction; the
// answer names it; a suffix and a flag that disagree, or an unknown
// direction, are usage errors that never reach the daemon.
func TestSetRateDirectionFlag(t *testing.T) {
	fake, sock := serve(t)
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "set-rate", "alice", "3mbit", "--direction", "download")
	if code != 0 || out != "alice: download rate 3mbit, ceil 3mbit, ramping over 2s, until cleared\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got := fake.SetRates[0].Direction; got != "download" {
		t.Errorf("request direction %q", got)
	}
	// Only alice's download row changed in the fake.
	st, _ := fake.Status(t.Context())
	for _, u := range st.Users {
		if u.Name == "alice" && (u.Direction == "download") != (u.EffectiveRate == 3*tbf.Mbit) {
			t.Errorf("alice %s: %v", u.Direction, u.EffectiveRate)
		}
	}
	if code, _, errOut := run(t, cli.Env{}, "--socket", sock, "set-rate", "iface:wan0/upload", "50mbit"); code != 0 {
		t.Errorf("iface:wan0/upload: %s", errOut)
	}
	calls := len(fake.CallLog())
	for _, args := range [][]string{
		{"set-rate", "alice", "3mbit", "--direction", "sideways"},
		{"set-rate", "iface:wan0/upload", "3mbit", "--direction", "download"},
		{"set-rate", "iface:wan0/left", "3mbit"},
		{"clear", "alice", "--direction", "up"},
	} {
		if code, _, errOut := run(t, cli.Env{}, append([]string{"--socket", sock}, args...)...); code != cli.ExitUsage {
			t.Errorf("%q: exit %d %s, want 2", args, code, errOut)
		}
	}
	if len(fake.CallLog()) != calls {
		t.Errorf("usage errors reached the daemon: %v", fake.CallLog()[calls:])
	}
}

// A tier override scaled on uploads says both rates; one that changes a
// default class says so instead of "(0 users: )".
func TestDescribeSetRateScaledAndDefault(t *testing.T) {
	sock := controltest.Serve(t, &scaledFake{Fake: controltest.Fake{State: controltest.Sample()}})
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "set-rate", "tier:guest", "30mbit", "--ceil", "40mbit", "--ramp", "0s")
	want := "tier:guest: download rate 30mbit, ceil 40mbit; upload rate 6mbit, ceil 8mbit (scaled by the tier's upload/download ratio), at once" +
		", until cleared (the default class (addresses of no user) of lan0 download, wan0 upload)\n"
	if code != 0 || out != want {
		t.Errorf("exit %d %s\nstdout %q\nwant   %q", code, errOut, out, want)
	}
}

// scaledFake answers set-rate as the daemon does for a tier override that
// scales uploads and sets default classes but no user's class.
type scaledFake struct{ controltest.Fake }

func (f *scaledFake) SetRate(_ context.Context, req control.SetRateRequest) (*control.SetRateResponse, error) {
	return &control.SetRateResponse{Target: req.Target, Users: []string{}, Rate: req.Rate, Ceil: *req.Ceil, Ramp: *req.Ramp,
		Direction: "both", UploadRate: 6 * tbf.Mbit, UploadCeil: 8 * tbf.Mbit, DefaultOf: []string{"lan0 download", "wan0 upload"}}, nil
}

// overrides lists every override with direction, rates, ramp, expiry, uid
// and time; --json gives the same; none is said plainly.
func TestOverridesCommand(t *testing.T) {
	fake, sock := serve(t)
	code, out, _ := run(t, cli.Env{}, "--socket", sock, "overrides")
	if code != 0 || out != "no overrides: every target follows its plan\n" {
		t.Errorf("no overrides: exit %d %q", code, out)
	}
	uid := uint32(1000)
	until := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	fake.Set = []control.OverrideStatus{
		{Target: "alice", Direction: "download", Rate: 3 * tbf.Mbit, Ceil: 3 * tbf.Mbit, Ramp: control.DurationPtr(0),
			Until: &until, Set: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), SetBy: &uid},
		{Target: "iface:lan0", Direction: "both", Rate: 80 * tbf.Mbit, Ceil: 80 * tbf.Mbit, Set: time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)},
	}
	code, out, _ = run(t, cli.Env{}, "--socket", sock, "overrides")
	lines := strings.Split(out, "\n")
	for _, want := range [][]string{
		{"TARGET", "DIRECTION", "RATE", "CEIL", "RAMP", "UNTIL", "SET", "BY", "SET", "AT", "SOURCE"},
		{"alice", "download", "3mbit", "3mbit", "0s", "2026-12-02", "14:00:00", "UTC", "uid", "1000", "2026-12-02", "12:00:00", "UTC", "local"},
		{"iface:lan0", "both", "80mbit", "80mbit", "default", "cleared", "-", "2026-12-02", "11:00:00", "UTC", "local"},
	} {
		if !hasRow(lines, want) {
			t.Errorf("no row %q in\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("exit %d", code)
	}
	code, out, _ = run(t, cli.Env{}, "--socket", sock, "overrides", "--json")
	var got control.OverridesResponse
	if code != 0 || jsonout.Decode([]byte(out), &got) != nil || len(got.Overrides) != 2 || *got.Overrides[0].SetBy != 1000 {
		t.Errorf("--json: exit %d %s", code, out)
	}
}

// reload prints the result the daemon applied and exits 1 when an
// interface is then failed or degraded (missing is not a failure).
func TestReloadResult(t *testing.T) {
	fake, sock := serve(t)
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	fake.Reloaded = &control.ReloadStatus{At: at, Result: control.ReloadOK, Interfaces: []control.InterfaceResult{
		{Name: "lan0", Direction: "egress", State: "ok"}, {Name: "lan9", Direction: "egress", State: "missing"}}}
	code, out, _ := run(t, cli.Env{}, "--socket", sock, "reload")
	if code != 0 || out != "configuration reloaded: ok, 2 interfaces\n  lan9 (egress): missing\n" {
		t.Errorf("ok reload: exit %d %q", code, out)
	}
	fake.Reloaded = &control.ReloadStatus{At: at, Result: control.ReloadDegraded, Interfaces: []control.InterfaceResult{
		{Name: "lan0", Direction: "egress", State: "ok"}, {Name: "wan0", Direction: "ingress", State: "degraded", Error: "kernel refused class 1:105 (user bob)"}}}
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "reload")
	if code != 1 || !strings.Contains(out, "wan0 (ingress): degraded: kernel refused class 1:105 (user bob)") ||
		errOut != "shaperctl: configuration reloaded, but wan0 (ingress) is degraded\n" {
		t.Errorf("degraded reload: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
}

// reload --allow-removals carries the confirmation to the daemon; a plain
// reload does not, and a refusal is printed with exit 1.
func TestReloadAllowRemovals(t *testing.T) {
	fake, sock := serve(t)
	fake.Reloaded = &control.ReloadStatus{Result: control.ReloadOK}
	if code, _, errOut := run(t, cli.Env{}, "--socket", sock, "reload", "--allow-removals"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := run(t, cli.Env{}, "--socket", sock, "reload"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if calls := fake.CallLog(); len(calls) != 2 || calls[0] != "reload --allow-removals" || calls[1] != "reload" {
		t.Errorf("calls %q, want the confirmation on the first reload only", calls)
	}
	msg := "users.toml: reload refused: it would remove all 850 users in force (a; b; c; d; e; and 845 more), more than daemon.max_reload_removals = \"50%\" allows"
	fake.ReloadErr = &control.ValidationError{Problems: []string{msg}}
	code, _, errOut := run(t, cli.Env{}, "--socket", sock, "reload")
	if code != 1 || !strings.Contains(errOut, msg) {
		t.Errorf("refused reload: exit %d, stderr %q", code, errOut)
	}
}

// quota reset USER resets and says what the usage was.
func TestQuotaReset(t *testing.T) {
	fake, sock := serve(t)
	fake.Usage = map[string]uint64{"carol": 10 << 30}
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "quota", "reset", "carol")
	if code != 0 || out != "carol: quota usage reset (was 10gb)\n" {
		t.Errorf("exit %d %q %s", code, out, errOut)
	}
	for _, args := range [][]string{{"quota"}, {"quota", "reset"}, {"quota", "reset", "tier:gold"}, {"quota", "show", "carol"}} {
		if code, _, _ := run(t, cli.Env{}, append([]string{"--socket", sock}, args...)...); code != cli.ExitUsage {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if code, _, errOut := run(t, cli.Env{}, "--socket", sock, "quota", "reset", "mallory"); code != 1 || !strings.Contains(errOut, "mallory") {
		t.Errorf("unknown user: exit %d %s", code, errOut)
	}
}

// status shows an interface override against the plan, a tier override on
// the tier, the default class's tier, and the last reload.
func TestStatusShowsOverridesAndReload(t *testing.T) {
	st := controltest.Sample()
	st.Interfaces[1].State = control.StateOK
	ov := &control.OverrideStatus{Target: "iface:lan0", Direction: "both", Rate: 80 * tbf.Mbit, Ceil: 80 * tbf.Mbit}
	st.Interfaces[0].Override, st.Interfaces[0].EffectiveBandwidth = ov, 80*tbf.Mbit
	st.Interfaces[0].Bandwidth = 300 * tbf.Mbit
	st.Interfaces[0].DefaultTier = "bronze"
	st.Interfaces[0].Tiers[0].Override = &control.OverrideStatus{Target: "tier:bronze", Direction: "both", Rate: 7 * tbf.Mbit, Ceil: 9 * tbf.Mbit}
	st.Interfaces[0].Tiers[0].EffectiveRate, st.Interfaces[0].Tiers[0].EffectiveCeil = 7*tbf.Mbit, 9*tbf.Mbit
	st.LastReload = &control.ReloadStatus{At: time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC), Result: control.ReloadOK}
	sock := controltest.Serve(t, &controltest.Fake{State: st})
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "status")
	if code != 0 {
		t.Errorf("every interface ok: exit %d %s", code, errOut)
	}
	for _, want := range []string{
		"80mbit (override; plan 300mbit)",
		"bronze (default class) 7mbit/9mbit (override; plan 5mbit/10mbit)",
		"last reload: ok at 2026-12-02 11:00:00 UTC\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// status shows a tier whose ceil is capped to a smaller interface's
// bandwidth, and the interface's capped classes, in text and JSON.
func TestStatusShowsCaps(t *testing.T) {
	st := controltest.Sample()
	st.Interfaces[1].State = control.StateOK
	st.Interfaces[0].Bandwidth = 50 * tbf.Mbit
	st.Interfaces[0].Tiers[0].Ceil = 100 * tbf.Mbit
	st.Interfaces[0].Tiers[0].CappedCeil = 50 * tbf.Mbit
	st.Interfaces[0].Capped = []string{"tier bronze: ceil 100mbit capped to the bandwidth 50mbit (2 users)"}
	sock := controltest.Serve(t, &controltest.Fake{State: st})
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "status")
	if code != 0 {
		t.Errorf("exit %d %s", code, errOut)
	}
	name := st.Interfaces[0].Name + " (" + st.Interfaces[0].Direction + ")"
	for _, want := range []string{
		"bronze " + st.Interfaces[0].Tiers[0].Rate.String() + "/100mbit (ceil capped to 50mbit)",
		name + ": tier bronze: ceil 100mbit capped to the bandwidth 50mbit (2 users)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = run(t, cli.Env{}, "--socket", sock, "status", "--json")
	for _, want := range []string{`"capped_ceil": 50000000`, `"capped": [`} {
		if !strings.Contains(out, want) {
			t.Errorf("status --json lacks %s:\n%s", want, out)
		}
	}
}
