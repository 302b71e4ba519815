package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

const tbfTestConfig = `
[daemon]
state_dir = "%[1]s/state"

[policy]
ramp = "0s"
timezone = "UTC"

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

// TestSetRateIsBuiltBeforeItIsAccepted: an override that cannot be built
// is refused with a 400 naming the target and why, and nothing is saved;
// a user override below what gold's burst fits is accepted and the burst
// cut (an accepted set-rate must build on every interface: set-rate alice
// 1900bit under a 64kb burst).
func TestSetRateIsBuiltBeforeItIsAccepted(t *testing.T) {
	k := newFakeKernel("lan0", "wan0")
	clk := newFakeClock()
	dir := t.TempDir()
	writeConfig(t, dir, tbfTestConfig, "[[user]]\nname = \"alice\"\ntier = \"gold\"\naddresses = [\"198.18.1.10\"]\n")
	sock := filepath.Join(dir, "ctl.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ControlListener: l, Watchdog: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c := control.NewClient(sock)
	t.Cleanup(c.Close)
	syncLoop(t, c)

	_, err = c.SetRate(context.Background(), control.SetRateRequest{Target: "iface:wan0", Rate: 8 * tbf.Bit, Ramp: control.DurationPtr(0)})
	var ae *control.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(err.Error(), "iface:wan0") || !strings.Contains(err.Error(), "tbf burst") {
		t.Fatalf("set-rate iface:wan0 8bit: %v; want a 400 naming iface:wan0 and the burst", err)
	}
	kept := false
	_ = d.call(context.Background(), func() {
		_, kept = d.overrides.Get(policy.Target{Kind: policy.TargetIface, Name: "wan0"}, clk.Now())
	})
	if kept {
		t.Error("a refused override was kept")
	}

	if _, err := c.SetRate(context.Background(), control.SetRateRequest{Target: "alice", Rate: 1900 * tbf.Bit, Ramp: control.DurationPtr(0)}); err != nil {
		t.Fatalf("set-rate alice 1900bit: %v", err)
	}
	st := syncLoop(t, c)
	found := false
	for _, u := range st.Users {
		if u.Name == "alice" {
			found = true
			if u.EffectiveRate != 1900*tbf.Bit || !strings.Contains(u.Reason, "burst 64kb cut to") {
				t.Errorf("alice after set-rate 1900bit: rate %s, reason %q", u.EffectiveRate, u.Reason)
			}
		}
	}
	if !found {
		t.Fatal("alice not in status")
	}
	for _, s := range st.Interfaces {
		if s.State != "ok" {
			t.Errorf("interface %s is %s (%s) after set-rate alice 1900bit", s.Name, s.State, s.Error)
		}
	}
}

// TestReloadRefusesWhatCheckRefuses: a configuration that loads but cannot
// be built at some outcome (here: gold's burst at an 8bit schedule rate) is
// refused on reload with the position of the key, like --check.
func TestReloadRefusesWhatCheckRefuses(t *testing.T) {
	k := newFakeKernel("lan0", "wan0")
	clk := newFakeClock()
	dir := t.TempDir()
	users := "[[user]]\nname = \"alice\"\ntier = \"gold\"\naddresses = [\"198.18.1.10\"]\n"
	writeConfig(t, dir, tbfTestConfig, users)
	d, _ := newTestDaemon(t, k, clk, dir)
	defer d.Close()
	writeConfig(t, dir, tbfTestConfig+"[[tiers.gold.schedule]]\ndays = [\"all\"]\nfrom = \"01:00\"\nto = \"02:00\"\nrate = \"8bit\"\n", users)
	err := d.reload(false)
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "shaperd.toml:25:1: tiers.gold.schedule[0].rate: tier gold's burst 64kb does not fit rate 8bit") {
		t.Fatalf("reload: %v; want a ConfigError at tiers.gold.schedule[0].rate", err)
	}
}
