package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildShaperd builds this command into a temporary directory.
func buildShaperd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shaperd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	bin := buildShaperd(t)
	unit, err := os.ReadFile("../../systemd/shaperd.service")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("Type=notify")) || !bytes.Contains(unit, []byte("WatchdogSec=")) {
		t.Error("unit is not Type=notify with a watchdog")
	}
	// Every command the unit runs must exist: shaperd, and shaperctl
	// for ExecReload=.
	ctl := filepath.Join(t.TempDir(), "shaperctl")
	if out, err := exec.Command("go", "build", "-o", ctl, "../shaperctl").CombinedOutput(); err != nil {
		t.Fatalf("go build shaperctl: %v\n%s", err, out)
	}
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/shaperd ", bin+" ")
	text = strings.ReplaceAll(text, "/usr/local/bin/shaperctl", ctl)
	if text == string(unit) || strings.Contains(text, "/usr/local/bin") {
		t.Fatal("unit does not run /usr/local/bin/shaperd and shaperctl only")
	}
	p := filepath.Join(t.TempDir(), "shaperd.service")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", p).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func runMain(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestCheck(t *testing.T) {
	code, out, errOut := runMain("--config", "../../configs/shaperd.toml", "--check")
	if code != 0 || !strings.Contains(out, "ok") || errOut != "" {
		t.Errorf("valid config: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "shaperd.toml")
	os.WriteFile(bad, []byte("[daemon]\nreconcile_interval = \"1ms\"\n\n[[interface]]\nname = \"lan0\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "users.toml"), nil, 0o644)
	code, _, errOut = runMain("--config", bad, "--check")
	if code != 1 {
		t.Errorf("invalid config: exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) < 2 {
		t.Fatalf("want an error per problem, got %q", errOut)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, bad+":") {
			t.Errorf("error without FILE:LINE:COL: %q", l)
		}
	}
	if !strings.Contains(errOut, bad+":2:") {
		t.Errorf("no error at line 2 (reconcile_interval): %q", errOut)
	}
	// The daemon modes refuse it too, with the same messages.
	if code, _, errOut2 := runMain("--config", bad, "--once"); code != 1 || errOut2 != errOut {
		t.Errorf("--once with an invalid config: exit %d, stderr %q", code, errOut2)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--nope"},
		{"--check", "--once"},
		{"--log-format", "xml"},
		{"extra"},
	} {
		if code, _, errOut := runMain(args...); code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 with a message", args, code, errOut)
		}
	}
	if code, out, _ := runMain("--version"); code != 0 || !strings.HasPrefix(out, "shaperd ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

// --check says when guarantees are oversubscribed (information: exit 0).
func TestCheckOversubscription(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "shaperd.toml")
	os.WriteFile(cfg, []byte("[[interface]]\nname = \"lan0\"\nbandwidth = \"100mbit\"\ndefault_rate = \"1mbit\"\n\n[tiers.t]\nrate = \"50mbit\"\nceil = \"100mbit\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "users.toml"), []byte(`
[[user]]
name = "a"
tier = "t"
addresses = ["198.18.0.1"]
[[user]]
name = "b"
tier = "t"
addresses = ["198.18.0.2"]
`), 0o644)
	code, out, errOut := runMain("--config", cfg, "--check")
	if code != 0 || !strings.Contains(out, "note: interface lan0 (egress): interface bandwidth 100mbit: guaranteed rates add up to 101mbit (oversubscribed x1.01)") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// --check notes a tier's ceil above an interface's bandwidth at the key,
// with the configured and the capped value, and accepts the plan (exit 0):
// one set of tiers serves a 1gbit uplink and a 50mbit building link.
func TestCheckCapNotes(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "shaperd.toml")
	os.WriteFile(cfg, []byte(`[[interface]]
name = "wan0"
bandwidth = "1gbit"

[[interface]]
name = "r0"
bandwidth = "50mbit"

[tiers.gold]
rate = "10mbit"
ceil = "100mbit"
`), 0o644)
	os.WriteFile(filepath.Join(dir, "users.toml"), []byte("[[user]]\nname = \"a\"\ntier = \"gold\"\naddresses = [\"198.18.0.1\"]\n"), 0o644)
	code, out, errOut := runMain("--config", cfg, "--check")
	want := cfg + ":11:1: note: tiers.gold.ceil: ceil 100mbit is above the bandwidth 50mbit of interface r0 (egress): capped to 50mbit\n"
	if code != 0 || errOut != "" || !strings.Contains(out, want) || !strings.Contains(out, cfg+": ok") {
		t.Errorf("exit %d\nstdout %s\nstderr %s\nwant exit 0 and %q", code, out, errOut, want)
	}
	if n := strings.Count(out, "capped"); n != 1 {
		t.Errorf("%d cap notes, want 1 (wan0's 1gbit fits 100mbit):\n%s", n, out)
	}
}

// A rate in a bytes-per-second unit is valid but noted at its key: tc's
// mbps is megabytes per second, so "10mbps" is 80mbit.
func TestCheckNotesBytesPerSecond(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "shaperd.toml")
	os.WriteFile(cfg, []byte(`[[interface]]
name = "lan0"
bandwidth = "1gbit"

[tiers.gold]
rate = "10mbps"
ceil = "100mbit"
`), 0o644)
	os.WriteFile(filepath.Join(dir, "users.toml"), []byte("[[user]]\nname = \"a\"\ntier = \"gold\"\nrate = \"2KBps\"\naddresses = [\"198.18.0.1\"]\n"), 0o644)
	code, out, errOut := runMain("--config", cfg, "--check")
	for _, want := range []string{
		cfg + `:6:1: note: tiers.gold.rate: rate "10mbps" is 80mbit: in tc's units mbps counts bytes per second; mbit counts bits (write "10mbit" if 10mbit was meant)` + "\n",
		filepath.Join(dir, "users.toml") + `:4:1: note: user[0].rate: rate "2KBps" is 16kbit: in tc's units KBps counts bytes per second; kbit counts bits (write "2kbit" if 2kbit was meant)` + "\n",
		cfg + ": ok\n",
	} {
		if code != 0 || errOut != "" || !strings.Contains(out, want) {
			t.Errorf("exit %d\nstdout %s\nstderr %s\nwant exit 0 and %q", code, out, errOut, want)
		}
	}
	if n := strings.Count(out, "counts bytes"); n != 2 {
		t.Errorf("%d bytes notes, want 2 (100mbit is bits):\n%s", n, out)
	}
}

// --help is an answer, not an error: stdout, exit 0, flags spelled --name.
func TestHelp(t *testing.T) {
	code, out, errOut := runMain("--help")
	if code != 0 || errOut != "" || !strings.Contains(out, "  --check\n") || !strings.Contains(out, "  --config FILE\n") {
		t.Errorf("--help: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// TestCheckBuildsThePlan: configurations that config.Load accepts but the
// apply path would refuse are --check errors at FILE:LINE:COL, and the
// daemon modes refuse them with the same lines.
func TestCheckBuildsThePlan(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "shaperd.toml")
	users := filepath.Join(dir, "users.toml")
	os.WriteFile(main, []byte("[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n\n[tiers.t]\nrate = \"8bit\"\nburst = \"64kb\"\n"), 0o644)
	os.WriteFile(users, []byte("[[user]]\nname = \"alice\"\ntier = \"t\"\naddresses = [\"198.19.0.1\", \"2001:db8::/96\"]\n"), 0o644)
	code, _, errOut := runMain("--config", main, "--check")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, errOut)
	}
	for _, want := range []string{
		main + ":6:1: tiers.t.rate: tier t's burst 64kb does not fit rate 8bit",
		users + ":4:28: user[0].addresses[1]: IPv6 prefix 2001:db8::/96: lengths /65../112 are not supported",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if code, _, errOut2 := runMain("--config", main, "--once"); code != 1 || errOut2 != errOut {
		t.Errorf("--once: exit %d, stderr %q; want 1 and the --check lines", code, errOut2)
	}
}

// TestCheckOutputIsBounded: 3,000 users sharing one address print one
// error per shared address, not one per pair, and never more than
// config.MaxPrinted lines plus a summary.
func TestCheckOutputIsBounded(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "shaperd.toml")
	os.WriteFile(main, []byte("[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n\n[tiers.t]\nrate = \"1mbit\"\n"), 0o644)
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = \"t\"\naddresses = [\"198.18.0.1\", \"198.18.%d.%d/32\", \"2001:db8::\"]\n", i, 1+i/256, i%256)
	}
	// And 200 users with a bad address each: more errors than are printed.
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, "[[user]]\nname = \"bad%d\"\ntier = \"t\"\naddresses = [\"198.18.300.%d\"]\n", i, i)
	}
	os.WriteFile(filepath.Join(dir, "users.toml"), []byte(b.String()), 0o644)
	code, _, errOut := runMain("--config", main, "--check")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 1 || len(lines) != 101 || !strings.HasPrefix(lines[100], "... and ") {
		t.Fatalf("exit %d, %d lines (%d bytes); want 1, 100 errors and a summary line; last: %q", code, len(lines), len(errOut), lines[len(lines)-1])
	}
	if len(errOut) > 64<<10 {
		t.Errorf("%d bytes of errors", len(errOut))
	}
	if !strings.Contains(errOut, "and 2997 more") {
		t.Errorf("the shared address does not name how many more users share it:\n%s", lines[0])
	}
}

// TestCheckPrefixLengthsByClassifier: an IPv6 /96 is refused for an
// interface that may use u32 (no classifier key, or "u32") and accepted
// where classifier = "bpf" (which takes every length).
func TestCheckPrefixLengthsByClassifier(t *testing.T) {
	for _, c := range []struct {
		classifier string
		ok         bool
	}{{"", false}, {"classifier = \"u32\"\n", false}, {"classifier = \"bpf\"\n", true}} {
		dir := t.TempDir()
		main := filepath.Join(dir, "shaperd.toml")
		os.WriteFile(main, []byte("[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n"+c.classifier+"\n[tiers.t]\nrate = \"1mbit\"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "users.toml"), []byte("[[user]]\nname = \"alice\"\ntier = \"t\"\naddresses = [\"2001:db8::/96\"]\n"), 0o644)
		code, _, errOut := runMain("--config", main, "--check")
		refused := strings.Contains(errOut, "lengths /65../112 are not supported")
		if c.ok && refused || !c.ok && (!refused || code != 1) {
			t.Errorf("%q: exit %d, stderr %q", c.classifier, code, errOut)
		}
	}
}
