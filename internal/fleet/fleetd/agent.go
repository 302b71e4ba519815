package fleetd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/pkg/policy"
)

// LeaseTTL is the registration lease's time to live: a router that stops
// (or loses etcd) for longer is shown as not alive.
const LeaseTTL = 10 * time.Second

// Backoff bounds: after a failure the agent waits MinBackoff, doubling up
// to MaxBackoff, each wait with up to 50 % random jitter.
const (
	MinBackoff = 200 * time.Millisecond
	MaxBackoff = 10 * time.Second
)

// Handler receives what the agent sees. Its methods are called from the
// agent's goroutines and must not block for long.
type Handler interface {
	// FleetPlan is the shared plan at the newest revision seen (also
	// when it repeats one already applied, e.g. after a reconnect).
	FleetPlan(p *fleet.Plan)
	// FleetOverrides is the full set of fleet overrides, and keys that
	// could not be read.
	FleetOverrides(o []policy.Override, problems []string)
	// FleetConnected says whether the link to etcd is up.
	FleetConnected(up bool)
	// FleetUsage is, for each user whose usage changed on another router,
	// their usage on every other router (the quota ledger).
	FleetUsage(remote map[string][]policy.RemoteUsage)
	// FleetQuotaReset is the fleet-wide quota resets read (every one at
	// the first read and after a reconnect, then each new one), by user;
	// the handler applies each once (policy.Usage.ResetFleet).
	FleetQuotaReset(resets map[string]fleet.QuotaReset)
}

// Agent is a router's side of the fleet: it follows the plan and override
// keys with a watch (progress notifications on, resumed after outages
// from the last revision seen), keeps the router's registration under a
// lease with keep-alive, and reports the connection state.
type Agent struct {
	c      *clientv3.Client
	prefix string
	router string
	h      Handler
	log    *slog.Logger

	mu     sync.Mutex
	reg    fleet.Registration
	report chan struct{}
	// usage is this router's usage not yet written, by user.
	usage      map[string]policy.RemoteUsage
	usageReady chan struct{}
}

// NewAgent returns an agent for router under prefix; Run runs it.
func NewAgent(c *clientv3.Client, prefix, router string, h Handler, log *slog.Logger) *Agent {
	return &Agent{c: c, prefix: prefix, router: router, h: h, log: log,
		reg: fleet.Registration{Router: router, Health: "starting"}, report: make(chan struct{}, 1),
		usage: map[string]policy.RemoteUsage{}, usageReady: make(chan struct{}, 1)}
}

// Report replaces the router's registration; the agent writes it as soon
// as it can (the newest wins).
func (a *Agent) Report(r fleet.Registration) {
	r.Router = a.router
	a.mu.Lock()
	a.reg = r
	a.mu.Unlock()
	select {
	case a.report <- struct{}{}:
	default:
	}
}

// ReportUsage queues this router's usage of some users (the quota
// ledger's own keys); the agent writes the newest of each as soon as it
// can. Router fields are ignored.
func (a *Agent) ReportUsage(u map[string]policy.RemoteUsage) {
	if len(u) == 0 {
		return
	}
	a.mu.Lock()
	for user, x := range u {
		x.Router = ""
		a.usage[user] = x
	}
	a.mu.Unlock()
	select {
	case a.usageReady <- struct{}{}:
	default:
	}
}

// writeUsage writes queued usage, at most usageBatch keys per
// transaction, until ctx ends.
func (a *Agent) writeUsage(ctx context.Context, ok func()) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.usageReady:
		}
		a.mu.Lock()
		batch := a.usage
		a.usage = map[string]policy.RemoteUsage{}
		a.mu.Unlock()
		ops := make([]clientv3.Op, 0, usageBatch)
		flush := func() error {
			if len(ops) == 0 {
				return nil
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := a.c.Txn(wctx).Then(ops...).Commit()
			ops = ops[:0]
			return err
		}
		var err error
		for user, x := range batch {
			b, _ := json.Marshal(x)
			ops = append(ops, clientv3.OpPut(fleet.UsageKey(a.prefix, user, a.router), string(b)))
			if len(ops) == usageBatch {
				if err = flush(); err != nil {
					break
				}
			}
		}
		if err == nil {
			err = flush()
		}
		if err != nil {
			a.mu.Lock()
			for user, x := range batch { // newer reports win
				if _, newer := a.usage[user]; !newer {
					a.usage[user] = x
				}
			}
			a.mu.Unlock()
			select {
			case a.usageReady <- struct{}{}:
			default:
			}
			return fmt.Errorf("etcd: writing quota usage: %w", err)
		}
		ok()
	}
}

// usageBatch is the most usage keys written in one transaction (etcd's
// default limit is 128 operations).
const usageBatch = 100

// Run follows the fleet until ctx ends; then it revokes the registration
// lease (the router shows as not alive at once) and returns.
func (a *Agent) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); a.retry(ctx, "quota usage", a.writeUsage) }()
	go func() { defer wg.Done(); a.retry(ctx, "watch", a.follow) }()
	go func() { defer wg.Done(); a.retry(ctx, "registration", a.register) }()
	go func() { defer wg.Done(); a.connState(ctx) }()
	wg.Wait()
}

