package policy

import (
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// TestUsageRemote: other routers' usage of the same period adds to Used,
// not to Own; usage of another period counts nothing.
func TestUsageRemote(t *testing.T) {
	u := NewUsage(time.UTC)
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	u.Observe("alice", "k", 0, now)
	u.Observe("alice", "k", 100, now)
	start, _ := PeriodBounds(config.PeriodMonth, now, time.UTC)
	u.SetRemote("alice", []RemoteUsage{
		{Router: "r2", Start: start, Bytes: 1000},
		{Router: "r3", Start: start.AddDate(0, -1, 0), Bytes: 5000}, // last month
	})
	if used, _, _ := u.Used("alice", config.PeriodMonth, now); used != 1100 {
		t.Errorf("Used = %d, want 1100", used)
	}
	if own, _, _ := u.Own("alice", config.PeriodMonth, now); own != 100 {
		t.Errorf("Own = %d, want 100", own)
	}
	u.SetRemote("alice", nil)
	if used, _, _ := u.Used("alice", config.PeriodMonth, now); used != 100 {
		t.Errorf("Used after SetRemote(nil) = %d, want 100", used)
	}
}
