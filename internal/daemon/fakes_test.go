package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/model/modeltest"
)

// fakeClock moves only when Advance is called. Tickers and timers deliver
// on unbuffered channels, and Advance waits until each delivery is taken,
// so a test knows the loop has received the tick before it goes on.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	at     time.Time
	every  time.Duration // 0: one-shot
	c      chan time.Time
	done   bool
	stopMu sync.Mutex
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &fakeWaiter{at: c.now.Add(d), c: make(chan time.Time)}
	c.waiters = append(c.waiters, w)
	return w.c
}

func (c *fakeClock) NewTicker(d time.Duration) Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &fakeWaiter{at: c.now.Add(d), every: d, c: make(chan time.Time)}
	c.waiters = append(c.waiters, w)
	return w
}

func (w *fakeWaiter) C() <-chan time.Time { return w.c }
func (w *fakeWaiter) Stop() {
	w.stopMu.Lock()
	w.done = true
	w.stopMu.Unlock()
}

// Advance moves the clock by d in steps of at most step, delivering every
// timer and tick that falls due (in time order) and waiting up to 10 s for
// each to be received.
func (c *fakeClock) Advance(t testing.TB, d time.Duration) {
	t.Helper()
	end := c.Now().Add(d)
	for {
		c.mu.Lock()
		var next *fakeWaiter
		for _, w := range c.waiters {
			w.stopMu.Lock()
			done := w.done
			w.stopMu.Unlock()
			if !done && !w.at.After(end) && (next == nil || w.at.Before(next.at)) {
				next = w
			}
		}
		if next == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		c.now = next.at
		at := next.at
		if next.every > 0 {
			next.at = next.at.Add(next.every)
		} else {
			next.done = true
		}
		c.mu.Unlock()
		select {
		case next.c <- at:
		case <-time.After(10 * time.Second):
			t.Fatalf("fake clock: nobody took the tick at %v", at)
		}
	}
}

// fakeKernel is modeltest.MemKernel with links, link events and a write count.
type fakeKernel struct {
	mu     sync.Mutex
	mem    *modeltest.MemKernel
	links  map[string]bool
	writes int
	events chan kernel.LinkEvent
	// tc carries the fake's traffic-control events (WatchTC).
	tc chan kernel.TCEvent
	// counterReads counts Counters calls.
	counterReads int
	// userBytes, once set (setUserBytes), gives Counters a byte counter
	// for every class: the user's by label, else 0 (the in-memory kernel
	// keeps no counters).
	userBytes map[string]uint64
	// refuse, when set, fails every Apply with it.
	refuse error
	// refuseObj, when set, is asked about every change; an error refuses
	// that change alone, and Apply goes on like kernel.Apply (refuseApply).
	refuseObj func(model.Change) error
	// dumpErr, when set, fails Actual and Dump.
	dumpErr error
	// takeover records SetTakeover.
	takeover map[string]bool
	// panicOn makes Apply panic for tc changes on that device.
	panicOn string
	// dumps counts Dump, Actual and Verify calls.
	dumps int
	// onApply, when set, is called at the start of every Apply.
	onApply func()
}

func newFakeKernel(links ...string) *fakeKernel {
	k := &fakeKernel{mem: modeltest.NewMemKernel(), links: map[string]bool{}, events: make(chan kernel.LinkEvent), tc: make(chan kernel.TCEvent)}
	for _, l := range links {
		k.links[l] = true
	}
	return k
}

func (k *fakeKernel) Dump(device string) (model.Tree, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dumps++
	if k.dumpErr != nil {
		return model.Tree{Device: device}, k.dumpErr
	}
	if !k.links[device] {
		return model.Tree{Device: device}, fmt.Errorf("%s: %w", device, kernel.ErrNoDevice)
	}
	return k.mem.Tree(device), nil
}

func (k *fakeKernel) Actual(desired model.Tree) (model.Tree, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dumps++
	if k.dumpErr != nil {
		return model.Tree{Device: desired.Device}, k.dumpErr
	}
	if !k.links[desired.Device] {
		if desired.Redirect != nil {
			return model.Tree{Device: desired.Device}, nil
		}
		return model.Tree{Device: desired.Device}, fmt.Errorf("%s: %w", desired.Device, kernel.ErrNoDevice)
	}
	return k.mem.Tree(desired.Device), nil
}

