package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

const e2eConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
reconcile_interval = "1s"

[policy]
interval = "500ms"
ramp = "0s"
timezone = "UTC"

[[interface]]
name = "r-lan"
bandwidth = "1gbit"
default_tier = "bronze"

[[interface]]
name = "r-lan"
direction = "ingress"
ifb = "r-ifb"
bandwidth = "1gbit"
default_tier = "bronze"

[[interface]]
name = "r-x0"
bandwidth = "100mbit"
default_tier = "bronze"

[tiers.bronze]
rate = "10mbit"
ceil = "10mbit"

[tiers.silver]
rate = "20mbit"
ceil = "20mbit"

[tiers.gold]
rate = "40mbit"
ceil = "40mbit"
`

var e2eTiers = []string{"bronze", "silver", "gold"}

func e2eUsers(lab *netnslab.RouterLab) string {
	var b strings.Builder
	for i := range lab.Users4 {
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = %q\naddresses = [%q, %q]\n\n", i, e2eTiers[i%3], lab.Users4[i], lab.Users6[i])
	}
	return b.String()
}

// e2eDir is a world-readable temporary directory (so that user nobody can
// reach the socket's mode bits and the shaperctl binary).
func e2eDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "shaperd-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

type e2eDaemon struct {
	d      *Daemon
	c      *control.Client
	cancel context.CancelFunc
	done   chan error
}

// startE2E runs the daemon in-process against the lab's router namespace.
func startE2E(t *testing.T, lab *netnslab.RouterLab, dir string) *e2eDaemon {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), NetNS: lab.Router.Name, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &e2eDaemon{d: d, c: control.NewClient(filepath.Join(dir, "shaperd.sock")), cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- d.Run(ctx) }()
	t.Cleanup(e.stop)
	// Ready when the status answers (the loop has made its first pass).
	deadline := time.Now().Add(20 * time.Second)
	for {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := e.c.Status(cctx)
		ccancel()
		if err == nil {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not answering: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *e2eDaemon) stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	<-e.done
	e.c.Close()
	e.d.Close()
	e.cancel = nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// classOf dumps device in the lab and returns user's class (found by its
// IPv4 filter).
func classOf(t *testing.T, k *kernel.Kernel, device string, addr netip.Addr) model.Class {
	t.Helper()
	tr, err := k.Dump(device)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tr.Filters {
		if f.Prefix.Addr() == addr {
			if c := findClass(tr, f.ClassID); c != nil {
				return *c
			}
		}
	}
	t.Fatalf("%s: no class for %s", device, addr)
	return model.Class{}
}

// within checks that got bits/s lies within [lo, hi] x want.
func within(got float64, want tbf.Rate, lo, hi float64) bool {
	return got >= lo*float64(want) && got <= hi*float64(want)
}

// measureDownload measures a download to addr, once more when it is off.
func measureDownload(t *testing.T, lab *netnslab.RouterLab, addr netip.Addr, want tbf.Rate) float64 {
	t.Helper()
	got := lab.Download(t, addr, 2)
	if !within(got, want, 0.8, 1.1) {
		t.Logf("download to %s: %.2f Mbit/s, want ~%v; measuring again", addr, got/1e6, want)
		got = lab.Download(t, addr, 3)
	}
	return got
}

// waitFor polls cond every 20 ms until it holds or d passes; it returns
// how long it took.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func TestEndToEnd(t *testing.T) {
	netnslab.Require(t)
	lab := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: 3})
	dir := e2eDir(t)
	writeConfig(t, dir, e2eConfig, e2eUsers(lab))
	k, err := kernel.Open(kernel.Options{NetNS: lab.Router.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx := context.Background()

	e := startE2E(t, lab, dir)
	st, err := e.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Interfaces) != 3 || len(st.Users) != 9 {
		t.Fatalf("status: %d interfaces, %d user entries; want 3, 9", len(st.Interfaces), len(st.Users))
	}
	u0, u2 := lab.Users4[0], lab.Users4[2]
	if c := classOf(t, k, "r-lan", u2); c.Rate != 40*tbf.Mbit || c.Ceil != 40*tbf.Mbit {
		t.Errorf("u2 (gold) in the kernel: %v/%v", c.Rate, c.Ceil)
	}

	t.Run("traffic and set-rate", func(t *testing.T) {
		if got := measureDownload(t, lab, u2, 40*tbf.Mbit); !within(got, 40*tbf.Mbit, 0.8, 1.1) {
			t.Errorf("gold download %.2f Mbit/s, want ~40", got/1e6)
		}
		rate := 5 * tbf.Mbit
		resp, err := e.c.SetRate(ctx, control.SetRateRequest{Target: "u2", Rate: rate, Ramp: control.DurationPtr(0)})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Users) != 1 || resp.Users[0] != "u2" {
			t.Errorf("set-rate response %+v", resp)
		}
		if c := classOf(t, k, "r-lan", u2); c.Rate != rate || c.Ceil != rate {
			t.Errorf("u2 after set-rate: %v/%v, want 5mbit", c.Rate, c.Ceil)
		}
		if c := classOf(t, k, "r-ifb", u2); c.Rate != rate {
			t.Errorf("u2 upload after set-rate: %v, want 5mbit", c.Rate)
		}
		if got := measureDownload(t, lab, u2, rate); !within(got, rate, 0.8, 1.1) {
			t.Errorf("download after set-rate %.2f Mbit/s, want ~5", got/1e6)
		}
		st, err := e.c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range st.Users {
			if u.Name == "u2" && u.Interface == "r-lan" && u.Bytes == 0 {
				t.Errorf("status of u2 counts no bytes after downloads: %+v", u)
			}
		}
		rec := httptest.NewRecorder()
		e.d.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		prefix := `shaperd_class_bytes_total{direction="egress",interface="r-lan",kind="user",tier="gold",user="u2"} `
		var found bool
		for _, l := range strings.Split(rec.Body.String(), "\n") {
			if v, ok := strings.CutPrefix(l, prefix); ok {
				found = true
				if b, err := strconv.ParseFloat(v, 64); err != nil || b < 1e6 {
					t.Errorf("u2's bytes in /metrics: %q after downloads", v)
				}
			}
		}
		if !found {
			t.Errorf("no %s in /metrics", prefix)
		}
	})

	t.Run("invalid reload keeps the plan with zero writes", func(t *testing.T) {
		w := counterValue(t, e.d.stats.writes)
		writeConfig(t, dir, strings.Replace(e2eConfig, `ceil = "40mbit"`, `ceil = "1mbit"`, 1), e2eUsers(lab))
		err := e.c.Reload(ctx)
		var ve *control.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), "tiers.gold.ceil") {
			t.Fatalf("reload: %v, want a ValidationError about tiers.gold.ceil", err)
		}
		time.Sleep(1500 * time.Millisecond) // a reconcile tick
		if got := counterValue(t, e.d.stats.writes) - w; got != 0 {
			t.Errorf("%v kernel writes after a refused reload, want 0", got)
		}
		writeConfig(t, dir, e2eConfig, e2eUsers(lab))
	})

	t.Run("drift repair", func(t *testing.T) {
		c := classOf(t, k, "r-lan", u0)
		lab.Router.MustRun("tc", "class", "change", "dev", "r-lan", "parent", c.Parent.String(), "classid", c.Handle.String(),
			"htb", "rate", "1mbit", "ceil", "1mbit")
		if got := classOf(t, k, "r-lan", u0); got.Rate != tbf.Mbit {
			t.Fatalf("tc did not change the class: %v", got.Rate)
		}
		waitFor(t, 3*time.Second, "drift repaired", func() bool { return classOf(t, k, "r-lan", u0).Rate == 10*tbf.Mbit })
	})

	t.Run("link deleted and recreated", func(t *testing.T) {
		shaped := func() bool {
			out, err := lab.Router.Run("tc", "qdisc", "show", "dev", "r-x0")
			return err == nil && strings.Contains(out, "qdisc htb 1:")
		}
		lab.Router.MustRun("ip", "link", "add", "r-x0", "type", "veth", "peer", "name", "r-x1")
		t.Logf("missing at start, created: shaped after %v", waitFor(t, 1500*time.Millisecond, "r-x0 shaped", shaped))
		lab.Router.MustRun("ip", "link", "del", "r-x0")
		time.Sleep(200 * time.Millisecond)
		lab.Router.MustRun("ip", "link", "add", "r-x0", "type", "veth", "peer", "name", "r-x1")
		took := waitFor(t, 1500*time.Millisecond, "r-x0 shaped again", shaped)
		t.Logf("recreated: shaped after %v", took)
	})

	t.Run("control socket refuses nobody", func(t *testing.T) {
		bin := filepath.Join(dir, "shaperctl")
		out, err := exec.Command("go", "build", "-o", bin, "../../cmd/shaperctl").CombinedOutput()
		if err != nil {
			t.Fatalf("build shaperctl: %v\n%s", err, out)
		}
		cmd := exec.Command(bin, "--socket", filepath.Join(dir, "shaperd.sock"), "status")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err = cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("shaperctl as nobody succeeded:\n%s", out)
		}
		if !strings.Contains(strings.ToLower(string(out)), "permission") {
			t.Errorf("shaperctl as nobody: %v, output lacks a permission error:\n%s", err, out)
		}
	})

	t.Run("restart adopts with zero writes", func(t *testing.T) {
		lab.Download(t, u0, 1)
		before := classOf(t, k, "r-lan", u0)
		e.stop()
		if tr, _ := k.Dump("r-lan"); tr.Root == nil {
			t.Fatal("stopping removed the shaping")
		}
		e2 := startE2E(t, lab, dir)
		time.Sleep(1200 * time.Millisecond) // a reconcile tick
		if got := counterValue(t, e2.d.stats.writes); got != 0 {
			t.Errorf("restart: %v kernel writes, want 0", got)
		}
		after := classOf(t, k, "r-lan", u0)
		if after.Handle != before.Handle || after.Stats.Bytes < before.Stats.Bytes || before.Stats.Bytes == 0 {
			t.Errorf("u0's class %s bytes %d -> %s bytes %d: counters reset or class moved",
				before.Handle, before.Stats.Bytes, after.Handle, after.Stats.Bytes)
		}
		// The override of u2 survived the restart.
		if c := classOf(t, k, "r-lan", u2); c.Rate != 5*tbf.Mbit {
			t.Errorf("u2 after restart: %v, want the override's 5mbit", c.Rate)
		}
	})
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
