package control_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/controltest"
)

// FuzzHandler sends arbitrary bodies to every endpoint: the server must not
// panic, must answer JSON, and must refuse bad input with a 4xx (the fake
// never fails, so a 5xx would be the server's own fault).
func FuzzHandler(f *testing.F) {
	for _, s := range []string{
		`{"target":"alice","rate":"3mbit"}`,
		`{"target":"tier:gold","rate":"3mbit","ceil":"5mbit","ramp":"0s","for":"1h"}`,
		`{"target":"iface:lan0","rate":"1.5gbit","ceil":null}`,
		`{"target":"alice","rate":"3mbit","ceil":"2mbit"}`,
		`{"target":"alice","rate":18446744073709551615}`,
		`{"target":"\u0000","rate":"99999999999999999999tbit"}`,
		`{"target":"alice"`, `null`, `[]`, ``, `{}{}`,
	} {
		f.Add("/v1/rate", s)
		f.Add("/v1/clear", s)
	}
	f.Add("/v1/reload", "{}")
	f.Fuzz(func(t *testing.T, path, body string) {
		fake := &controltest.Fake{State: controltest.Sample()}
		srv := control.NewServer(fake, nil)
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(http.MethodPost, "http://shaperd/", strings.NewReader(body))
		if err != nil {
			t.Skip()
		}
		req.URL.Path = path
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("POST %q %q: %d %s", path, body, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("POST %q %q: answer is not JSON: %q", path, body, rec.Body)
		}
		if rec.Code == http.StatusOK && path == "/v1/rate" {
			// Whatever got through is valid.
			for _, r := range fake.SetRates {
				if err := r.Validate(); err != nil || r.Ceil == nil || *r.Ceil < r.Rate {
					t.Fatalf("invalid request reached the service: %+v (%v)", r, err)
				}
			}
		}
	})
}
