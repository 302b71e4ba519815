package control_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestMinRateIsConfigs(t *testing.T) {
	if control.MinRate != config.MinRate {
		t.Errorf("control.MinRate %s, config.MinRate %s: the socket and the config must agree", control.MinRate, config.MinRate)
	}
}

// TestCheckBound: the bound's message names the interface and echoes the
// rate as written, in bits when written in bytes.
func TestCheckBound(t *testing.T) {
	gbit := control.RateBound{Interface: "r-lan", Bandwidth: tbf.Gbit}
	ceil := func(r tbf.Rate, text string) (*tbf.Rate, string) { return &r, text }
	c8g, c8gText := ceil(8*tbf.Gbit, "1gbps")
	for _, tc := range []struct {
		req   control.SetRateRequest
		bound control.RateBound
		want  string // "" accepted
	}{
		{control.SetRateRequest{Target: "iface:r-lan", Rate: 8 * tbf.Gbit, RateText: "1gbps"}, gbit,
			"rate 1gbps (8gbit) is above r-lan's bandwidth 1gbit"},
		{control.SetRateRequest{Target: "iface:r-lan", Rate: 1 << 30, RateText: "1gibit"}, gbit,
			"rate 1gibit (1073741824bit) is above r-lan's bandwidth 1gbit"},
		{control.SetRateRequest{Target: "iface:r-lan", Rate: 1500 * tbf.Mbit, RateText: "1.5gbit"}, gbit,
			"rate 1.5gbit is above r-lan's bandwidth 1gbit"},
		{control.SetRateRequest{Target: "iface:r-lan", Rate: 1500 * tbf.Mbit, RateText: "2gbit"}, gbit, // text that does not match: the value
			"rate 1500mbit is above r-lan's bandwidth 1gbit"},
		{control.SetRateRequest{Target: "alice", Rate: 10 * tbf.Mbit, Ceil: c8g, CeilText: c8gText},
			control.RateBound{Interface: "lan0 ingress", Bandwidth: 100 * tbf.Mbit, Several: true},
			"ceil 1gbps (8gbit) is above lan0 ingress's bandwidth 100mbit (the smallest of the interfaces alice is shaped on)"},
		{control.SetRateRequest{Target: "alice", Rate: tbf.Gbit, RateText: "125mbps"}, gbit, ""},
		{control.SetRateRequest{Target: "alice", Rate: 100 * tbf.Tbit}, control.RateBound{}, ""},
	} {
		err := tc.req.CheckBound(tc.bound)
		var br *control.BadRequestError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want accepted", tc.req, err)
		case tc.want != "" && (!errors.As(err, &br) || err.Error() != tc.want):
			t.Errorf("%+v: %v\nwant %q", tc.req, err, tc.want)
		}
	}
}

// TestRateTextOnTheWire: the client sends a rate as written when it reads
// as the request's value, else the value's own text.
func TestRateTextOnTheWire(t *testing.T) {
	c := 16 * tbf.Gbit
	for _, tc := range []struct {
		req  control.SetRateRequest
		want string
	}{
		{control.SetRateRequest{Target: "a", Rate: 8 * tbf.Gbit, RateText: "1gbps", Ceil: &c, CeilText: "2gbps"},
			`{"target":"a","rate":"1gbps","ceil":"2gbps"}`},
		{control.SetRateRequest{Target: "a", Rate: 8 * tbf.Gbit, RateText: "3mbit"}, `{"target":"a","rate":"8gbit"}`},
		{control.SetRateRequest{Target: "a", Rate: 3 * tbf.Mbit}, `{"target":"a","rate":"3mbit"}`},
	} {
		b, err := json.Marshal(tc.req)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v: %s (%v), want %s", tc.req, b, err, tc.want)
		}
	}
}
