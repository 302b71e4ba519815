package check

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/internal/statefile"
	"github.com/shaperd/shaperd/pkg/config"
)

// TestCheckRouter: --check of a router whose tiers and users come from
// the fleet passes with the cached shared plan, and without one checks
// the file alone.
func TestCheckRouter(t *testing.T) {
	dir := t.TempDir()
	local := fleetTestConfig[:strings.Index(fleetTestConfig, "[tiers.bronze]")] + fleetTestConfig[strings.Index(fleetTestConfig, "[fleet]"):]
	p := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(local, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, note := routerPlan(p)
	if len(errs) == 0 || !strings.Contains(note, "checked the file alone") {
		t.Fatalf("without a shared plan: %v, note %q", errs, note)
	}
	b, err := json.Marshal(fleet.Cache{Plan: sharedPlan(5, "30mbit")})
	if err != nil {
		t.Fatal(err)
	}
	if err := statefile.WriteAtomic(filepath.Join(dir, "state", fleet.CacheFile), b, 0o640); err != nil {
		t.Fatal(err)
	}
	_, errs, note = routerPlan(p)
	if len(errs) != 0 || !strings.Contains(note, "cached shared plan, revision 5") {
		t.Fatalf("with the cached plan: %v, note %q", errs, note)
	}
}

// --check of a router says why it has no shared plan from etcd: etcd
// unreachable (naming the endpoint), or reachable and holding none.
func TestCheckRouterSaysWhyNoSharedPlan(t *testing.T) {
	s := etcdlab.Start(t)
	for _, tt := range []struct {
		endpoint, want, not string
	}{
		{"http://127.0.0.1:1", "etcd http://127.0.0.1:1 unreachable", "holds no shared plan"},
		{s.Endpoint, "etcd " + s.Endpoint + " holds no shared plan under /shaperd", "unreachable"},
	} {
		dir := t.TempDir()
		cfg := strings.Replace(fleetTestConfig, "http://127.0.0.1:1", tt.endpoint, 1)
		writeConfig(t, dir, cfg, testUsers)
		_, errs, note := routerPlan(filepath.Join(dir, "shaperd.toml"))
		if len(errs) != 0 || !strings.Contains(note, tt.want) || strings.Contains(note, tt.not) ||
			!strings.Contains(note, "checked the file alone") {
			t.Errorf("etcd %s: %v, note %q; want it to say %q", tt.endpoint, errs, note, tt.want)
		}
	}
}

// TestFleetCheckRouterCapped: `shaperd --check` of a router whose upload
// side is 50mbit, with the fleet's shared plan (gold's ceil 100mbit)
// pulled from a real etcd, passes with a note at the shared plan's key.
func TestFleetCheckRouterCapped(t *testing.T) {
	s := etcdlab.Start(t)
	c, err := fleet.Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sh := sharedPlan(0, "30mbit").Shared
	sh.Name, sh.UsersName = "shared.toml", "users.toml"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := fleet.Push(ctx, c, "/caps", &sh, fleet.Meta{PushedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	router := capsConfig + "\n[fleet]\nendpoints = [\"" + s.Endpoint + "\"]\nprefix = \"/caps\"\nrouter = \"r1\"\ndial_timeout = \"2s\"\n"
	path := writeConfig(t, dir, router, testUsers)
	plan, errs, note := routerPlan(path)
	if len(errs) != 0 || plan == nil || !strings.Contains(note, "checked with the fleet's shared plan") {
		t.Fatalf("check: errors %v, note %q", errs, note)
	}
	notes := config.FormatNotes(keyNotes(plan), 0)
	want := "note: tiers.gold.ceil: ceil 100mbit is above the bandwidth 50mbit of interface lan0 (ingress): capped to 50mbit"
	if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasSuffix(n, "shared.toml:9:1: "+want) }) {
		t.Errorf("notes %q; want one at shared.toml:9:1: %q", notes, want)
	}
}