func (k *fakeKernel) Apply(cs []model.Change) (kernel.Result, error) {
	if k.onApply != nil {
		k.onApply()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.refuse != nil {
		return kernel.Result{}, k.refuse
	}
	for _, c := range cs {
		if c.Device == k.panicOn && k.panicOn != "" && c.Redirect == nil {
			panic("fake kernel: bug on " + c.Device)
		}
	}
	if k.refuseObj != nil {
		return k.refuseApply(cs)
	}
	for _, c := range cs {
		if c.Redirect != nil && c.Op == model.OpAdd {
			k.links[c.Redirect.IFB] = true
		}
	}
	if err := k.mem.Apply(cs); err != nil {
		return kernel.Result{}, err
	}
	k.writes += len(cs)
	return kernel.Result{Writes: len(cs)}, nil
}

func (k *fakeKernel) Verify(desired model.Tree) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dumps++
	return model.Mismatches(k.mem.Tree(desired.Device), desired), nil
}

func (k *fakeKernel) LinkExists(name string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.links[name], nil
}

func (k *fakeKernel) WatchLinks(ctx context.Context) (<-chan kernel.LinkEvent, error) {
	return k.events, nil
}

func (k *fakeKernel) Counters(device string) (model.Tree, error) {
	t, err := k.Dump(device)
	t.Filters = nil
	k.mu.Lock()
	defer k.mu.Unlock()
	k.counterReads++
	if k.userBytes != nil {
		for i := range t.Classes {
			t.Classes[i].Stats = &model.Stats{Bytes: k.userBytes[t.Classes[i].Labels.User]}
		}
	}
	return t, err
}

// setUserBytes makes Counters report bytes for user's classes (and 0 for
// the other classes).
func (k *fakeKernel) setUserBytes(user string, bytes uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.userBytes == nil {
		k.userBytes = map[string]uint64{}
	}
	k.userBytes[user] = bytes
}

// counterReadCount is the number of Counters calls so far.
func (k *fakeKernel) counterReadCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.counterReads
}

func (k *fakeKernel) WatchTC(ctx context.Context) (<-chan kernel.TCEvent, error) {
	return k.tc, nil
}

func (k *fakeKernel) Teardown(device, redirectFrom string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.mem.Load(model.Tree{Device: device})
	return nil
}

func (k *fakeKernel) Close() error { return nil }

// SetTakeover records which devices may have a foreign root replaced.
func (k *fakeKernel) SetTakeover(device string, allow bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.takeover == nil {
		k.takeover = map[string]bool{}
	}
	k.takeover[device] = allow
}

// setLink makes a link appear (with an empty tc state) or disappear.
func (k *fakeKernel) setLink(name string, present bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.links[name] = present
	k.mem.Load(model.Tree{Device: name})
}

func (k *fakeKernel) dumpCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dumps
}

func (k *fakeKernel) writeCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.writes
}

func (k *fakeKernel) tree(device string) model.Tree {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.mem.Tree(device)
}

// mutate changes the fake kernel's tree of device behind the daemon's back.
func (k *fakeKernel) mutate(device string, f func(*model.Tree)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.mem.Tree(device)
	f(&t)
	k.mem.Load(t)
}

const testConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
reconcile_interval = "5s"

[policy]
interval = "1s"
ramp = "0s"
timezone = "UTC"

[[interface]]
name = "lan0"
bandwidth = "1gbit"
default_tier = "bronze"

[[interface]]
name = "lan0"
direction = "ingress"
ifb = "ifb-lan0"
bandwidth = "100mbit"
default_tier = "bronze"

[tiers.bronze]
rate = "5mbit"
ceil = "20mbit"

[tiers.gold]
rate = "50mbit"
ceil = "100mbit"
`

const testUsers = `
[[user]]
name = "alice"
tier = "gold"
addresses = ["198.18.1.10", "2001:db8:1::10"]

[[user]]
name = "bob"
tier = "bronze"
addresses = ["198.18.1.20"]
`

// writeConfig writes shaperd.toml and users.toml into dir and returns the
// main file's path.
func writeConfig(t testing.TB, dir, cfg, users string) string {
	t.Helper()
	p := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(cfg, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// newTestDaemon makes a daemon on k and clk with the test config in a
// fresh directory (or dir, when not "").
func newTestDaemon(t testing.TB, k Kernel, clk Clock, dir string) (*Daemon, string) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
		writeConfig(t, dir, testConfig, testUsers)
	}
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return d, dir
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
