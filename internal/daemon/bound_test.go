package daemon

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestSetRateBoundedByBandwidth: a set-rate above the bandwidth of the
// target's interfaces is refused with the bound in the message, the rate
// echoed as written (bytes units in bits), and nothing changes. The test
// config shapes lan0 at 1gbit (egress) and 100mbit (ingress on ifb-lan0).
func TestSetRateBoundedByBandwidth(t *testing.T) {
	k := newFakeKernel("lan0")
	clk := newFakeClock()
	_, c := runDaemon(t, k, clk, io.Discard, &recNotifier{})
	syncLoop(t, c)
	ctx := context.Background()
	ceil := func(r tbf.Rate) *tbf.Rate { return &r }
	for _, tc := range []struct {
		req  control.SetRateRequest
		want string
	}{
		{control.SetRateRequest{Target: "iface:lan0", Rate: 8 * tbf.Gbit, RateText: "1gbps"},
			"set-rate iface:lan0: rate 1gbps (8gbit) is above lan0 ingress's bandwidth 100mbit (the smallest of the interfaces iface:lan0 names)"},
		{control.SetRateRequest{Target: "iface:lan0", Rate: 2 * tbf.Gbit},
			"rate 2gbit is above lan0 ingress's bandwidth 100mbit"},
		{control.SetRateRequest{Target: "iface:ifb-lan0", Rate: 200 * tbf.Mbit},
			"set-rate iface:ifb-lan0: rate 200mbit is above lan0 ingress's bandwidth 100mbit"},
		{control.SetRateRequest{Target: "alice", Rate: 200 * tbf.Mbit},
			"set-rate alice: rate 200mbit is above lan0 ingress's bandwidth 100mbit (the smallest of the interfaces alice is shaped on)"},
		{control.SetRateRequest{Target: "tier:gold", Rate: 10 * tbf.Mbit, Ceil: ceil(1600 * tbf.Mbit), CeilText: "200mbps"},
			"set-rate tier:gold: ceil 200mbps (1600mbit) is above lan0 ingress's bandwidth 100mbit"},
	} {
		_, err := c.SetRate(ctx, tc.req)
		var br *control.BadRequestError
		if !errors.As(err, &br) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want a 400 with %q", tc.req, err, tc.want)
		}
	}
	st := syncLoop(t, c)
	for _, u := range st.Users {
		if strings.Contains(u.Reason, "override") {
			t.Errorf("a refused set-rate changed %s on %s: %s", u.Name, u.Interface, u.Reason)
		}
	}
	// At the bound is fine.
	if _, err := c.SetRate(ctx, control.SetRateRequest{Target: "alice", Rate: 100 * tbf.Mbit}); err != nil {
		t.Errorf("alice at 100mbit (the bound): %v", err)
	}
	if _, err := c.SetRate(ctx, control.SetRateRequest{Target: "iface:lan0", Rate: 12500 * tbf.Kbit, RateText: "12.5mbit"}); err != nil {
		t.Errorf("iface:lan0 below the bound: %v", err)
	}
}
