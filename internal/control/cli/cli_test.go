package cli_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/control/controltest"
	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// run runs shaperctl with args against socket and returns the exit code,
// stdout and stderr.
func run(t *testing.T, env cli.Env, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), args, &out, &errOut, env)
	return code, out.String(), errOut.String()
}

// serve starts a fake daemon and returns it with its socket.
func serve(t *testing.T) (*controltest.Fake, string) {
	fake := &controltest.Fake{State: controltest.Sample(), DefaultRamp: 2 * time.Second}
	return fake, controltest.Serve(t, fake)
}

func TestUsageErrors(t *testing.T) {
	fake, sock := serve(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "shaperctl: no command given\nRun 'shaperctl help' for usage."},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"--bogus", "status"}, "flag provided but not defined: --bogus"},
		{[]string{"status", "alice", "extra"}, `shaperctl status: unexpected argument "extra"`},
		{[]string{"status", "--yaml"}, "flag provided but not defined: --yaml"},
		{[]string{"set-rate", "alice"}, "expected TARGET and RATE, got 1 argument\nRun 'shaperctl help set-rate' for usage."},
		{[]string{"set-rate", "alice", "3mbit", "4mbit"}, "expected TARGET and RATE, got 3 arguments"},
		{[]string{"set-rate", "alice", "3"}, "missing unit"},
		{[]string{"set-rate", "alice", "0mbit"}, "rate 0mbit for alice is below the minimum 8bit"},
		{[]string{"set-rate", "alice", "1bit"}, "rate 1bit for alice is below the minimum 8bit"},
		{[]string{"set-rate", "alice", "0.5bps"}, "rate 0.5bps (4bit) for alice is below the minimum 8bit"},
		{[]string{"set-rate", "alice", "3mbit", "--ceil", "2mbit"}, "ceil 2mbit is below rate 3mbit for alice"},
		{[]string{"set-rate", "alice", "3mbit", "--ceil", "fast"}, `invalid value "fast" for flag --ceil`},
		{[]string{"set-rate", "alice", "3mbit", "--ramp", "soon"}, "use Go syntax"},
		{[]string{"set-rate", "alice", "3mbit", "--ramp", "-1s"}, "ramp -1s for alice: must not be negative"},
		{[]string{"set-rate", "alice", "3mbit", "--for", "0s"}, "for 0s for alice: must be positive"},
		{[]string{"set-rate", "alice", "3mbit", "--ramp", "876000h"}, "alice: --ramp 876000h0m0s: must be from 0s (at once) to 24h"},
		{[]string{"set-rate", "alice", "3mbit", "--ramp", "24h1s"}, "must be from 0s (at once) to 24h"},
		{[]string{"set-rate", "alice", "3mbit", "--for", "999999h"}, "alice: --for 999999h0m0s: must be above 0 and at most 8760h (365 days)"},
		{[]string{"set-rate", "alice", "3mbit", "--ramp", "1h", "--for", "8761h"}, "at most 8760h (365 days)"},
		{[]string{"set-rate", "tier:", "3mbit"}, "empty name"},
		{[]string{"set-rate", "alice", "3mbit", "--ramp"}, "flag needs an argument: --ramp"},
		{[]string{"clear"}, "expected one TARGET, got 0 arguments"},
		{[]string{"clear", "group:x"}, "use a user name, tier:NAME, node:NAME or iface:NAME"},
		{[]string{"reload", "now"}, `unexpected argument "now"`},
		{[]string{"top", "--iterations", "-1"}, "--iterations must not be negative"},
		{[]string{"top", "--interval", "0s"}, "--interval must be positive"},
		{[]string{"help", "frobnicate"}, `no command "frobnicate"`},
		{[]string{"status", "--socket"}, "flag needs an argument: --socket"},
	} {
		code, out, errOut := run(t, cli.Env{}, append([]string{"--socket", sock}, tc.args...)...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tc.msg) || out != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 2 with %q", tc.args, code, errOut, out, tc.msg)
		}
	}
	if calls := fake.CallLog(); len(calls) != 0 {
		t.Errorf("usage errors reached the daemon: %v", calls)
	}
}

