package config

import (
	"errors"
	"strings"
	"testing"
)

// TestMetricsPerUser loads every form of daemon.metrics_per_user.
func TestMetricsPerUser(t *testing.T) {
	for _, c := range []struct {
		value string // "" leaves the key out
		want  UserMetrics
	}{
		{"", UserMetrics{}},
		{"true", UserMetrics{}},
		{"false", UserMetrics{None: true}},
		{`"top:1"`, UserMetrics{Top: 1}},
		{`"top:500"`, UserMetrics{Top: 500}},
	} {
		main := "[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n"
		if c.value != "" {
			main = "[daemon]\nmetrics_per_user = " + c.value + "\n" + main
		}
		plan := mustLoad(t, main, "")
		if got := plan.Daemon.MetricsPerUser; got != c.want {
			t.Errorf("metrics_per_user = %s: %+v, want %+v", c.value, got, c.want)
		}
	}
	if s := (UserMetrics{Top: 7}).String(); s != "top:7" {
		t.Errorf("String: %q", s)
	}
}

// TestMetricsPerUserBad checks that each bad value is refused with its
// position and what is allowed.
func TestMetricsPerUserBad(t *testing.T) {
	for value, want := range map[string]string{
		`"top:0"`:      `etc/shaperd.toml:2:1: daemon.metrics_per_user: "top:0": N of "top:N" must be a whole number from 1 to 100000`,
		`"top:x"`:      `etc/shaperd.toml:2:1: daemon.metrics_per_user: "top:x": N of "top:N" must be a whole number from 1 to 100000`,
		`"top:100001"`: `etc/shaperd.toml:2:1: daemon.metrics_per_user: "top:100001": N of "top:N" must be a whole number from 1 to 100000`,
		`"all"`:        `etc/shaperd.toml:2:1: daemon.metrics_per_user: "all" is not true, false or "top:N"`,
		`10`:           `etc/shaperd.toml:2:1: daemon.metrics_per_user: must be true, false or "top:N", not an integer`,
	} {
		main := "[daemon]\nmetrics_per_user = " + value + "\n[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n"
		_, err := LoadFS(mapFS(main, ""), "etc/shaperd.toml")
		var errs *Errors
		if !errors.As(err, &errs) {
			t.Errorf("metrics_per_user = %s: error %v, want *Errors", value, err)
			continue
		}
		if got := strings.TrimSpace(errs.Error()); got != want {
			t.Errorf("metrics_per_user = %s:\n got  %s\n want %s", value, got, want)
		}
	}
}
