package netnslab

import (
	"strings"
	"testing"
)

func TestParseIperf3(t *testing.T) {
	bps, err := ParseIperf3(`{"start":{},"end":{"sum_sent":{"bits_per_second":2e7},"sum_received":{"bits_per_second":19876543.5}}}`)
	if err != nil || bps != 19876543.5 {
		t.Fatalf("ParseIperf3 = %v, %v; want 19876543.5", bps, err)
	}
	if _, err := ParseIperf3(`{"error":"unable to connect to server: Connection refused"}`); err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Fatalf("ParseIperf3 of an error = %v; want iperf3's error", err)
	}
	if _, err := ParseIperf3(`not json`); err == nil {
		t.Fatal("ParseIperf3 of garbage: no error")
	}
	if _, err := ParseIperf3(`{"end":{}}`); err == nil {
		t.Fatal("ParseIperf3 without sum_received: no error")
	}
}

func TestUniqueName(t *testing.T) {
	a, b := UniqueName("sdtest"), UniqueName("sdtest")
	if a == b || len(a) > 15 || !strings.HasPrefix(a, "sdtest-") {
		t.Fatalf("UniqueName gave %q and %q", a, b)
	}
}

func TestRouterLab(t *testing.T) {
	Require(t)
	l := NewRouterLab(t, RouterLabOptions{Users: 2})
	rates := l.Measure(t, 1,
		Flow{User: l.Users4[0], Dir: Download},
		Flow{User: l.Users6[1], Dir: Upload})
	for i, r := range rates {
		// Unshaped veth TCP runs at gigabits; anything over 100 Mbit/s shows
		// the path and the parsing work.
		t.Logf("flow %d: %.1f Mbit/s", i, r/1e6)
		if r < 100e6 {
			t.Errorf("flow %d: %.0f bit/s; want > 100 Mbit/s unshaped", i, r)
		}
	}
}
