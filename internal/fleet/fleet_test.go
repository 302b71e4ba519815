package fleet

import (
	"strconv"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/pkg/config"
)

func dial(t *testing.T, s *etcdlab.Server) *Client {
	t.Helper()
	c, err := Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var sharedA = &config.Shared{Name: "shared.toml", UsersName: "users.toml",
	Main:  []byte("[tiers.basic]\nrate = \"2mbit\"\n"),
	Users: []byte("[[user]]\nname = \"alice\"\ntier = \"basic\"\naddresses = [\"198.18.0.10\"]\n")}

// TestPushPull: a pushed plan reads back whole, with the push's revision.
func TestPushPull(t *testing.T) {
	s := etcdlab.Start(t)
	c := dial(t, s)
	ctx := t.Context()
	if p, err := Pull(ctx, c, "/x"); err != nil || p != nil {
		t.Fatalf("empty store: %v %v", p, err)
	}
	rev, err := Push(ctx, c, "/x", sharedA, Meta{PushedBy: "test", Source: "a.toml"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Pull(ctx, c, "/x")
	if err != nil {
		t.Fatal(err)
	}
	if p.Revision != rev || string(p.Shared.Main) != string(sharedA.Main) || string(p.Shared.Users) != string(sharedA.Users) ||
		p.Meta.PushedBy != "test" || p.Meta.Source != "a.toml" {
		t.Fatalf("pulled %+v (rev %d)", p, rev)
	}
	// Named after the file pushed; users.toml without a UsersSource.
	if sh := p.SharedFor(); sh.Name != "fleet rev "+strconv.FormatInt(rev, 10)+": a.toml" || sh.UsersName != "fleet rev "+strconv.FormatInt(rev, 10)+": users.toml" {
		t.Errorf("SharedFor names %q %q", sh.Name, sh.UsersName)
	}
}
