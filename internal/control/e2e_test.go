package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/controltest"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// raw sends a request with body to the socket and returns status and body.
func raw(t *testing.T, path, method, url, body string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://shaperd"+url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, url, ct)
	}
	return resp.StatusCode, string(b)
}

// errorOf decodes an ErrorResponse body, failing the test when it is not one.
func errorOf(t *testing.T, body string) control.ErrorResponse {
	t.Helper()
	var er control.ErrorResponse
	if err := json.Unmarshal([]byte(body), &er); err != nil || er.Error == "" {
		t.Fatalf("body %q is not an error response (%v)", body, err)
	}
	return er
}

func TestStatusRoundTrip(t *testing.T) {
	fake := &controltest.Fake{State: controltest.Sample()}
	path := controltest.Serve(t, fake)
	c := control.NewClient(path)
	defer c.Close()
	got, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fake.Status(context.Background())
	if !reflect.DeepEqual(got, want) {
		t.Errorf("status round trip:\n got %+v\nwant %+v", got, want)
	}
	if got.Users[2].Ramp == nil || got.Users[2].Ramp.To != 3*tbf.Mbit {
		t.Errorf("bob's ramp lost: %+v", got.Users[2].Ramp)
	}
}

func TestStatusWireFormat(t *testing.T) {
	path := controltest.Serve(t, &controltest.Fake{State: controltest.Sample()})
	code, body := raw(t, path, "GET", "/v1/status", "")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	// Stable field names, rates as tc strings, counters as numbers.
	for _, want := range []string{
		`"interfaces":[{"name":"lan0","device":"lan0","shaper":"htb","direction":"egress","bandwidth":"1gbit","users":["alice","bob","carol"],"tiers":[{"name":"bronze","rate":"5mbit","ceil":"10mbit"}`,
		`{"name":"alice","tier":"gold","interface":"lan0","rate":"50mbit","ceil":"100mbit","effective_rate":"50mbit","effective_ceil":"60mbit","reason":"schedule peak","throughput":"9873456bit","bytes":1234567890,"drops":12,"queue_delay":"48.123456ms","direction":"download","device":"lan0"}`,
		`"ramp":{"from":"40mbit","to":"3mbit","until":"2026-12-02T12:00:02Z"}`,
		`"quota":{"used":10737418240,"limit":10737418240,"period_end":"2026-12-03T12:00:00Z"}`,
		`"generated":"2026-12-02T12:00:00Z"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("status JSON lacks %s\nin %s", want, body)
		}
	}
}

func TestSetRate(t *testing.T) {
	fake := &controltest.Fake{State: controltest.Sample(), DefaultRamp: 2 * time.Second}
	c := control.NewClient(controltest.Serve(t, fake))
	defer c.Close()
	ctx := context.Background()

	// No ceil: the server fills in the rate. No ramp: the policy default.
	resp, err := c.SetRate(ctx, control.SetRateRequest{Target: "alice", Rate: 3 * tbf.Mbit})
	if err != nil {
		t.Fatal(err)
	}
	want := control.SetRateResponse{Target: "alice", Users: []string{"alice"}, Rate: 3 * tbf.Mbit, Ceil: 3 * tbf.Mbit, Ramp: control.Duration(2 * time.Second), Direction: "both"}
	if !reflect.DeepEqual(*resp, want) {
		t.Errorf("response %+v, want %+v", *resp, want)
	}
	got := fake.SetRates[0]
	if got.Ceil == nil || *got.Ceil != 3*tbf.Mbit || got.Ramp != nil || got.For != nil {
		t.Errorf("service got %+v (ceil %v), want ceil 3mbit, ramp and for nil", got, got.Ceil)
	}

	// Ramp 0 (at once) is not the same as no ramp; For sets an expiry.
	ceil := 5 * tbf.Mbit
	resp, err = c.SetRate(ctx, control.SetRateRequest{Target: "tier:gold", Rate: 3 * tbf.Mbit, Ceil: &ceil,
		Ramp: control.DurationPtr(0), For: control.DurationPtr(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	got = fake.SetRates[1]
	if got.Ramp == nil || *got.Ramp != 0 || got.For == nil || got.For.Std() != time.Hour || *got.Ceil != ceil {
		t.Errorf("service got %+v, want ramp 0s, for 1h, ceil 5mbit", got)
	}
	if resp.Until == nil || !resp.Until.Equal(time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)) || resp.Ramp != 0 || resp.Ceil != ceil {
		t.Errorf("response %+v (until %v), want until 13:00, ramp 0, ceil 5mbit", resp, resp.Until)
	}
}

func TestSetRateWireValidation(t *testing.T) {
	fake := &controltest.Fake{State: controltest.Sample()}
	path := controltest.Serve(t, fake)
	for _, tc := range []struct {
		name, body string
		code       int
		msg        string
	}{
		{"ceil below rate", `{"target":"alice","rate":"3mbit","ceil":"2mbit"}`, 400, "ceil 2mbit is below rate 3mbit"},
		{"zero rate", `{"target":"alice","rate":"0bit"}`, 400, "below the minimum 8bit"},
		{"one bit", `{"target":"alice","rate":"1bit"}`, 400, "rate 1bit for alice is below the minimum 8bit"},
		{"rate as a number", `{"target":"alice","rate":3000000}`, 400, `field "rate": got a number, want a rate string such as "10mbit"`},
		{"target as a number", `{"target":7,"rate":"1mbit"}`, 400, `field "target": got a number, want a string`},
		{"upper-case field", `{"TARGET":"alice","rate":"1mbit"}`, 400, `unknown field "TARGET" (field names are lower case: "target")`},
		{"mixed-case field", `{"target":"alice","Rate":"1mbit"}`, 400, `unknown field "Rate"`},
		{"duplicate field", `{"target":"alice","rate":"1mbit","rate":"2mbit"}`, 400, `field "rate" given twice`},
		{"duplicate target", `{"target":"bob","target":"alice","rate":"1mbit"}`, 400, `field "target" given twice`},
		{"negative for", `{"target":"alice","rate":"1mbit","for":"-1h"}`, 400, "for -1h0m0s for alice: must be positive"},
		{"null body", `null`, 400, "expected a JSON object, got null"},
		{"truncated", `{"target":"alice","rate":"1m`, 400, "request body"},
		{"negative ramp", `{"target":"alice","rate":"1mbit","ramp":"-1s"}`, 400, "must not be negative"},
		{"zero for", `{"target":"alice","rate":"1mbit","for":"0s"}`, 400, "for 0s"},
		{"bad rate", `{"target":"alice","rate":"3 furlongs"}`, 400, "unknown unit"},
		{"bad duration", `{"target":"alice","rate":"1mbit","ramp":"soon"}`, 400, "Go syntax"},
		{"malformed JSON", `{"target":"alice",`, 400, "request body"},
		{"not an object", `[1,2]`, 400, "request body"},
		{"empty body", ``, 400, "empty"},
		{"unknown field", `{"target":"alice","rate":"1mbit","burst":"10kb"}`, 400, `unknown field "burst"`},
		{"trailing data", `{"target":"alice","rate":"1mbit"} {}`, 400, "after the JSON object"},
		{"empty target", `{"target":"","rate":"1mbit"}`, 400, "empty name"},
		{"bad target kind", `{"target":"group:x","rate":"1mbit"}`, 400, "tier:NAME, node:NAME or iface:NAME"},
		{"empty tier", `{"target":"tier:","rate":"1mbit"}`, 400, "empty name"},
		{"unknown user", `{"target":"mallory","rate":"1mbit"}`, 404, `unknown target "mallory"`},
		{"unknown tier", `{"target":"tier:platinum","rate":"1mbit"}`, 404, `unknown target "tier:platinum"`},
		{"too large", `{"target":"` + strings.Repeat("a", control.MaxRequestBytes) + `","rate":"1mbit"}`, 413, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := raw(t, path, "POST", "/v1/rate", tc.body)
			er := errorOf(t, body)
			if code != tc.code || !strings.Contains(er.Error, tc.msg) {
				t.Errorf("got %d %q, want %d with %q", code, er.Error, tc.code, tc.msg)
			}
			if tc.code == 404 && er.Target == "" {
				t.Errorf("404 without target: %s", body)
			}
		})
	}
	// Only the two unknown targets reached the service; everything else was
	// refused before it.
	if n := len(fake.SetRates); n != 2 {
		t.Errorf("service saw %d requests, want 2 (the unknown targets): %v", n, fake.CallLog())
	}
}

