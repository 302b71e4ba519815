package config

import (
	"strconv"
	"strings"
)

// MaxMetricsTopUsers bounds daemon.metrics_per_user = "top:N".
const MaxMetricsTopUsers = 100000

// UserMetrics is daemon.metrics_per_user: which users' classes get their
// own metric series. The zero value is every user (true, the default).
type UserMetrics struct {
	// None: no per-user series, only the interfaces', tiers' and default
	// classes' and the per-tier sums (metrics_per_user = false).
	None bool
	// Top > 0: only the Top users with the most bytes on each interface
	// and direction ("top:N").
	Top int
}

// String is the setting as the config file writes it.
func (m UserMetrics) String() string {
	switch {
	case m.None:
		return "false"
	case m.Top > 0:
		return "top:" + strconv.Itoa(m.Top)
	}
	return "true"
}

// userMetrics reads k: true, false or "top:N".
func (t *table) userMetrics(k string) (UserMetrics, bool) {
	t.allow(k)
	v, ok := t.m[k]
	if !ok {
		return UserMetrics{}, false
	}
	switch v := v.(type) {
	case bool:
		return UserMetrics{None: !v}, true
	case string:
		n, found := strings.CutPrefix(v, "top:")
		top, err := strconv.Atoi(n)
		if found && err == nil && top >= 1 && top <= MaxMetricsTopUsers {
			return UserMetrics{Top: top}, true
		}
		if found {
			t.errf(k, "%q: N of \"top:N\" must be a whole number from 1 to %d", v, MaxMetricsTopUsers)
		} else {
			t.errf(k, "%q is not true, false or \"top:N\"", v)
		}
	default:
		t.errf(k, "must be true, false or \"top:N\", not %s", typeName(v))
	}
	return UserMetrics{}, false
}
