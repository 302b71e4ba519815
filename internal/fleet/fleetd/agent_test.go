package fleetd

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// recorder is a Handler that keeps what it was given.
type recorder struct {
	mu        sync.Mutex
	plans     []*fleet.Plan
	overrides []policy.Override
	problems  []string
	up        bool
	usage     map[string][]policy.RemoteUsage
	resets    []map[string]fleet.QuotaReset
	changed   chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 100)} }

func (r *recorder) note() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}
func (r *recorder) FleetPlan(p *fleet.Plan) {
	r.mu.Lock()
	r.plans = append(r.plans, p)
	r.mu.Unlock()
	r.note()
}
func (r *recorder) FleetOverrides(o []policy.Override, p []string) {
	r.mu.Lock()
	r.overrides, r.problems = o, p
	r.mu.Unlock()
	r.note()
}
func (r *recorder) FleetUsage(u map[string][]policy.RemoteUsage) {
	r.mu.Lock()
	if r.usage == nil {
		r.usage = map[string][]policy.RemoteUsage{}
	}
	for k, v := range u {
		r.usage[k] = v
	}
	r.mu.Unlock()
	r.note()
}
func (r *recorder) FleetQuotaReset(q map[string]fleet.QuotaReset) {
	r.mu.Lock()
	r.resets = append(r.resets, q)
	r.mu.Unlock()
	r.note()
}
func (r *recorder) FleetConnected(up bool) { r.mu.Lock(); r.up = up; r.mu.Unlock(); r.note() }