func TestSetRateFlagsAfterPositionals(t *testing.T) {
	fake, sock := serve(t)
	code, out, errOut := run(t, cli.Env{}, "set-rate", "alice", "3mbit", "--ramp", "0s", "--for", "1h", "--socket", sock)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := "alice: rate 3mbit, ceil 3mbit, at once, until 2026-12-02 13:00:00 UTC\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	req := fake.SetRates[0]
	if req.Target != "alice" || req.Rate != 3*tbf.Mbit || req.Ceil == nil || *req.Ceil != 3*tbf.Mbit ||
		req.Ramp == nil || *req.Ramp != 0 || req.For == nil || req.For.Std() != time.Hour {
		t.Errorf("daemon got %+v", req)
	}

	// Flags before, between and after; no --ramp means the policy's default.
	code, out, errOut = run(t, cli.Env{}, "--socket", sock, "set-rate", "--ceil=5mbit", "tier:gold", "3mbit")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := "tier:gold: rate 3mbit, ceil 5mbit, ramping over 2s, until cleared (1 user: alice)\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	req = fake.SetRates[1]
	if *req.Ceil != 5*tbf.Mbit || req.Ramp != nil || req.For != nil {
		t.Errorf("daemon got %+v, want ceil 5mbit, no ramp, no for", req)
	}

	code, out, _ = run(t, cli.Env{}, "set-rate", "bob", "--json", "--socket="+sock, "1.5mbit")
	var resp control.SetRateResponse
	if code != 0 || jsonout.Decode([]byte(out), &resp) != nil || resp.Rate != 1500*tbf.Kbit || resp.Ceil != 1500*tbf.Kbit {
		t.Errorf("--json: exit %d, %q", code, out)
	}
}

func TestStatusTable(t *testing.T) {
	_, sock := serve(t)
	// wan0 is failed: status prints everything and exits 1, naming it.
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "status")
	if code != 1 || errOut != "shaperctl: not every interface is ok: wan0 (ingress) is failed\n" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	if lines[0] != "shaperd status at 2026-12-02 12:00:00 UTC: 2 interfaces, 3 users" {
		t.Errorf("header %q", lines[0])
	}
	// Each row's fields, in column order.
	for _, want := range [][]string{
		{"INTERFACE", "DEVICE", "SHAPER", "DIRECTION", "BANDWIDTH", "STATE", "USERS", "TIERS"},
		{"lan0", "lan0", "htb", "egress", "1gbit", "ok", "3", "bronze", "5mbit/10mbit,", "gold", "50mbit/100mbit,", "silver", "20mbit/40mbit"},
		{"wan0", "ifb-wan0", "htb", "ingress", "100mbit", "failed", "1", "gold", "10mbit/20mbit"},
		{"wan0", "(ingress):", "error:", "ifb-wan0:", "add", "leaf", "qdisc", "fq_codel", "of", "class", "1:100", "(user", "alice):", "Specified", "qdisc", "kind", "is", "unknown"},
		{"USER", "INTERFACE", "DIRECTION", "DEVICE", "TIER", "RATE/CEIL", "EFFECTIVE", "THROUGHPUT", "BYTES", "DROPS", "DELAY", "REASON"},
		{"alice", "lan0", "download", "lan0", "gold", "50mbit/100mbit", "50mbit/60mbit", "9.87mbit", "1.15gb", "12", "48ms", "schedule", "peak"},
		{"alice", "wan0", "upload", "ifb-wan0", "gold", "10mbit/20mbit", "10mbit/20mbit", "1.5mbit", "96.5kb", "0", "2.3ms", "tier"},
		{"bob", "lan0", "download", "lan0", "silver", "20mbit/40mbit", "3mbit/38mbit", "35.1mbit", "4.66gb", "3456", "12ms", "override", "until", "12:00;", "ramping", "40mbit", "->", "3mbit", "until", "12:00:02"},
		{"carol", "lan0", "download", "lan0", "bronze", "5mbit/10mbit", "1mbit/1mbit", "999kbit", "10gb", "0", "-", "quota", "exceeded;", "quota", "10gb", "of", "10gb", "until", "2026-12-03", "12:00"},
	} {
		if !hasRow(lines, want) {
			t.Errorf("no row %q in\n%s", want, out)
		}
	}
	// Columns line up: every user row starts its RATE/CEIL at the same offset.
	col := strings.Index(lines[indexOf(lines, "USER")], "RATE/CEIL")
	for _, l := range lines[indexOf(lines, "USER")+1:] {
		if l != "" && (len(l) < col || l[col-2:col] != "  ") {
			t.Errorf("row not aligned at column %d: %q", col, l)
		}
	}
}

