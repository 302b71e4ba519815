package daemon

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// countingKernel is the fake kernel whose dumps report a byte counter for
// every class (the in-memory kernel keeps none).
type countingKernel struct {
	*fakeKernel
	mu    sync.Mutex
	bytes uint64
}

func (k *countingKernel) Actual(desired model.Tree) (model.Tree, error) {
	t, err := k.fakeKernel.Actual(desired)
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range t.Classes {
		t.Classes[i].Stats = &model.Stats{Bytes: k.bytes}
	}
	return t, err
}

// Counters is the stats read (no filters) with the same counters.
func (k *countingKernel) Counters(device string) (model.Tree, error) {
	t, err := k.fakeKernel.Counters(device)
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range t.Classes {
		t.Classes[i].Stats = &model.Stats{Bytes: k.bytes}
	}
	return t, err
}

// Top reads the kernel's counters for each request (one class-stats read
// per interface, kernel.Counters: no filter dump; not the last reconcile's), so the throughput follows a
// transfer at top's refresh rate; requests closer than MinCounterAge share
// one read.
func TestTopReadsFreshCounters(t *testing.T) {
	fk := newFakeKernel("lan0")
	k := &countingKernel{fakeKernel: fk}
	clk := newFakeClock()
	d, _ := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	top := func() tbf.Rate {
		d.refreshCounters(clk.Now(), MinCounterAge)
		for _, u := range d.status().Users {
			if u.Name == "alice" && u.Direction == "download" {
				return u.Throughput
			}
		}
		t.Fatal("no alice download row")
		return 0
	}
	clk.now = clk.now.Add(time.Second)
	k.bytes = 125000 // 1 Mbit in 1 s
	if got := top(); got != tbf.Mbit {
		t.Errorf("first refresh: %v, want 1mbit", got)
	}
	dumps := fk.dumpCount()
	clk.now = clk.now.Add(time.Second)
	k.bytes += 250000 // 2 Mbit in the next second
	if got := top(); got != 2*tbf.Mbit {
		t.Errorf("second refresh: %v, want 2mbit", got)
	}
	if n := fk.dumpCount() - dumps; n != 2 {
		t.Errorf("a refresh dumped %d times, want 2 (one per interface)", n)
	}
	if fk.counterReadCount() < 4 {
		t.Errorf("%d counter reads for two refreshes of two interfaces: top dumps whole trees", fk.counterReadCount())
	}
	dumps = fk.dumpCount()
	clk.now = clk.now.Add(MinCounterAge / 2)
	top()
	if n := fk.dumpCount() - dumps; n != 0 {
		t.Errorf("a refresh within MinCounterAge dumped %d times, want 0", n)
	}
}
