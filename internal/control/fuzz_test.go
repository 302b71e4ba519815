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

// FuzzHandler sends arbitrary bodies to every endpoint, as root (admin) or
// as a caller with no role: the server must not panic, must answer JSON,
// must refuse bad input with a 4xx (the fake never fails, so a 5xx would be
// the server's own fault), must call the service only for an admin's
// well-formed request, and whatever set-rate reaches the service is valid.
func FuzzHandler(f *testing.F) {
	for _, s := range []string{
		`{"target":"alice","rate":"3mbit"}`,
		`{"target":"tier:gold","rate":"3mbit","ceil":"5mbit","ramp":"0s","for":"1h"}`,
		`{"target":"iface:lan0","rate":"1.5gbit","ceil":null}`,
		`{"target":"alice","rate":"3mbit","ceil":"2mbit"}`,
		`{"target":"alice","rate":18446744073709551615}`,
		`{"target":"\u0000","rate":"99999999999999999999tbit"}`,
		`{"target":"alice"`, `null`, `[]`, ``, `{}{}`,
		// Strictness: exact names, no duplicates, types, signs.
		`{"TARGET":"alice","rate":"3mbit"}`,
		`{"Target":"alice","Rate":"3mbit"}`,
		`{"target":"alice","rate":"3mbit","rate":"1bit"}`,
		`{"target":"alice","target":"bob","rate":"3mbit"}`,
		`{"target":"alice","rate":"1bit"}`,
		`{"target":"alice","rate":"7bit"}`,
		`{"target":"alice","rate":"1gbps"}`,
		`{"target":"alice","rate":"3mbit","ramp":"-1s"}`,
		`{"target":"alice","rate":"3mbit","for":"-1h"}`,
		`{"target":"alice","rate":"3mbit","for":0}`,
		`{"target":{"name":"alice"},"rate":"3mbit"}`,
		`{"target":"alice","rate":["3mbit"]}`,
		`{"target":"alice","rate":true}`,
		`{"target":"mallory","rate":"3mbit"}`,
		`{"target":"alice","rate":"3mbit"} trailing`,
		`{"target":"alice","rate":"3mbit","burst":"1kb"}`,
		`{"target":"al\u0069ce","r\u0061te":"3mbit"}`,
		"\ufeff{}",
		`{"target":"alice","rate":"` + strings.Repeat("9", 300) + `bit"}`,
	} {
		f.Add("/v1/rate", s, true)
		f.Add("/v1/clear", s, true)
		f.Add("/v1/rate", s, false)
	}
	f.Add("/v1/reload", "{}", true)
	f.Add("/v1/reload", "", false)
	f.Add("/v1/status", "", false)
	f.Fuzz(func(t *testing.T, path, body string, admin bool) {
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
		peer := control.Peer{UID: 0, PID: 1}
		if !admin {
			peer = control.Peer{UID: 65534, GID: 65534, PID: 1}
		}
		req = req.WithContext(control.WithPeer(req.Context(), peer))
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("POST %q %q: %d %s", path, body, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("POST %q %q: answer is not JSON: %q", path, body, rec.Body)
		}
		calls := fake.CallLog()
		if !admin && (len(calls) != 0 || (rec.Code != http.StatusForbidden && rec.Code != http.StatusNotFound)) {
			t.Fatalf("POST %q %q as nobody: %d %s, service calls %v; want 403 and no call", path, body, rec.Code, rec.Body, calls)
		}
		switch rec.Code {
		case http.StatusBadRequest, http.StatusForbidden, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
			if len(calls) != 0 {
				t.Fatalf("POST %q %q: %d but the service was called: %v", path, body, rec.Code, calls)
			}
		}
		if rec.Code == http.StatusOK && path == "/v1/rate" {
			// Whatever got through is valid, and came from a strict object.
			for _, r := range fake.SetRates {
				if err := r.Validate(); err != nil || r.Ceil == nil || *r.Ceil < r.Rate {
					t.Fatalf("invalid request reached the service: %+v (%v)", r, err)
				}
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(body), &m); err != nil {
				t.Fatalf("accepted %q, which is not a JSON object: %v", body, err)
			}
			for k := range m {
				switch k {
				case "target", "rate", "ceil", "ramp", "for":
				default:
					t.Fatalf("accepted %q with field %q", body, k)
				}
			}
		}
	})
}