// await waits up to d for cond (checked under the lock) to hold.
func (r *recorder) await(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

func dial(t *testing.T, s *etcdlab.Server) *clientv3.Client {
	t.Helper()
	c, err := Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sharedA is a small shared plan.
var sharedA = &config.Shared{Name: "shared.toml", UsersName: "users.toml",
	Main:  []byte("[tiers.basic]\nrate = \"2mbit\"\n"),
	Users: []byte("[[user]]\nname = \"alice\"\ntier = \"basic\"\naddresses = [\"198.18.0.10\"]\n")}

// TestAgentFollows: the agent hands over the plan and overrides at start
// and every change within a second, registers the router, reports the
// link down when etcd dies, and resumes when it is back.
func TestAgentFollows(t *testing.T) {
	s := etcdlab.Start(t)
	c := dial(t, s)
	ctx := t.Context()
	rev1, err := fleet.Push(ctx, KV(c), "/f", sharedA, fleet.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	ac := dial(t, s)
	rec := newRecorder()
	a := NewAgent(ac, "/f", "r1", rec, slog.New(slog.NewTextHandler(io.Discard, nil)))
	actx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.Run(actx); close(done) }()
	a.Report(fleet.Registration{Version: "v1", Revision: rev1, Health: "ok"})

	rec.await(t, 5*time.Second, "the first plan and the link up", func() bool {
		return len(rec.plans) == 1 && rec.plans[0].Revision == rev1 && rec.up
	})
	sharedB := *sharedA
	sharedB.Main = []byte("[tiers.basic]\nrate = \"3mbit\"\n")
	start := time.Now()
	rev2, err := fleet.Push(ctx, KV(c), "/f", &sharedB, fleet.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	rec.await(t, time.Second, "the second plan within 1 s", func() bool {
		return len(rec.plans) == 2 && rec.plans[1].Revision == rev2 && string(rec.plans[1].Shared.Main) == string(sharedB.Main)
	})
	t.Logf("plan propagated in %v", time.Since(start))

	o := policy.Override{Target: policy.Target{Kind: policy.TargetUser, Name: "alice"}, Rate: tbf.Rate(1_000_000), Set: time.Now()}
	if err := fleet.SetOverride(ctx, KV(c), "/f", o); err != nil {
		t.Fatal(err)
	}
	tmp := policy.Override{Target: policy.Target{Kind: policy.TargetTier, Name: "basic"}, Direction: policy.DirUpload,
		Rate: tbf.Rate(500_000), Set: time.Now(), Until: time.Now().Add(2 * time.Second)}
	if err := fleet.SetOverride(ctx, KV(c), "/f", tmp); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/f/overrides/bob", "not json"); err != nil {
		t.Fatal(err)
	}
	rec.await(t, time.Second, "two overrides and one problem", func() bool {
		return len(rec.overrides) == 2 && len(rec.problems) == 1
	})
	rec.await(t, 6*time.Second, "the leased override to expire", func() bool {
		return len(rec.overrides) == 1 && rec.overrides[0].Target.Name == "alice"
	})
	if n, err := fleet.ClearOverride(ctx, KV(c), "/f", o.Target, policy.DirBoth); err != nil || n != 1 {
		t.Fatalf("clear: %d %v", n, err)
	}
	rec.await(t, time.Second, "no override", func() bool { return len(rec.overrides) == 0 })

	rs, err := fleet.Routers(ctx, KV(c), "/f")
	if err != nil || len(rs) != 1 || !rs[0].Alive || rs[0].Revision != rev1 || rs[0].Version != "v1" {
		t.Fatalf("routers: %+v %v", rs, err)
	}

	s.Stop()
	rec.await(t, 5*time.Second, "the link down", func() bool { return !rec.up })
	s.Restart()
	rec.await(t, 15*time.Second, "the link up again", func() bool { return rec.up })
	sharedC := *sharedA
	sharedC.Main = []byte("[tiers.basic]\nrate = \"4mbit\"\n")
	rev3, err := fleet.Push(ctx, KV(c), "/f", &sharedC, fleet.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	rec.await(t, 15*time.Second, "the plan pushed after the outage", func() bool {
		return rec.plans[len(rec.plans)-1].Revision == rev3
	})

	stop()
	<-done
	rs, err = fleet.Routers(ctx, KV(c), "/f")
	if err != nil || len(rs) != 1 || rs[0].Alive {
		t.Fatalf("after the agent stopped: %+v %v", rs, err)
	}
}

// TestQuotaLedger: each router writes its own usage keys; every other
// router sees the sum's parts, never its own.
func TestQuotaLedger(t *testing.T) {
	s := etcdlab.Start(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var recs []*recorder
	var agents []*Agent
	for _, name := range []string{"r1", "r2", "r3"} {
		a, rec := startAgent(t, s, "/q", name, log)
		recs, agents = append(recs, rec), append(agents, a)
	}
	for _, rec := range recs {
		rec.await(t, 5*time.Second, "the link up", func() bool { return rec.up })
	}
	agents[0].ReportUsage(map[string]policy.RemoteUsage{"alice": {Start: start, Bytes: 100}})
	agents[1].ReportUsage(map[string]policy.RemoteUsage{"alice": {Start: start, Bytes: 250}})
	sum := func(rs []policy.RemoteUsage) (n uint64) {
		for _, r := range rs {
			n += r.Bytes
		}
		return n
	}
	recs[2].await(t, 2*time.Second, "r3 to see alice's usage on r1 and r2", func() bool {
		return len(recs[2].usage["alice"]) == 2 && sum(recs[2].usage["alice"]) == 350
	})
	recs[0].await(t, 2*time.Second, "r1 to see r2's usage only", func() bool {
		return len(recs[0].usage["alice"]) == 1 && recs[0].usage["alice"][0].Router == "r2" && sum(recs[0].usage["alice"]) == 250
	})
	agents[0].ReportUsage(map[string]policy.RemoteUsage{"alice": {Start: start, Bytes: 400}})
	recs[2].await(t, 2*time.Second, "r3 to see r1's new count", func() bool { return sum(recs[2].usage["alice"]) == 650 })
}

// A fleet-wide quota reset reaches every agent with the deletion of the
// user's usage keys (the remote sums drop at once), and an agent that
// starts later reads it too.
func TestQuotaResetFleetWide(t *testing.T) {
	s := etcdlab.Start(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	run := func(name string) (*Agent, *recorder) {
		a, rec := startAgent(t, s, "/q", name, log)
		rec.await(t, 5*time.Second, name+"'s link up", func() bool { return rec.up })
		return a, rec
	}
	a1, _ := run("r1")
	_, r2 := run("r2")
	a1.ReportUsage(map[string]policy.RemoteUsage{"alice": {Start: start, Bytes: 900}})
	r2.await(t, 2*time.Second, "r2 to see alice's usage on r1", func() bool {
		return len(r2.usage["alice"]) == 1 && r2.usage["alice"][0].Bytes == 900
	})

	c, err := fleet.Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	at := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	_, deleted, err := fleet.ResetQuota(t.Context(), c, "/q", "alice", fleet.QuotaReset{At: at, By: "test"})
	if err != nil || deleted != 1 {
		t.Fatalf("ResetQuota: %d usage keys deleted, %v; want r1's", deleted, err)
	}
	r2.await(t, 2*time.Second, "r2 to get the reset and see no usage of alice", func() bool {
		return len(r2.resets) == 1 && r2.resets[0]["alice"].At.Equal(at) && len(r2.usage["alice"]) == 0
	})
	_, r3 := run("r3")
	r3.await(t, 2*time.Second, "a router started later to read the reset", func() bool {
		return len(r3.resets) == 1 && r3.resets[0]["alice"].By == "test"
	})
}

// startAgent runs an agent of router name under prefix until the test
// ends, reporting to a new recorder.
func startAgent(t *testing.T, s *etcdlab.Server, prefix, name string, log *slog.Logger) (*Agent, *recorder) {
	t.Helper()
	rec := newRecorder()
	a := NewAgent(dial(t, s), prefix, name, rec, log)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return a, rec
}
