package fleet

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/shaperd/plan/", "/shaperd/plan0"},
		{"a\xff", "b"},
		{"a\xff\xff", "b"},
		{"\xff\xff", "\x00"},
		{"", "\x00"},
	} {
		if got := string(prefixEnd(c.in)); got != c.want {
			t.Errorf("prefixEnd(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestClientOverrides: a fleet override with an expiry is attached to a
// lease and gone when it ends; one of both directions replaces the
// directed ones; clearing counts what it removed; Range reads keys under
// its prefix only.
func TestClientOverrides(t *testing.T) {
	s := etcdlab.Start(t)
	c := dial(t, s)
	ctx := t.Context()
	alice := policy.Target{Kind: policy.TargetUser, Name: "alice"}
	up := policy.Override{Target: alice, Direction: policy.DirUpload, Rate: tbf.Rate(1_000_000), Set: time.Now()}
	if err := SetOverride(ctx, c, "/o", up); err != nil {
		t.Fatal(err)
	}
	// A key just past the prefix's range ("/o/overrides0") is not read.
	if _, _, err := c.Txn(ctx, PutOp("/o/overrides0", []byte("x"), 0)); err != nil {
		t.Fatal(err)
	}
	both := policy.Override{Target: alice, Rate: tbf.Rate(2_000_000), Set: time.Now(), Until: time.Now().Add(2 * time.Second)}
	if err := SetOverride(ctx, c, "/o", both); err != nil {
		t.Fatal(err)
	}
	ovs, problems, err := Overrides(ctx, c, "/o")
	if err != nil || len(ovs) != 1 || ovs[0].Direction != policy.DirBoth || len(problems) != 0 {
		t.Fatalf("overrides %+v, problems %v (%v); want alice's of both directions only", ovs, problems, err)
	}
	r, err := c.kv.Range(ctx, &pb.RangeRequest{Key: []byte(overrideKey("/o", both.Key()))})
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease == 0 {
		t.Fatalf("the override with an expiry: %v (%v); want it attached to a lease", r.GetKvs(), err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ovs, _, err := Overrides(ctx, c, "/o")
		if err != nil {
			t.Fatal(err)
		}
		if len(ovs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leased override is still there 10 s after its expiry: %+v", ovs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := SetOverride(ctx, c, "/o", up); err != nil {
		t.Fatal(err)
	}
	if n, err := ClearOverride(ctx, c, "/o", alice, policy.DirBoth); err != nil || n != 1 {
		t.Fatalf("clear: %d (%v), want 1", n, err)
	}
	if n, err := ClearOverride(ctx, c, "/o", alice, policy.DirBoth); err != nil || n != 0 {
		t.Fatalf("clear again: %d (%v), want 0", n, err)
	}
}

// TestClientRouters: Routers reads the kept and the leased registrations
// at one revision; a router whose lease is gone is not alive.
func TestClientRouters(t *testing.T) {
	s := etcdlab.Start(t)
	c := dial(t, s)
	ctx := t.Context()
	lease, err := c.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	reg := []byte(`{"router":"r1","revision":7,"health":"ok"}`)
	if _, _, err := c.Txn(ctx, PutOp(RouterKey("/r", "r1"), reg, 0), PutOp(AliveKey("/r", "r1"), reg, lease),
		PutOp(RouterKey("/r", "r2"), []byte(`{"health":"ok"}`), 0), PutOp(RouterKey("/r", "r3"), []byte("{"), 0)); err != nil {
		t.Fatal(err)
	}
	rs, err := Routers(ctx, c, "/r")
	if err != nil || len(rs) != 3 {
		t.Fatalf("routers %+v (%v)", rs, err)
	}
	if rs[0].Router != "r1" || !rs[0].Alive || rs[0].Revision != 7 || rs[1].Router != "r2" || rs[1].Alive ||
		rs[2].Router != "r3" || len(rs[2].Errors) != 1 || !strings.Contains(rs[2].Errors[0], "unreadable registration") {
		t.Errorf("routers %+v", rs)
	}
	kvs, rev, err := c.Range(ctx, RouterKey("/r", ""), AliveKey("/r", ""), "/nothing/")
	if err != nil || len(kvs) != 3 || len(kvs[0]) != 3 || len(kvs[1]) != 1 || len(kvs[2]) != 0 || rev < kvs[0][2].ModRevision {
		t.Errorf("Range of three prefixes: %v rev %d (%v)", kvs, rev, err)
	}
}

// TestClientTLS: fleet.ca, cert and key reach an etcd that requires client
// certificates; without the client certificate it is refused.
func TestClientTLS(t *testing.T) {
	s := etcdlab.StartTLS(t)
	f := &config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second,
		CA: s.TLS.CA, Cert: s.TLS.ClientCert, Key: s.TLS.ClientKey}
	c, err := Dial(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := Push(ctx, c, "/tls", sharedA, Meta{}); err != nil {
		t.Fatalf("push over TLS: %v", err)
	}
	if p, err := Pull(ctx, c, "/tls"); err != nil || p == nil {
		t.Fatalf("pull over TLS: %v %v", p, err)
	}
	noCert := *f
	noCert.Cert, noCert.Key = "", ""
	c2, err := Dial(&noCert)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	ctx2, cancel2 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel2()
	if _, err := Pull(ctx2, c2, "/tls"); err == nil {
		t.Fatal("etcd answered a client without a certificate")
	}
	if _, err := Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, CA: "/nonexistent/ca.pem"}); err == nil ||
		!strings.Contains(err.Error(), "fleet.ca") {
		t.Errorf("a missing CA file: %v", err)
	}
}

// TestClientAuth: fleet.username and password_file (its first line)
// authenticate to an etcd with authentication on, and a token etcd no
// longer takes is replaced; without credentials or with a wrong password
// etcd refuses, and the error says so.
func TestClientAuth(t *testing.T) {
	s := etcdlab.Start(t)
	admin := dial(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error {
			_, err := admin.auth.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "root", Password: "rootpw"})
			return err
		},
		func() error {
			_, err := admin.auth.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"})
			return err
		},
		func() error { _, err := admin.auth.AuthEnable(ctx, &pb.AuthEnableRequest{}); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("rootpw\r\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second, Username: "root", PasswordFile: pw}
	c, err := Dial(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := Push(ctx, c, "/auth", sharedA, Meta{}); err != nil {
		t.Fatalf("push with the password: %v", err)
	}
	c.mu.Lock()
	c.token = "not-a-token" // as after etcd restarted, or the token expired
	c.mu.Unlock()
	if p, err := Pull(ctx, c, "/auth"); err != nil || p == nil || !bytes.Equal(p.Shared.Main, sharedA.Main) {
		t.Fatalf("pull with a stale token: %v (%v)", p, err)
	}
	if _, err := Pull(ctx, admin, "/auth"); err == nil || !strings.Contains(err.Error(), "etcdserver: user name is empty") {
		t.Errorf("a client without credentials: %v", err)
	}
	if err := os.WriteFile(pw, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad, err := Dial(f)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := Pull(ctx, bad, "/auth"); err == nil || !strings.Contains(err.Error(), "authenticating as root: etcdserver: authentication failed") {
		t.Errorf("a wrong password: %v", err)
	}
	f.PasswordFile = filepath.Join(dir, "missing")
	if _, err := Dial(f); err == nil || !strings.Contains(err.Error(), "fleet.password_file") {
		t.Errorf("a missing password file: %v", err)
	}
}

// TestClientEndpoints: an endpoint that refuses connections fails a
// request at once (not when its context ends) with an error naming it;
// with a working endpoint after it the request goes there.
func TestClientEndpoints(t *testing.T) {
	s := etcdlab.Start(t)
	const bad = "http://127.0.0.1:1"
	c, err := Dial(&config.Fleet{Endpoints: []string{bad}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = Pull(ctx, c, "/e")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("pull from %s: %v; want an error naming it", bad, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("pull from %s failed after %v; want at once", bad, d)
	}
	t.Logf("%v", err)
	two, err := Dial(&config.Fleet{Endpoints: []string{bad, s.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	if _, err := Push(ctx, two, "/e", sharedA, Meta{}); err != nil {
		t.Fatalf("push to %s then %s: %v", bad, s.Endpoint, err)
	}
	if _, err := Dial(&config.Fleet{}); err == nil {
		t.Error("Dial without endpoints")
	}
}
