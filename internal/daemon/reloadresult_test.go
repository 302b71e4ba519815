package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
)

// A reload's answer is the result applied: refused with the problems, ok
// with every interface's state, degraded when the kernel then refuses an
// interface's plan; status shows the last one.
func TestReloadResult(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	d, dir := newTestDaemon(t, k, clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d.status().LastReload != nil {
		t.Error("a last reload before any reload")
	}
	writeConfig(t, dir, strings.Replace(testConfig, `ceil = "100mbit"`, `ceil = "1mbit"`, 1), testUsers)
	if err := d.reload(); err == nil {
		t.Fatal("invalid reload accepted")
	}
	r := d.status().LastReload
	if r == nil || r.Result != control.ReloadRefused || len(r.Problems) == 0 || !strings.Contains(r.Problems[0], "tiers.gold.ceil") || !r.At.Equal(clk.Now()) {
		t.Errorf("refused reload: %+v", r)
	}

	// A valid reload that changes alice's tier, which the kernel refuses.
	writeConfig(t, dir, testConfig, strings.Replace(testUsers, `tier = "gold"`, `tier = "bronze"`, 1))
	k.mu.Lock()
	k.refuse = errors.New("RTNETLINK answers: No space left on device")
	k.mu.Unlock()
	if err := d.reload(); err != nil {
		t.Fatalf("valid reload: %v", err)
	}
	r = d.status().LastReload
	if r == nil || r.Result != control.ReloadDegraded || len(r.Interfaces) != 2 {
		t.Fatalf("reload with a kernel refusal: %+v", r)
	}
	for _, i := range r.Interfaces {
		if i.State != control.StateFailed || !strings.Contains(i.Error, "No space left") {
			t.Errorf("%s %s: %s %q, want failed with the kernel's refusal", i.Name, i.Direction, i.State, i.Error)
		}
	}

	k.mu.Lock()
	k.refuse = nil
	k.mu.Unlock()
	writeConfig(t, dir, testConfig, testUsers)
	if err := d.reload(); err != nil {
		t.Fatal(err)
	}
	if r = d.status().LastReload; r.Result != control.ReloadOK || len(r.Interfaces) != 2 || r.Interfaces[0].State != control.StateOK {
		t.Errorf("ok reload: %+v", r)
	}
}