func hasRow(lines []string, want []string) bool {
	for _, l := range lines {
		if reflect.DeepEqual(strings.Fields(l), want) {
			return true
		}
	}
	return false
}

func indexOf(lines []string, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	return -1
}

func TestStatusJSON(t *testing.T) {
	fake, sock := serve(t)
	code, out, errOut := run(t, cli.Env{}, "status", "--json", "--socket", sock)
	if code != 1 || !strings.Contains(errOut, "wan0 (ingress) is failed") { // JSON printed, exit 1 all the same
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got control.Status
	if err := jsonout.Decode([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	want, _ := fake.Status(context.Background())
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("got %+v\nwant %+v", got, *want)
	}
	if !strings.Contains(out, `"effective_ceil": 60000000`) || !strings.Contains(out, `"direction": "upload"`) || !strings.Contains(out, `"device": "ifb-wan0"`) {
		t.Errorf("rates not integers in bit/s in %s", out)
	}
}

func TestSocketFromEnvironment(t *testing.T) {
	_, sock := serve(t)
	env := cli.Env{Getenv: func(k string) string {
		if k == "SHAPERD_SOCKET" {
			return sock
		}
		return ""
	}}
	if code, _, errOut := run(t, env, "reload"); code != 0 {
		t.Errorf("SHAPERD_SOCKET not used: exit %d %s", code, errOut)
	}
	// --socket wins over the environment.
	missing := filepath.Join(t.TempDir(), "none.sock")
	code, _, errOut := run(t, env, "--socket", missing, "reload")
	want := "shaperctl: cannot reach shaperd at " + missing + ": is the daemon running? (systemctl status shaperd)"
	if code != 1 || !strings.HasPrefix(errOut, want) {
		t.Errorf("exit %d, stderr %q, want 1 with %q", code, errOut, want)
	}
}

func TestDaemonErrors(t *testing.T) {
	fake, sock := serve(t)
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "set-rate", "mallory", "3mbit")
	if code != 1 || out != "" || !strings.Contains(errOut, `unknown target "mallory"`) || !strings.Contains(errOut, "'shaperctl status' lists them") {
		t.Errorf("unknown target: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = run(t, cli.Env{}, "--socket", sock, "clear", "iface:eth9")
	if code != 1 || !strings.Contains(errOut, `unknown target "iface:eth9"`) {
		t.Errorf("clear unknown: exit %d, stderr %q", code, errOut)
	}
	fake.ReloadErr = &control.ValidationError{Problems: []string{`shaperd.toml:12:8: unknown tier "platnum"`}}
	code, _, errOut = run(t, cli.Env{}, "--socket", sock, "reload")
	if code != 1 || !strings.Contains(errOut, "the old one stays in force") || !strings.Contains(errOut, "\n  shaperd.toml:12:8: unknown tier \"platnum\"") {
		t.Errorf("refused reload: exit %d, stderr %q", code, errOut)
	}
	fake.ReloadErr = nil
	code, out, _ = run(t, cli.Env{}, "--socket", sock, "reload")
	if code != 0 || out != "configuration reloaded: ok, 0 interfaces\n" {
		t.Errorf("reload: exit %d, stdout %q", code, out)
	}
	// Nothing set: said so, exit 0.
	code, out, _ = run(t, cli.Env{}, "--socket", sock, "clear", "tier:gold")
	if code != 0 || out != "tier:gold: nothing to clear: no run-time change is set\n" {
		t.Errorf("clear of nothing: exit %d, stdout %q", code, out)
	}
	if code, _, errOut := run(t, cli.Env{}, "--socket", sock, "set-rate", "tier:gold", "30mbit"); code != 0 {
		t.Fatalf("set-rate: %s", errOut)
	}
	code, out, _ = run(t, cli.Env{}, "--socket", sock, "clear", "tier:gold")
	if code != 0 || out != "tier:gold: run-time changes cleared (both 30mbit/30mbit); back to its plan\n" {
		t.Errorf("clear: exit %d, stdout %q", code, out)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "set-rate"}, {"set-rate", "-h"}, {"set-rate", "alice", "--help"}} {
		code, out, errOut := run(t, cli.Env{}, args...)
		if code != 0 || !strings.HasPrefix(out, "Usage: shaperctl set-rate TARGET RATE") || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, _ := run(t, cli.Env{}, args...)
		if code != 0 || !strings.Contains(out, "Commands:") || !strings.Contains(out, "set-rate") {
			t.Errorf("%q: exit %d, stdout %q", args, code, out)
		}
	}
	for _, cmd := range []string{"status", "clear", "reload", "top", "overrides", "quota"} {
		if code, out, _ := run(t, cli.Env{}, "help", cmd); code != 0 || !strings.HasPrefix(out, "Usage: shaperctl "+cmd) {
			t.Errorf("help %s: exit %d, %q", cmd, code, out)
		}
	}
	// The help says the rule for a change without --direction, and that
	// status's exit code reflects the interfaces.
	_, out, _ := run(t, cli.Env{}, "help", "set-rate")
	if !strings.Contains(out, "--direction DIR") || !strings.Contains(out, "scaled by its tier's own upload/download ratio") {
		t.Errorf("help set-rate lacks the direction rule:\n%s", out)
	}
	_, out, _ = run(t, cli.Env{}, "help", "status")
	if !strings.Contains(out, "1 when one is not") {
		t.Errorf("help status lacks the exit status:\n%s", out)
	}
}

// now returns a channel that fires at once: top refreshes without waiting.
func now(time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

// never returns a channel that never fires.
func never(time.Duration) <-chan time.Time { return nil }

func TestTopIterationsPlain(t *testing.T) {
	fake, sock := serve(t)
	var intervals []time.Duration
	env := cli.Env{After: func(d time.Duration) <-chan time.Time { intervals = append(intervals, d); return now(d) }}
	code, out, errOut := run(t, env, "top", "--iterations", "2", "--socket", sock)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "shaperd top at 12:00:00: 3 users, total 47.5mbit\n"); n != 2 {
		t.Errorf("%d snapshots, want 2:\n%s", n, out)
	}
	if strings.Contains(out, "\x1b[") || strings.Contains(out, "q quits") {
		t.Errorf("terminal control in plain output: %q", out)
	}
	if calls := fake.CallLog(); !reflect.DeepEqual(calls, []string{"top", "top"}) { // fresh counters each refresh
		t.Errorf("daemon calls %v", calls)
	}
	if !reflect.DeepEqual(intervals, []time.Duration{time.Second}) {
		t.Errorf("waited %v, want one 1s wait between two snapshots", intervals)
	}
	// Heaviest first.
	snap := strings.Split(out, "\n\n")[1]
	var order []string
	for _, l := range strings.Split(snap, "\n")[1:] {
		if f := strings.Fields(l); len(f) > 5 {
			order = append(order, f[0]+"/"+f[1]+"/"+f[5])
		}
	}
	want := []string{"bob/lan0/35.1mbit", "alice/lan0/9.87mbit", "alice/wan0/1.5mbit", "carol/lan0/999kbit"}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("order %v, want %v\n%s", order, want, out)
	}
	if !hasRow(strings.Split(out, "\n"), []string{"bob", "lan0", "download", "lan0", "silver", "35.1mbit", "38mbit", "92%", "4.66gb", "3456", "12ms"}) {
		t.Errorf("bob's row (throughput, effective ceil, %%ceil, bytes, drops, delay) missing:\n%s", out)
	}
}

func TestTopSort(t *testing.T) {
	_, sock := serve(t)
	for _, c := range []struct {
		key  string
		want []string
	}{
		{"delay", []string{"alice/lan0/48ms", "bob/lan0/12ms", "alice/wan0/2.3ms", "carol/lan0/-"}},
		{"drops", []string{"bob/lan0/12ms", "alice/lan0/48ms", "alice/wan0/2.3ms", "carol/lan0/-"}},
		{"name", []string{"alice/lan0/48ms", "alice/wan0/2.3ms", "bob/lan0/12ms", "carol/lan0/-"}},
	} {
		code, out, errOut := run(t, cli.Env{}, "top", "--once", "--sort", c.key, "--socket", sock)
		if code != 0 {
			t.Fatalf("--sort %s: exit %d: %s", c.key, code, errOut)
		}
		var order []string
		for _, l := range strings.Split(strings.Split(out, "\n\n")[1], "\n")[1:] {
			if f := strings.Fields(l); len(f) == 11 {
				order = append(order, f[0]+"/"+f[1]+"/"+f[10])
			}
		}
		if !reflect.DeepEqual(order, c.want) {
			t.Errorf("--sort %s: order %v, want %v\n%s", c.key, order, c.want, out)
		}
	}
	for _, args := range [][]string{{"--sort", "latency"}, {"--nodes", "--sort", "delay"}} {
		code, _, errOut := run(t, cli.Env{}, append([]string{"top", "--once", "--socket", sock}, args...)...)
		if code != 2 || !strings.Contains(errOut, "--sort") {
			t.Errorf("top %v: exit %d, %q; want 2 and an error naming --sort", args, code, errOut)
		}
	}
}

func TestTopTerminalQuitsOnQ(t *testing.T) {
	_, sock := serve(t)
	restored := false
	keys, press := io.Pipe()
	env := cli.Env{
		Terminal: true,
		Stdin:    keys,
		Cbreak:   func() (func(), error) { return func() { restored = true }, nil },
		Rows:     func() int { return 6 },
		After:    never, // only q can end it
	}
	done := make(chan struct{})
	var code int
	var out, errOut bytes.Buffer
	go func() {
		code = cli.Run(context.Background(), []string{"--socket", sock, "top"}, &out, &errOut, env)
		close(done)
	}()
	if _, err := press.Write([]byte("xq")); err != nil {
		t.Fatal(err)
	}
	<-done
	press.Close()
	if code != 0 || !restored {
		t.Errorf("exit %d (stderr %q), terminal restored %v", code, errOut.String(), restored)
	}
	s := out.String()
	if !strings.HasPrefix(s, "\x1b[H\x1b[2J") || !strings.Contains(s, "(q quits)") {
		t.Errorf("no full-screen output: %q", s)
	}
	// 6 rows: header, blank, titles, two users and "... 2 more".
	if !strings.Contains(s, "bob ") || !strings.Contains(s, "alice ") || strings.Contains(s, "carol") || !strings.Contains(s, "... 2 more") {
		t.Errorf("not cut to the terminal's height:\n%s", s)
	}
}

func TestTopQuitsOnInterrupt(t *testing.T) {
	_, sock := serve(t)
	ctx, cancel := context.WithCancel(context.Background())
	env := cli.Env{After: func(time.Duration) <-chan time.Time { cancel(); return nil }}
	var out, errOut bytes.Buffer
	if code := cli.Run(ctx, []string{"--socket", sock, "top"}, &out, &errOut, env); code != 0 || strings.Count(out.String(), "shaperd top at") != 1 {
		t.Errorf("exit %d, stderr %q, stdout %q", code, errOut.String(), out.String())
	}
}

func TestTopDaemonError(t *testing.T) {
	fake, sock := serve(t)
	fake.StatusErr = errors.New("dump lan0: netlink: no buffer space")
	code, _, errOut := run(t, cli.Env{After: now}, "--socket", sock, "top", "--iterations", "3")
	if code != 1 || !strings.Contains(errOut, "no buffer space") {
		t.Errorf("plain top with a failing daemon: exit %d, stderr %q", code, errOut)
	}
	// On a terminal it shows the error and keeps refreshing.
	var out bytes.Buffer
	code = cli.Run(context.Background(), []string{"--socket", sock, "top", "--iterations", "2"}, &out, io.Discard, cli.Env{Terminal: true, After: now})
	if code != 0 || strings.Count(out.String(), "no buffer space") != 2 {
		t.Errorf("terminal top with a failing daemon: exit %d, %q", code, out.String())
	}
}
