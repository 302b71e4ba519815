package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type recNotifier struct {
	mu     sync.Mutex
	states []string
}

func (r *recNotifier) Notify(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, s)
}

func (r *recNotifier) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.states {
		if x == s {
			n++
		}
	}
	return n
}

// runDaemon starts Run on a fake kernel and clock with a control socket
// in a temporary directory; it returns a client of that socket. The daemon
// is stopped on cleanup.
func runDaemon(t *testing.T, k *fakeKernel, clk *fakeClock, logs io.Writer, n Notifier) (*Daemon, *control.Client) {
	t.Helper()
	return runDaemonConfig(t, k, clk, logs, n, testConfig)
}

// runDaemonConfig is runDaemon with the main file cfg (a format with the
// directory as %[1]s, as testConfig) instead of testConfig.
func runDaemonConfig(t *testing.T, k *fakeKernel, clk *fakeClock, logs io.Writer, n Notifier, cfg string) (*Daemon, *control.Client) {
	t.Helper()
	dir := t.TempDir()
	writeConfig(t, dir, cfg, testUsers)
	sock := filepath.Join(dir, "ctl.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Notifier: n, ControlListener: l, Watchdog: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	c := control.NewClient(sock)
	t.Cleanup(c.Close)
	return d, c
}

// sync waits until the loop has handled everything sent to it before.
func syncLoop(t *testing.T, c *control.Client) *control.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return st
}

func TestRunWaitsForMissingInterfaceAndShapesItWhenItAppears(t *testing.T) {
	k := newFakeKernel()
	clk := newFakeClock()
	logs := &syncBuffer{}
	n := &recNotifier{}
	_, c := runDaemon(t, k, clk, logs, n)
	syncLoop(t, c)
	if !strings.Contains(logs.String(), "waiting for it to appear") {
		t.Errorf("no warning about the missing interface; logs:\n%s", logs)
	}
	if n.count("READY=1") != 1 {
		t.Errorf("READY=1 sent %d times with only a missing interface, want 1", n.count("READY=1"))
	}
	k.setLink("lan0", true)
	k.events <- kernel.LinkEvent{Name: "lan0", Up: true}
	syncLoop(t, c)
	if k.tree("lan0").Root != nil {
		t.Fatal("shaped before the settle time")
	}
	clk.Advance(t, DefaultLinkSettle)
	syncLoop(t, c)
	if tr := k.tree("lan0"); tr.Root == nil || len(tr.Classes) == 0 {
		t.Fatalf("lan0 not shaped after it appeared: %+v", tr)
	}
	if tr := k.tree("ifb-lan0"); tr.Root == nil {
		t.Error("ingress of lan0 not shaped after it appeared")
	}

	// Deleted and recreated: shaped again.
	k.setLink("lan0", false)
	k.events <- kernel.LinkEvent{Name: "lan0", Deleted: true}
	k.setLink("lan0", true)
	k.events <- kernel.LinkEvent{Name: "lan0", Up: true}
	syncLoop(t, c)
	clk.Advance(t, DefaultLinkSettle)
	syncLoop(t, c)
	if tr := k.tree("lan0"); tr.Root == nil {
		t.Fatal("lan0 not shaped after it was recreated")
	}
}

func TestRunRepairsDriftOnTickAndPingsWatchdog(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	n := &recNotifier{}
	d, c := runDaemon(t, k, clk, io.Discard, n)
	st := syncLoop(t, c)
	if len(st.Users) != 4 {
		t.Fatalf("status has %d user entries, want 4 (2 users x 2 interfaces)", len(st.Users))
	}
	// A change the kernel did not report (a lost notification): while
	// events arrive the 5 s ticks leave an interface in sync alone (not
	// even its counters are read: status and metrics read them when asked,
	// TestCountersReadWhenAsked); the full reconcile
	// (full_reconcile_interval, 5 min) repairs it. TestTCEventRepairsBeforeTheTick
	// covers the reported changes.
	k.mutate("lan0", func(tr *model.Tree) { tr.Classes = tr.Classes[:len(tr.Classes)-1]; tr.Filters = nil })
	w, reads, dumps := k.writeCount(), k.counterReadCount(), k.dumpCount()
	clk.Advance(t, 5*time.Second)
	_ = d.call(context.Background(), func() {}) // the tick is done
	if k.writeCount() != w || k.counterReadCount() != reads || k.dumpCount() != dumps {
		t.Fatalf("a 5 s tick with events: %d writes, %d counter reads, %d dumps; want none",
			k.writeCount()-w, k.counterReadCount()-reads, k.dumpCount()-dumps)
	}
	clk.Advance(t, 5*time.Minute)
	syncLoop(t, c)
	if k.writeCount() == w {
		t.Fatal("the full reconcile did not repair the drift")
	}
	var desired model.Tree
	ctx := context.Background()
	_ = d.call(ctx, func() { desired = *d.ifaces[0].tree() })
	if m := model.Mismatches(k.tree("lan0"), desired); len(m) != 0 {
		t.Errorf("after repair: %v", m)
	}
	if n.count("WATCHDOG=1") == 0 {
		t.Error("no watchdog ping")
	}

	// A set-rate through the socket reaches the kernel.
	rate := 4 * tbf.Mbit
	if _, err := c.SetRate(ctx, control.SetRateRequest{Target: "bob", Rate: rate, Ramp: control.DurationPtr(0)}); err != nil {
		t.Fatal(err)
	}
	st = syncLoop(t, c)
	for _, u := range st.Users {
		if u.Name == "bob" && u.EffectiveCeil != rate {
			t.Errorf("bob after set-rate: %+v", u)
		}
	}

	// Metrics read the snapshot.
	rec := httptest.NewRecorder()
	d.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`shaperd_class_ceil_bytes_per_second{direction="egress",interface="lan0",kind="user",tier="bronze",user="bob"} 500000`,
		`shaperd_class_rate_bytes_per_second{direction="ingress",interface="lan0",kind="user",tier="gold",user="alice"} 6.25e+06`,
		`shaperd_interface_in_sync{direction="egress",interface="lan0"} 1`,
		`shaperd_drift_repairs_total 1`,
		"shaperd_reconcile_duration_seconds_count",
		"shaperd_kernel_writes_total",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
}

// TestCountersReadWhenAsked: while events arrive the ticks read no
// counters; status and a /metrics scrape read them when they are
// reconcile_interval old, top when they are MinCounterAge old.
func TestCountersReadWhenAsked(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, c := runDaemon(t, k, clk, io.Discard, &recNotifier{})
	syncLoop(t, c)
	barrier := func() { _ = d.call(context.Background(), func() {}) }
	reads := k.counterReadCount()
	clk.Advance(t, 20*time.Second) // four reconcile ticks
	barrier()
	if n := k.counterReadCount() - reads; n != 0 {
		t.Fatalf("idle ticks read the counters %d times", n)
	}
	syncLoop(t, c) // status: the counters are 20 s old
	if k.counterReadCount() == reads {
		t.Fatal("status did not read counters 20 s old")
	}
	reads = k.counterReadCount()
	syncLoop(t, c)
	d.MetricsHandler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	if n := k.counterReadCount() - reads; n != 0 {
		t.Errorf("status and a scrape right after a read read the counters %d more times", n)
	}
	clk.Advance(t, 5*time.Second)
	barrier()
	d.MetricsHandler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	if k.counterReadCount() == reads {
		t.Error("a scrape did not read counters 5 s old")
	}
	reads = k.counterReadCount()
	clk.Advance(t, time.Second)
	if _, err := c.Top(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k.counterReadCount() == reads {
		t.Error("top did not read counters 1 s old")
	}
}