func TestClientErrors(t *testing.T) {
	fake := &controltest.Fake{State: controltest.Sample()}
	c := control.NewClient(controltest.Serve(t, fake))
	defer c.Close()
	ctx := context.Background()

	_, err := c.SetRate(ctx, control.SetRateRequest{Target: "mallory", Rate: tbf.Mbit})
	var nf *control.NotFoundError
	var ae *control.APIError
	if !errors.As(err, &nf) || nf.Target != "mallory" || !errors.As(err, &ae) || ae.StatusCode != 404 {
		t.Errorf("unknown user: %v (%T), want *APIError 404 wrapping *NotFoundError{mallory}", err, err)
	}
	if _, err := c.Clear(ctx, control.ClearRequest{Target: "iface:eth9"}); !errors.As(err, &nf) || nf.Target != "iface:eth9" {
		t.Errorf("clear unknown interface: %v", err)
	}
	if _, err := c.Clear(ctx, control.ClearRequest{Target: "tier:gold"}); err != nil {
		t.Errorf("clear tier:gold: %v", err)
	}

	// The client validates locally: no round trip for a bad request.
	before := len(fake.CallLog())
	low := tbf.Kbit
	_, err = c.SetRate(ctx, control.SetRateRequest{Target: "alice", Rate: tbf.Mbit, Ceil: &low})
	var br *control.BadRequestError
	if !errors.As(err, &br) || len(fake.CallLog()) != before {
		t.Errorf("ceil < rate: %v, calls %v", err, fake.CallLog())
	}

	fake.ReloadErr = &control.ValidationError{Problems: []string{"shaperd.toml:3:8: unknown tier \"platnum\"", "users.toml:9:1: duplicate user \"bob\""}}
	_, err = c.Reload(ctx, control.ReloadRequest{})
	var ve *control.ValidationError
	if !errors.As(err, &ve) || !reflect.DeepEqual(ve.Problems, fake.ReloadErr.(*control.ValidationError).Problems) ||
		!errors.As(err, &ae) || ae.StatusCode != 422 || !strings.Contains(err.Error(), "old one stays in force") {
		t.Errorf("refused reload: %v (%T)", err, err)
	}

	fake.ReloadErr = nil
	fake.StatusErr = errors.New("dump lan0: netlink: device busy")
	_, err = c.Status(ctx)
	if !errors.As(err, &ae) || ae.StatusCode != 500 || !strings.Contains(err.Error(), "device busy") {
		t.Errorf("daemon failure: %v", err)
	}
	fake.StatusErr = control.ErrUnavailable
	if _, err = c.Status(ctx); !errors.Is(err, control.ErrUnavailable) || !errors.As(err, &ae) || ae.StatusCode != 503 {
		t.Errorf("unavailable: %v", err)
	}
}

