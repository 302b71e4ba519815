package control_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/controltest"
)

// countingReader yields n bytes of 'a' after a prefix and counts what was read.
type countingReader struct {
	prefix string
	n, off int64
	read   int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	k := int64(len(p))
	if r.off+k > r.n {
		k = r.n - r.off
	}
	for i := range p[:k] {
		if pos := r.off + int64(i); pos < int64(len(r.prefix)) {
			p[i] = r.prefix[pos]
		} else {
			p[i] = 'a'
		}
	}
	r.off += k
	r.read += k
	return int(k), nil
}

// TestHugeBodyNotRead: a 10 MB body gets 413 after at most the server's
// limit has been read, on every endpoint that takes a body.
func TestHugeBodyNotRead(t *testing.T) {
	for _, path := range []string{"/v1/rate", "/v1/clear", "/v1/reload"} {
		fake := &controltest.Fake{State: controltest.Sample()}
		srv := control.NewServer(fake, nil)
		body := &countingReader{prefix: `{"target":"`, n: 10 << 20}
		req := httptest.NewRequest(http.MethodPost, path, body)
		req = req.WithContext(control.WithPeer(req.Context(), control.Peer{UID: 0}))
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "larger than 65536 bytes") {
			t.Errorf("%s: %d %s, want 413", path, rec.Code, rec.Body)
		}
		if body.read > control.MaxRequestBytes+1 {
			t.Errorf("%s: the server read %d bytes of a 10 MB body; at most %d", path, body.read, control.MaxRequestBytes+1)
		}
		if calls := fake.CallLog(); len(calls) != 0 {
			t.Errorf("%s: the service was called: %v", path, calls)
		}
	}
}

// TestHugeBodyOverSocket: over the socket, the 413 comes while the client
// is still sending its 10 MB (the server does not wait for the rest).
func TestHugeBodyOverSocket(t *testing.T) {
	fake := &controltest.Fake{State: controltest.Sample()}
	path := controltest.Serve(t, fake)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	const size = 10 << 20
	sent := make(chan int64, 1)
	go func() {
		io.WriteString(c, "POST /v1/rate HTTP/1.1\r\nHost: shaperd\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\n\r\n")
		n, _ := io.Copy(c, &countingReader{prefix: `{"target":"`, n: size})
		sent <- n
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", resp.StatusCode)
	}
	c.Close() // ends the writer
	if n := <-sent; n >= size {
		t.Errorf("the client could send all %d bytes before the answer came: the server read them", n)
	}
	if len(fake.CallLog()) != 0 {
		t.Errorf("service called: %v", fake.CallLog())
	}
}

// TestMalformedClearAndReload: the other endpoints are as strict as set-rate.
func TestMalformedClearAndReload(t *testing.T) {
	fake := &controltest.Fake{State: controltest.Sample()}
	path := controltest.Serve(t, fake)
	for _, tc := range []struct {
		url, body string
		code      int
		msg       string
	}{
		{"/v1/clear", `{"TARGET":"alice"}`, 400, `unknown field "TARGET" (field names are lower case: "target")`},
		{"/v1/clear", `{"target":"alice","target":"bob"}`, 400, `field "target" given twice`},
		{"/v1/clear", `{"target":["alice"]}`, 400, `field "target": got an array, want a string`},
		{"/v1/clear", ``, 400, "empty"},
		{"/v1/clear", `"alice"`, 400, "expected a JSON object, got a string"},
		{"/v1/clear", `{"target":"mallory"}`, 404, `unknown target "mallory"`},
		{"/v1/reload", `{"now":true}`, 400, `unknown field "now"`},
		{"/v1/reload", `[]`, 400, "expected a JSON object, got an array"},
		{"/v1/reload", `{} x`, 400, "after the JSON object"},
	} {
		code, body := raw(t, path, "POST", tc.url, tc.body)
		er := errorOf(t, body)
		if code != tc.code || !strings.Contains(er.Error, tc.msg) {
			t.Errorf("POST %s %s: %d %q, want %d with %q", tc.url, tc.body, code, er.Error, tc.code, tc.msg)
		}
	}
	for _, body := range []string{"", "{}", " {} \n"} {
		if code, b := raw(t, path, "POST", "/v1/reload", body); code != 200 {
			t.Errorf("reload with body %q: %d %s", body, code, b)
		}
	}
	if got := strings.Join(fake.CallLog(), ","); got != "clear mallory,reload,reload,reload" {
		t.Errorf("service calls %q; want only the unknown target's clear and the three good reloads", got)
	}
}
