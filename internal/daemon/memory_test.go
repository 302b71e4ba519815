package daemon

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMemoryReturnedAfterAScrape: with Options.ReturnMemory a /metrics
// scrape (its series and the counter read before it are the idle daemon's
// biggest allocations) returns memory at once; without it nothing does.
func TestMemoryReturnedAfterAScrape(t *testing.T) {
	calls := 0
	freeOSMemory = func() { calls++ }
	t.Cleanup(func() { freeOSMemory = realFreeOSMemory })
	k := newFakeKernel("lan0")
	d, _ := newTestDaemon(t, k, newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	scrape := func() {
		d.MetricsHandler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	}
	scrape()
	if calls != 0 {
		t.Fatalf("without ReturnMemory: %d returns", calls)
	}
	d.opts.ReturnMemory = true
	scrape()
	if calls != 1 {
		t.Errorf("a scrape returned memory %d times, want 1", calls)
	}
}

// TestMemoryReturnedAfterEachBigApply: with Options.ReturnMemory each
// interface's apply of freeAfterChanges changes or more returns memory,
// the first apply's too (its verify dump would pile onto the next
// interface's apply).
func TestMemoryReturnedAfterEachBigApply(t *testing.T) {
	calls := 0
	freeOSMemory = func() { calls++ }
	t.Cleanup(func() { freeOSMemory = realFreeOSMemory })
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
	if n := len(d.ifaces); calls < n {
		t.Errorf("the first apply of %d interfaces returned memory %d times, want one each", n, calls)
	}
}
