package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// eventsConfig: gold has a window 10:30-11:00 every day (ceil 60mbit);
// bronze has a 1 MiB daily quota (2mbit beyond it).
var eventsConfig = strings.Replace(testConfig, `[tiers.bronze]
rate = "5mbit"
ceil = "20mbit"`, `[tiers.bronze]
rate = "5mbit"
ceil = "20mbit"
quota = "1mb"
quota_period = "day"
over_quota_rate = "2mbit"
over_quota_ceil = "2mbit"`, 1) + `
[[tiers.gold.schedule]]
days = ["all"]
from = "10:30"
to = "11:00"
ceil = "60mbit"
`

// newEventsDaemon is a daemon on eventsConfig logging to logs.
func newEventsDaemon(t *testing.T, logs *syncBuffer) (*Daemon, *fakeKernel, *fakeClock) {
	t.Helper()
	k := newFakeKernel("lan0")
	clk := newFakeClock() // 10:00 UTC
	dir := t.TempDir()
	writeConfig(t, dir, eventsConfig, testUsers)
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d, k, clk
}

func (d *Daemon) eventCount(kind string) float64 {
	var m dto.Metric
	if err := d.stats.policyEvents.WithLabelValues(kind).Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// Quota exceeded, reset (restored) and a schedule window entered and left
// are each one INFO line with the user (or tier), old and new rates and the
// reason, and one count of shaperd_policy_events_total{kind}; the quota
// gauge follows the usage.
func TestPolicyEventsQuotaAndSchedule(t *testing.T) {
	var logs syncBuffer
	d, _, clk := newEventsDaemon(t, &logs)
	now := clk.Now()
	// bob (bronze) moves 2 MiB: over quota at the next evaluation.
	d.usage.Observe("bob", "k", 0, now)
	d.usage.Observe("bob", "k", 2<<20, now)
	d.policyDirty = true
	if err := d.policyTick(now); err != nil {
		t.Fatal(err)
	}
	if n := d.eventCount(EventQuotaExceeded); n != 1 {
		t.Errorf("quota_exceeded counted %v, want 1", n)
	}
	line := logLine(logs.String(), "kind=quota_exceeded")
	for _, want := range []string{"level=INFO", "user=bob", "old=\"lan0 download 5mbit/20mbit", "new=\"lan0 download 2mbit/2mbit", "reason=\"quota exceeded\""} {
		if !strings.Contains(line, want) {
			t.Errorf("quota_exceeded line lacks %s: %q", want, line)
		}
	}
	qs := d.quotaSnap.Load()
	if qs == nil || len(*qs) != 1 || (*qs)[0].user != "bob" || (*qs)[0].used != 2<<20 {
		t.Errorf("quota gauge samples %+v", qs)
	}

	resp, err := d.resetQuota("bob")
	if err != nil || resp.Was != 2<<20 || !resp.Restored {
		t.Fatalf("quota reset: %+v, %v", resp, err)
	}
	if n := d.eventCount(EventQuotaRestored); n != 1 {
		t.Errorf("quota_restored counted %v, want 1", n)
	}
	if line := logLine(logs.String(), "kind=quota_restored"); !strings.Contains(line, "new=\"lan0 download 5mbit/20mbit") {
		t.Errorf("quota_restored line: %q", line)
	}
	if _, err := d.resetQuota("mallory"); err == nil {
		t.Error("quota reset of an unknown user succeeded")
	}

	// gold's window opens at 10:30 and closes at 11:00.
	clk.Advance(t, 30*time.Minute)
	if err := d.policyTick(clk.Now()); err != nil {
		t.Fatal(err)
	}
	if n := d.eventCount(EventScheduleEntered); n != 1 {
		t.Errorf("schedule_entered counted %v, want 1", n)
	}
	line = logLine(logs.String(), "kind=schedule_entered")
	for _, want := range []string{"tier=gold", "users=1", "old=\"download 50mbit/100mbit", "new=\"download 50mbit/60mbit", "reason=\"entered schedule gold#0"} {
		if !strings.Contains(line, want) {
			t.Errorf("schedule_entered line lacks %s: %q", want, line)
		}
	}
	clk.Advance(t, 30*time.Minute)
	if err := d.policyTick(clk.Now()); err != nil {
		t.Fatal(err)
	}
	if n := d.eventCount(EventScheduleLeft); n != 1 {
		t.Errorf("schedule_left counted %v, want 1", n)
	}
}

// Override set, cleared and expired are events with the old and new rates.
func TestPolicyEventsOverrides(t *testing.T) {
	var logs syncBuffer
	d, _, clk := newEventsDaemon(t, &logs)
	uid := uint32(0)
	rate := 3 * tbf.Mbit
	if _, err := d.setRate(control.SetRateRequest{Target: "alice", Rate: rate, Ramp: control.DurationPtr(0)}, &uid); err != nil {
		t.Fatal(err)
	}
	line := logLine(logs.String(), "kind=override_set")
	for _, want := range []string{"target=alice", "old=\"lan0 download 50mbit/100mbit", "new=\"lan0 download 3mbit/3mbit", "reason=\"set-rate by uid 0\""} {
		if !strings.Contains(line, want) {
			t.Errorf("override_set line lacks %s: %q", want, line)
		}
	}
	if _, err := d.clear(control.ClearRequest{Target: "alice"}); err != nil {
		t.Fatal(err)
	}
	if line := logLine(logs.String(), "kind=override_cleared"); !strings.Contains(line, "new=\"lan0 download 50mbit/100mbit") {
		t.Errorf("override_cleared line: %q", line)
	}
	if _, err := d.setRate(control.SetRateRequest{Target: "tier:gold", Rate: rate, For: control.DurationPtr(time.Minute)}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(t, time.Minute)
	if err := d.policyTick(clk.Now()); err != nil {
		t.Fatal(err)
	}
	line = logLine(logs.String(), "kind=override_expired")
	if !strings.Contains(line, "target=tier:gold") || !strings.Contains(line, "old=\"lan0 download 3mbit/3mbit") || !strings.Contains(line, "new=\"lan0 download 50mbit/100mbit") {
		t.Errorf("override_expired line: %q", line)
	}
	for kind, want := range map[string]float64{EventOverrideSet: 2, EventOverrideCleared: 1, EventOverrideExpired: 1} {
		if n := d.eventCount(kind); n != want {
			t.Errorf("%s counted %v, want %v", kind, n, want)
		}
	}
}

// logLine returns the first log line containing s ("" when none).
func logLine(logs, s string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