// retry runs f until ctx ends, waiting with backoff and jitter after each
// failure; a run that got going (f called ok) resets the backoff.
func (a *Agent) retry(ctx context.Context, what string, f func(ctx context.Context, ok func()) error) {
	wait := MinBackoff
	for ctx.Err() == nil {
		err := f(ctx, func() { wait = MinBackoff })
		if ctx.Err() != nil {
			return
		}
		a.log.Warn("fleet: "+what+" interrupted; retrying", "err", err, "in", wait)
		t := time.NewTimer(wait + time.Duration(rand.Int64N(int64(wait)/2+1)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, MaxBackoff)
	}
}

// follow reads the plan and overrides, hands them over, and watches for
// changes from the next revision.
func (a *Agent) follow(ctx context.Context, ok func()) error {
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := a.c.Txn(gctx).Then(
		clientv3.OpGet(fleet.PlanDir(a.prefix), clientv3.WithPrefix()),
		clientv3.OpGet(fleet.OverridesDir(a.prefix), clientv3.WithPrefix()),
		clientv3.OpGet(fleet.UsageDir(a.prefix), clientv3.WithPrefix()),
		clientv3.OpGet(fleet.QuotaResetDir(a.prefix), clientv3.WithPrefix()),
	).Commit()
	cancel()
	if err != nil {
		return fmt.Errorf("etcd: reading %s: %w", a.prefix, err)
	}
	ok()
	st := fleet.NewState(a.prefix)
	users := map[string]bool{}
	resets := map[string]fleet.QuotaReset{}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			st.Put(string(kv.Key), kv.Value, kv.ModRevision)
			if u := st.PutUsage(string(kv.Key), kv.Value); u != "" {
				users[u] = true
			}
			if u, qr, ok := st.QuotaResetOf(string(kv.Key), kv.Value); ok {
				resets[u] = qr
			}
		}
	}
	if p := st.Plan(); p != nil {
		a.h.FleetPlan(p)
	}
	a.h.FleetOverrides(st.Overrides())
	a.usageChanged(st, users)
	if len(resets) > 0 {
		a.h.FleetQuotaReset(resets)
	}
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer wcancel()
	wch := a.c.Watch(wctx, a.prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1),
		clientv3.WithProgressNotify())
	for wr := range wch {
		if wr.CompactRevision != 0 {
			return fmt.Errorf("etcd: watch fell behind compaction at revision %d; reading everything again", wr.CompactRevision)
		}
		if err := wr.Err(); err != nil {
			return fmt.Errorf("etcd: watch: %w", err)
		}
		var planCh, ovCh bool
		users := map[string]bool{}
		resets := map[string]fleet.QuotaReset{}
		for _, ev := range wr.Events {
			var p, o bool
			var u string
			if ev.Type == clientv3.EventTypeDelete {
				p, o = st.Del(string(ev.Kv.Key))
				u = st.DelUsage(string(ev.Kv.Key))
			} else {
				p, o = st.Put(string(ev.Kv.Key), ev.Kv.Value, ev.Kv.ModRevision)
				if _, router, _ := st.UsageOf(string(ev.Kv.Key)); router != a.router {
					u = st.PutUsage(string(ev.Kv.Key), ev.Kv.Value)
				}
				if ru, qr, ok := st.QuotaResetOf(string(ev.Kv.Key), ev.Kv.Value); ok {
					resets[ru] = qr
				}
			}
			planCh, ovCh = planCh || p, ovCh || o
			if u != "" {
				users[u] = true
			}
		}
		a.usageChanged(st, users)
		if len(resets) > 0 {
			a.h.FleetQuotaReset(resets)
		}
		if planCh {
			if p := st.Plan(); p != nil {
				a.h.FleetPlan(p)
			}
		}
		if ovCh {
			a.h.FleetOverrides(st.Overrides())
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("etcd: watch ended")
}

// usageChanged hands the other routers' usage of users to the handler.
func (a *Agent) usageChanged(st *fleet.State, users map[string]bool) {
	if len(users) == 0 {
		return
	}
	out := make(map[string][]policy.RemoteUsage, len(users))
	for u := range users {
		out[u] = st.Remote(u, a.router)
	}
	a.h.FleetUsage(out)
}

// register keeps the registration under a lease and rewrites it on
// every Report.
func (a *Agent) register(ctx context.Context, ok func()) error {
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	lease, err := a.c.Grant(gctx, int64(LeaseTTL/time.Second))
	cancel()
	if err != nil {
		return fmt.Errorf("etcd: lease: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = a.c.Revoke(rctx, lease.ID)
		cancel()
	}()
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	ka, err := a.c.KeepAlive(kctx, lease.ID)
	if err != nil {
		return fmt.Errorf("etcd: keep-alive: %w", err)
	}
	put := func() error {
		a.mu.Lock()
		r := a.reg
		a.mu.Unlock()
		r.Updated = time.Now().UTC()
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = a.c.Txn(pctx).Then(
			clientv3.OpPut(fleet.RouterKey(a.prefix, a.router), string(b)),
			clientv3.OpPut(fleet.AliveKey(a.prefix, a.router), string(b), clientv3.WithLease(lease.ID)),
		).Commit()
		if err != nil {
			return fmt.Errorf("etcd: writing the registration: %w", err)
		}
		return nil
	}
	if err := put(); err != nil {
		return err
	}
	ok()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, alive := <-ka:
			if !alive {
				return errors.New("etcd: the registration lease expired")
			}
		case <-a.report:
			if err := put(); err != nil {
				select { // write it again after the retry
				case a.report <- struct{}{}:
				default:
				}
				return err
			}
		}
	}
}

// connState reports the client connection's state changes: up while the
// connection is READY. It waits for changes; it does not poll.
func (a *Agent) connState(ctx context.Context) {
	conn := a.c.ActiveConnection()
	up := false
	a.h.FleetConnected(false)
	for {
		s := conn.GetState()
		if now := s == connectivity.Ready; now != up {
			up = now
			a.h.FleetConnected(up)
			a.log.Info("fleet: etcd connection", "up", up, "state", s.String())
		}
		if !conn.WaitForStateChange(ctx, s) {
			return
		}
	}
}