func TestMethodsAndPaths(t *testing.T) {
	path := controltest.Serve(t, &controltest.Fake{State: controltest.Sample()})
	for _, tc := range []struct {
		method, url string
		code        int
	}{
		{"POST", "/v1/status", 405},
		{"GET", "/v1/rate", 405},
		{"GET", "/v2/status", 404},
		{"GET", "/", 404},
		{"POST", "/v1/reload", 200},
		{"GET", "/v1/overrides", 200},
		{"GET", "/v1/top", 200},
		{"GET", "/v1/quota/reset", 405},
	} {
		code, body := raw(t, path, tc.method, tc.url, "")
		if code != tc.code {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.url, code, body, tc.code)
		}
		if code != 200 {
			errorOf(t, body)
		}
	}
}

// panicky panics in Status.
type panicky struct{ controltest.Fake }

func (p *panicky) Status(context.Context) (*control.Status, error) { panic("boom") }

func TestServicePanicIs500(t *testing.T) {
	path := controltest.Serve(t, &panicky{})
	for range 2 { // and the server keeps serving
		code, body := raw(t, path, "GET", "/v1/status", "")
		if code != 500 || !strings.Contains(errorOf(t, body).Error, "internal error") {
			t.Errorf("got %d %s, want 500 internal error", code, body)
		}
	}
}

// slow blocks in Reload until its context ends.
type slow struct{ controltest.Fake }

func (s *slow) Reload(ctx context.Context, _ control.ReloadRequest) (*control.ReloadStatus, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestRequestTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := control.Listen(path, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := control.NewServer(&slow{}, nil)
	srv.RequestTimeout = 10 * time.Millisecond
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())
	code, body := raw(t, path, "POST", "/v1/reload", "")
	if code != 503 || !strings.Contains(errorOf(t, body).Error, "did not answer in time") {
		t.Errorf("got %d %s, want 503", code, body)
	}
}

func TestClientNoDaemon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.sock")
	_, err := control.NewClient(path).Status(context.Background())
	want := "cannot reach shaperd at " + path + ": is the daemon running? (systemctl status shaperd)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
	// A stale socket: connection refused, same advice.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err = control.NewClient(path).Status(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("stale socket: got %v, want %q", err, want)
	}
}

func TestSocketPath(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == control.SocketEnv {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		flag, env, want string
	}{
		{"", "", control.DefaultSocket},
		{"", "/tmp/e.sock", "/tmp/e.sock"},
		{"/tmp/f.sock", "/tmp/e.sock", "/tmp/f.sock"},
	} {
		if got := control.SocketPath(tc.flag, env(tc.env)); got != tc.want {
			t.Errorf("SocketPath(%q, env %q) = %q, want %q", tc.flag, tc.env, got, tc.want)
		}
	}
	if got := control.SocketPath("", nil); got != control.DefaultSocket {
		t.Errorf("nil getenv: %q", got)
	}
}
