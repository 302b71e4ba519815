package fleetcli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/fleet/fleetd"
	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
)

// nopHandler takes what an agent sees and drops it.
type nopHandler struct{}

func (nopHandler) FleetPlan(*fleet.Plan)                       {}
func (nopHandler) FleetOverrides([]policy.Override, []string)  {}
func (nopHandler) FleetConnected(bool)                         {}
func (nopHandler) FleetUsage(map[string][]policy.RemoteUsage)  {}
func (nopHandler) FleetQuotaReset(map[string]fleet.QuotaReset) {}

// startRouter runs a fleet agent for router under prefix reporting r; stop
// ends it (its lease is revoked: the router is down).
func startRouter(t *testing.T, s *etcdlab.Server, prefix, router string, r fleet.Registration) (stop func()) {
	t.Helper()
	c, err := fleetd.Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := fleetd.NewAgent(c, prefix, router, nopHandler{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	a.Report(r)
	stop = func() { cancel(); <-done; c.Close() }
	t.Cleanup(stop)
	return func() { cancel(); <-done }
}

// awaitRouters waits until the registrations under prefix say alive (by
// router name) as want.
func awaitRouters(t *testing.T, c interface {
	routers() ([]fleet.Registration, error)
}, want map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs, err := c.routers()
		got := map[string]bool{}
		for _, r := range rs {
			if r.Revision != 0 || r.Refused != 0 || r.Health != "starting" {
				got[r.Router] = r.Alive
			}
		}
		same := err == nil && len(got) == len(want)
		for k, v := range want {
			same = same && got[k] == v
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("registrations %v (%v), want %v", got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type routerLister struct {
	s      *etcdlab.Server
	prefix string
}

func (l routerLister) routers() ([]fleet.Registration, error) {
	c, err := fleet.Dial(&config.Fleet{Endpoints: []string{l.s.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return fleet.Routers(ctx, c, l.prefix)
}

// fleet status reports a router that refused the shared plan, one whose
// registration lease is gone and one stuck on an older revision long after
// the push, each with what is wrong, and exits 1 (text and --json); a
// fleet of healthy routers exits 0.
func TestFleetStatusHealth(t *testing.T) {
	s := etcdlab.Start(t)
	c, err := fleet.Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sh := &config.Shared{Name: "shared.toml", UsersName: "users.toml", Main: []byte("[tiers.basic]\nrate = \"2mbit\"\n"),
		Users: []byte("[[user]]\nname = \"alice\"\ntier = \"basic\"\naddresses = [\"198.18.0.10\"]\n")}
	pushed := time.Now().Add(-2 * fleet.StaleAfter)
	var rev int64
	for _, prefix := range []string{"/ok", "/bad"} {
		if rev, err = fleet.Push(t.Context(), c, prefix, sh, fleet.Meta{PushedAt: pushed}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (int, string, string) {
		return runFleet(Env{}, append(args, "--endpoints", s.Endpoint)...)
	}

	okRev, _ := fleet.Pull(t.Context(), c, "/ok")
	startRouter(t, s, "/ok", "good", fleet.Registration{Revision: okRev.Revision, Health: "ok"})
	awaitRouters(t, routerLister{s, "/ok"}, map[string]bool{"good": true})
	if code, out, errb := run("fleet", "status", "--prefix", "/ok"); code != ExitOK || !strings.Contains(out, "good") {
		t.Errorf("a healthy fleet: exit %d\n%s%s", code, out, errb)
	}

	startRouter(t, s, "/bad", "good", fleet.Registration{Revision: rev, Health: "ok"})
	startRouter(t, s, "/bad", "refuser", fleet.Registration{Refused: rev, Health: "ok",
		Errors: []string{"fleet rev 9: shared.toml:2:1: tiers.basic.ceil: below rate"}})
	startRouter(t, s, "/bad", "lagging", fleet.Registration{Health: "ok"})
	stopDead := startRouter(t, s, "/bad", "dead", fleet.Registration{Revision: rev, Health: "ok"})
	awaitRouters(t, routerLister{s, "/bad"}, map[string]bool{"good": true, "refuser": true, "lagging": true, "dead": true})
	stopDead()
	awaitRouters(t, routerLister{s, "/bad"}, map[string]bool{"good": true, "refuser": true, "lagging": true, "dead": false})

	code, out, errb := run("fleet", "status", "--prefix", "/bad")
	if code != ExitError {
		t.Errorf("fleet status with a refusing, a dead and a stale router: exit %d, want %d", code, ExitError)
	}
	for _, want := range []string{
		"refuser: refused: it refused revision",
		"and shapes with its local file's plan",
		"dead: down: no live registration",
		"lagging: stale: it has its local file's plan in force",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fleet status lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "good" && f[3] != "ok" || len(f) >= 4 && f[0] == "dead" && f[3] != "DOWN" {
			t.Errorf("HEALTH column: %q", line)
		}
	}
	if !strings.Contains(errb, "3 of 4 routers not ok") || strings.Contains(errb, "good ") {
		t.Errorf("stderr: %q; want the three routers that are not ok", errb)
	}

	code, out, _ = run("fleet", "status", "--prefix", "/bad", "--json")
	var js struct {
		Health  string               `json:"health"`
		Routers []fleet.Registration `json:"routers"`
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	problems := map[string]int{}
	for _, r := range js.Routers {
		problems[r.Router] = len(r.Problems)
	}
	if code != ExitError || js.Health != "not ok" || problems["good"] != 0 || problems["refuser"] == 0 || problems["dead"] == 0 || problems["lagging"] == 0 {
		t.Errorf("--json: exit %d, health %q, problems %v", code, js.Health, problems)
	}
}

// A fleet command that cannot reach etcd names the endpoints it tried.
func TestFleetTimeoutNamesEndpoints(t *testing.T) {
	for _, args := range [][]string{{"fleet", "status"}, {"fleet", "pull"}, {"clear", "alice", "--fleet"}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var out, errb strings.Builder
		code := Run(ctx, append(args, "--endpoints", "http://127.0.0.1:1"), &out, &errb, Env{})
		cancel()
		if code != ExitError || !strings.Contains(errb.String(), "http://127.0.0.1:1") {
			t.Errorf("%q: exit %d, stderr %q; want exit 1 naming http://127.0.0.1:1", args, code, errb.String())
		}
	}
}
