package daemon

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestMemoryReturnedAfterAScrape: with Options.ReturnMemory a /metrics
// scrape (its series and the counter read before it are the idle daemon's
// biggest allocations) returns memory at once; without it nothing does.
func TestMemoryReturnedAfterAScrape(t *testing.T) {
	returned := countReturns(t)
	k := newFakeKernel("lan0")
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	scrape := func() {
		d.MetricsHandler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	}
	scrape()
	if returned(false) {
		t.Fatal("without ReturnMemory a scrape returned memory")
	}
	d.opts.ReturnMemory = true
	scrape()
	if !returned(true) {
		t.Error("a scrape returned no memory")
	}
}

// countReturns replaces freeOSMemory for the test; returned(wait) reports
// whether it was called (since the last call), waiting up to 10 s for the
// collection that returnMemory starts beside the loop when wait is set.
func countReturns(t *testing.T) (returned func(wait bool) bool) {
	calls := make(chan struct{}, 100)
	freeOSMemory = func() { calls <- struct{}{} }
	t.Cleanup(func() { freeOSMemory = realFreeOSMemory })
	return func(wait bool) bool {
		if !wait {
			select {
			case <-calls:
				return true
			default:
				return false
			}
		}
		select {
		case <-calls:
			return true
		case <-time.After(10 * time.Second):
			return false
		}
	}
}

// TestMemoryReturnedAfterEachBigApply: with Options.ReturnMemory an
// interface's apply of freeAfterChanges changes or more returns memory,
// the first apply's too (its verify dump would pile onto the next
// interface's apply).
func TestMemoryReturnedAfterEachBigApply(t *testing.T) {
	returned := countReturns(t)
	var u strings.Builder
	for i := 0; i < 600; i++ { // a class and a filter each: 1,200 changes an interface
		fmt.Fprintf(&u, "[[user]]\nname = \"user%05d\"\ntier = \"gold\"\naddresses = [\"198.18.%d.%d\"]\n", i, i/250, i%250+1)
	}
	dir := t.TempDir()
	writeConfig(t, dir, testConfig, u.String())
	d, _ := newTestDaemon(t, newFakeKernel("lan0"), newFakeClock(), dir)
	d.opts.ReturnMemory = true
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !returned(true) { // one at a time: a second may find the first running
		t.Error("the first apply (before READY=1) returned no memory")
	}
}

// TestMemoryLimit: with Options.ReturnMemory, setPlan gives the Go runtime
// daemon.memory_limit, and no limit (math.MaxInt64) when the key is 0;
// without it (tests) the runtime's limit is left alone.
func TestMemoryLimit(t *testing.T) {
	var got []int64
	goMemoryLimit = func(l int64) int64 { got = append(got, l); return 0 }
	t.Cleanup(func() { goMemoryLimit = debug.SetMemoryLimit })
	d, _ := newTestDaemon(t, newFakeKernel("lan0"), newFakeClock(), "")
	plan := *d.plan
	plan.Daemon.MemoryLimit = 256 * tbf.Mebibyte
	d.setPlan(&plan)
	if len(got) != 0 {
		t.Fatalf("without ReturnMemory the limit was set: %v", got)
	}
	d.opts.ReturnMemory = true
	d.setPlan(&plan)
	plan2 := plan
	plan2.Daemon.MemoryLimit = 0
	d.setPlan(&plan2)
	if want := []int64{256 << 20, math.MaxInt64}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("limits set %v, want %v", got, want)
	}
}

// TestStartGC: with Options.ReturnMemory the start runs at StartGCPercent
// and the first apply restores the GOGC before it; GOGC set in the
// environment is left alone.
func TestStartGC(t *testing.T) {
	gogc := 100
	gcPercent = func(p int) int { old := gogc; gogc = p; return old }
	t.Cleanup(func() { gcPercent = debug.SetGCPercent })
	countReturns(t)
	t.Setenv("GOGC", "")
	d, _ := newTestDaemon(t, newFakeKernel("lan0"), newFakeClock(), "")
	d.startGC()
	if gogc != 100 {
		t.Fatalf("without ReturnMemory GOGC became %d", gogc)
	}
	d.opts.ReturnMemory = true
	d.startGC()
	if gogc != StartGCPercent {
		t.Fatalf("GOGC %d during the start, want %d", gogc, StartGCPercent)
	}
	d.returnMemory(memFirstApply, 0)
	if gogc != 100 {
		t.Errorf("GOGC %d after the first apply, want 100 again", gogc)
	}
	t.Setenv("GOGC", "200")
	d.startGC()
	if gogc != 100 {
		t.Errorf("with GOGC set GOGC became %d", gogc)
	}
}
