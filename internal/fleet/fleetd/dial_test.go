package fleetd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/pkg/config"
)

// TestDialTLS: clientv3 with fleet.ca, cert and key reach an etcd that requires client
// certificates; without the client certificate it is refused.
func TestDialTLS(t *testing.T) {
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
	if _, err := fleet.Push(ctx, KV(c), "/tls", sharedA, fleet.Meta{}); err != nil {
		t.Fatalf("push over TLS: %v", err)
	}
	if p, err := fleet.Pull(ctx, KV(c), "/tls"); err != nil || p == nil {
		t.Fatalf("pull over TLS: %v %v", p, err)
	}
	noCert := *f
	noCert.Cert, noCert.Key = "", ""
	c2, err := Dial(&noCert)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	ctx2, cancel2 := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel2()
	if _, err := fleet.Pull(ctx2, KV(c2), "/tls"); err == nil {
		t.Fatal("etcd answered a client without a certificate")
	}
}

// TestDialAuth: clientv3 with fleet.username and password_file (its first line)
// authenticate to an etcd with authentication on.
func TestDialAuth(t *testing.T) {
	s := etcdlab.Start(t)
	admin := dial(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("rootpw\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second, Username: "root", PasswordFile: pw}
	c, err := Dial(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fleet.Push(ctx, KV(c), "/auth", sharedA, fleet.Meta{}); err != nil {
		t.Fatalf("push with the password: %v", err)
	}
	if _, err := fleet.Pull(ctx, KV(admin), "/auth"); err == nil {
		t.Fatal("etcd answered a client without credentials")
	}
}
