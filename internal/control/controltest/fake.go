// Package controltest provides a fake control.Service and a helper that
// serves one on a real unix socket, for tests of the control API's users.
package controltest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
)

// Fake is an in-memory Service. Targets it knows are the users, "tier:"
// tiers and "iface:" interfaces of its Status; others give a
// *control.NotFoundError. Set the Err fields to make calls fail.
type Fake struct {
	mu sync.Mutex
	// State is what Status returns (a copy each time).
	State control.Status
	// DefaultRamp is reported by SetRate when the request gives none.
	DefaultRamp time.Duration
	// Now stamps Status.Generated and override expiries; nil: a fixed time.
	Now func() time.Time
	// StatusErr, SetRateErr, ClearErr, ReloadErr are returned when set.
	StatusErr, SetRateErr, ClearErr, ReloadErr error
	// Calls records the method calls in order ("status", "set-rate alice", ...).
	Calls []string
	// SetRates records the SetRate requests received.
	SetRates []control.SetRateRequest
	// Reloaded is what Reload answers (nil: an "ok" result with no
	// interfaces).
	Reloaded *control.ReloadStatus
	// Set lists the overrides Overrides returns; SetRate adds to it and
	// Clear removes from it.
	Set []control.OverrideStatus
	// Usage is each user's quota usage, for ResetQuota.
	Usage map[string]uint64
	// TopCounter changes State before each Top answer; nil: none.
	TopCounter func(*control.Status)
}

var _ control.Service = (*Fake)(nil)

func (f *Fake) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
}

// Status returns a copy of State stamped with the fake's clock.
func (f *Fake) Status(ctx context.Context) (*control.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "status")
	if f.StatusErr != nil {
		return nil, f.StatusErr
	}
	st := f.State
	st.Interfaces = slices.Clone(st.Interfaces)
	st.Users = slices.Clone(st.Users)
	st.Generated = f.now()
	return &st, nil
}

// Top is Status, recorded as "top". TopCounter, when set, is called
// first (e.g. to change the throughputs between refreshes).
func (f *Fake) Top(ctx context.Context) (*control.Status, error) {
	f.mu.Lock()
	f.Calls = append(f.Calls, "top")
	if f.TopCounter != nil {
		f.TopCounter(&f.State)
	}
	f.mu.Unlock()
	st, err := f.Status(ctx)
	f.mu.Lock()
	f.Calls = f.Calls[:len(f.Calls)-1] // Status recorded itself
	f.mu.Unlock()
	return st, err
}

// SetRate records req and applies it to the matching users' effective rates.
func (f *Fake) SetRate(ctx context.Context, req control.SetRateRequest) (*control.SetRateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "set-rate "+req.Target)
	f.SetRates = append(f.SetRates, req)
	if f.SetRateErr != nil {
		return nil, f.SetRateErr
	}
	users, err := f.match(req.Target)
	if err != nil {
		return nil, err
	}
	ceil := req.Rate
	if req.Ceil != nil {
		ceil = *req.Ceil
	}
	resp := &control.SetRateResponse{Target: req.Target, Users: users, Rate: req.Rate, Ceil: ceil, Ramp: control.Duration(f.DefaultRamp)}
	if req.Ramp != nil {
		resp.Ramp = *req.Ramp
	}
	if req.For != nil {
		until := f.now().Add(req.For.Std())
		resp.Until = &until
	}
	t, d, _ := control.ParseDirectedTarget(req.Target, req.Direction)
	resp.Direction = d.String()
	f.Set = slices.DeleteFunc(f.Set, func(o control.OverrideStatus) bool {
		return o.Target == t.String() && (o.Direction == d.String() || d == control.DirBoth)
	})
	f.Set = append(f.Set, control.OverrideStatus{Target: t.String(), Direction: d.String(), Rate: req.Rate, Ceil: ceil, Source: control.SourceLocal,
		Ramp: req.Ramp, Until: resp.Until, Set: f.now()})
	for i := range f.State.Users {
		if slices.Contains(users, f.State.Users[i].Name) && (d == control.DirBoth || f.State.Users[i].Direction == "" || f.State.Users[i].Direction == string(d)) {
			f.State.Users[i].EffectiveRate, f.State.Users[i].EffectiveCeil = req.Rate, ceil
			f.State.Users[i].Reason = "override"
		}
	}
	return resp, nil
}

// Clear records the call, checks the target exists and removes its
// overrides from Set.
func (f *Fake) Clear(ctx context.Context, req control.ClearRequest) (*control.ClearResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "clear "+req.Target)
	if f.ClearErr != nil {
		return nil, f.ClearErr
	}
	t, d, err := control.ParseDirectedTarget(req.Target, req.Direction)
	if err != nil {
		return nil, err
	}
	if _, err := f.match(t.String()); err != nil {
		return nil, err
	}
	resp := &control.ClearResponse{Target: t.String(), Direction: d.String(), Cleared: []control.OverrideStatus{}}
	f.Set = slices.DeleteFunc(f.Set, func(o control.OverrideStatus) bool {
		if o.Target == t.String() && (d == control.DirBoth || o.Direction == d.String()) {
			resp.Cleared = append(resp.Cleared, o)
			return true
		}
		return false
	})
	return resp, nil
}

// Reload records the call ("reload", or "reload --allow-removals") and
// returns Reloaded, or ReloadErr.
func (f *Fake) Reload(ctx context.Context, req control.ReloadRequest) (*control.ReloadStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	call := "reload"
	if req.AllowRemovals {
		call += " --allow-removals"
	}
	f.Calls = append(f.Calls, call)
	if f.ReloadErr != nil {
		return nil, f.ReloadErr
	}
	if f.Reloaded != nil {
		r := *f.Reloaded
		return &r, nil
	}
	return &control.ReloadStatus{At: f.now(), Result: control.ReloadOK}, nil
}

// Overrides returns Set.
func (f *Fake) Overrides(ctx context.Context) (*control.OverridesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "overrides")
	return &control.OverridesResponse{Overrides: append([]control.OverrideStatus{}, f.Set...)}, nil
}

// ResetQuota zeroes the user's entry in Usage (a user of State, else a
// *control.NotFoundError).
func (f *Fake) ResetQuota(ctx context.Context, req control.QuotaResetRequest) (*control.QuotaResetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "quota reset "+req.User)
	if _, err := f.match(req.User); err != nil {
		return nil, err
	}
	was := f.Usage[req.User]
	delete(f.Usage, req.User)
	return &control.QuotaResetResponse{User: req.User, Was: was}, nil
}

// Simulate answers with one row per user at its rate, limited by demand.
func (f *Fake) Simulate(ctx context.Context, req control.SimulateRequest) (*control.SimulateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "simulate "+req.Demand)
	resp := &control.SimulateResponse{Text: "simulated\n", Report: []byte(`{"users":[]}`)}
	for _, u := range f.State.Users {
		resp.Users = append(resp.Users, control.SimulatedUser{User: u.Name, Interface: u.Interface,
			Direction: u.Direction, BitsPerSecond: float64(u.EffectiveRate), LimitedBy: "demand"})
	}
	return resp, nil
}

// PlanDiff answers that alice's class on lan0 would change.
func (f *Fake) PlanDiff(ctx context.Context) (*control.PlanDiffResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "reload --dry-run")
	return &control.PlanDiffResponse{Text: "lan0/egress (lan0): 1 kernel changes (0 add, 1 change, 0 delete)\n", Changes: 1,
		Interfaces: []control.PlanDiffInterface{{Interface: "lan0", Direction: "egress", Device: "lan0", State: control.PlanChanged,
			Changes: []control.PlanChange{{Op: "change", Object: "class", Device: "lan0", Handle: "1:105", User: "alice",
				Before: &control.PlanRates{Rate: 20e6, Ceil: 40e6}, After: &control.PlanRates{Rate: 20e6, Ceil: 60e6},
				Text: "change class 1:105 (user alice) on lan0"}},
			Users: []control.PlanUserChange{{User: "alice", Before: &control.PlanUserRates{Rate: 20e6, Ceil: 40e6, Predicted: 40e6},
				After: control.PlanUserRates{Rate: 20e6, Ceil: 60e6, Predicted: 60e6}}}}}}, nil
}

// CallLog returns a copy of Calls.
func (f *Fake) CallLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.Calls)
}

// match returns the names of the users a target selects.
func (f *Fake) match(target string) ([]string, error) {
	t, _, err := control.ParseDirectedTarget(target, "")
	if err != nil {
		return nil, err
	}
	var users []string
	for _, u := range f.State.Users {
		switch {
		case t.Kind == control.TargetUser && u.Name == t.Name,
			t.Kind == control.TargetTier && u.Tier == t.Name,
			t.Kind == control.TargetIface && u.Interface == t.Name:
			if !slices.Contains(users, u.Name) {
				users = append(users, u.Name)
			}
		}
	}
	if len(users) == 0 {
		return nil, &control.NotFoundError{Target: target}
	}
	return users, nil
}

// Serve serves svc on a new socket in a fresh temporary directory and
// returns the socket's path; the server is shut down when the test ends
// (and the test fails if Serve returned an error).
func Serve(t testing.TB, svc control.Service) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := control.Listen(path, "")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return ServeOn(t, svc, l)
}

// ServeOn serves svc on l until the test ends and returns l's address.
// Only root may use it (the server's default Access); see ServeAccess.
func ServeOn(t testing.TB, svc control.Service, l net.Listener) string {
	t.Helper()
	return ServeAccess(t, svc, l, nil)
}

// ServeAccess is ServeOn with the server's Access set to a.
func ServeAccess(t testing.TB, svc control.Service, l net.Listener, a *control.Access) string {
	t.Helper()
	srv := control.NewServer(svc, nil)
	srv.Access = a
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String()
}

// Sample returns a status with two interfaces and three users: alice
// (gold, on lan0 and upload wan0-ingress), bob (silver, ramping) and carol
// (bronze, over quota), with distinct throughputs (bob heaviest). wan0 is
// failed, so status exits 1 on it.
func Sample() control.Status {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	return control.Status{
		Interfaces: []control.InterfaceStatus{
			{Name: "lan0", Device: "lan0", Shaper: "htb", Direction: "egress", Bandwidth: 1_000_000_000, State: control.StateOK,
				Users: []string{"alice", "bob", "carol"},
				Tiers: []control.TierStatus{{Name: "bronze", Rate: 5e6, Ceil: 10e6}, {Name: "gold", Rate: 50e6, Ceil: 100e6}, {Name: "silver", Rate: 20e6, Ceil: 40e6}}},
			{Name: "wan0", Device: "ifb-wan0", Shaper: "htb", Direction: "ingress", Bandwidth: 100_000_000,
				State: control.StateFailed, Error: "ifb-wan0: add leaf qdisc fq_codel of class 1:100 (user alice): Specified qdisc kind is unknown",
				Users: []string{"alice"},
				Tiers: []control.TierStatus{{Name: "gold", Rate: 10e6, Ceil: 20e6}}},
		},
		Users: []control.UserStatus{
			{Name: "alice", Tier: "gold", Interface: "lan0", Direction: "download", Device: "lan0", Rate: 50e6, Ceil: 100e6, EffectiveRate: 50e6, EffectiveCeil: 60e6,
				Reason: "schedule peak", Throughput: 9_873_456, Bytes: 1_234_567_890, Drops: 12, QueueDelay: control.Duration(48_123_456)},
			{Name: "alice", Tier: "gold", Interface: "wan0", Direction: "upload", Device: "ifb-wan0", Rate: 10e6, Ceil: 20e6, EffectiveRate: 10e6, EffectiveCeil: 20e6,
				Reason: "tier", Throughput: 1_500_000, Bytes: 98_765, Drops: 0, QueueDelay: control.Duration(2_345_678)},
			{Name: "bob", Tier: "silver", Interface: "lan0", Direction: "download", Device: "lan0", Rate: 20e6, Ceil: 40e6, EffectiveRate: 3e6, EffectiveCeil: 38e6,
				Reason: "override until 12:00", Throughput: 35_120_000, Bytes: 5_000_000_000, Drops: 3456, QueueDelay: control.Duration(12_400_000),
				Ramp: &control.RampStatus{From: 40e6, To: 3e6, Until: t0.Add(2 * time.Second)}},
			{Name: "carol", Tier: "bronze", Interface: "lan0", Direction: "download", Device: "lan0", Rate: 5e6, Ceil: 10e6, EffectiveRate: 1e6, EffectiveCeil: 1e6,
				Reason: "quota exceeded", Throughput: 999_000, Bytes: 10_737_418_240, Drops: 0,
				Quota: &control.QuotaStatus{Used: 10_737_418_240, Limit: 10_737_418_240, PeriodEnd: t0.Add(24 * time.Hour)}},
		},
	}
}

// String describes the fake for test failure messages.
func (f *Fake) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("fake{calls: %v}", f.Calls)
}

// ChangeUser records the call and answers with the user as asked.
func (f *Fake) ChangeUser(ctx context.Context, req control.UserRequest) (*control.UserResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	call := fmt.Sprintf("user %s %s %v", req.Op, req.Name, req.Addresses)
	if req.Node != "" {
		call += " node " + req.Node
	}
	f.Calls = append(f.Calls, call)
	resp := &control.UserResponse{Op: req.Op, Name: req.Name}
	if req.Op != control.UserRemove {
		u := &control.ListedUser{Name: req.Name, Tier: req.Tier, Node: req.Node, Source: control.SourceRuntime}
		for _, a := range req.Addresses {
			u.Addresses = append(u.Addresses, control.ListedAddress{Address: a})
		}
		resp.User = u
	}
	return resp, nil
}

// Users lists the users of State as users.toml's.
func (f *Fake) Users(ctx context.Context) (*control.UserListResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "user list")
	resp := &control.UserListResponse{Users: []control.ListedUser{}}
	for _, u := range f.State.Users {
		resp.Users = append(resp.Users, control.ListedUser{Name: u.Name, Tier: u.Tier, Source: control.SourceFile})
	}
	return resp, nil
}

// ChangeNode records the call and answers with the node as asked.
func (f *Fake) ChangeNode(ctx context.Context, req control.NodeRequest) (*control.NodeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, fmt.Sprintf("node %s %s parent %q", req.Op, req.Name, req.Parent))
	resp := &control.NodeResponse{Op: req.Op, Name: req.Name}
	if req.Op != control.NodeRemove {
		n := &control.ListedNode{Name: req.Name, Parent: req.Parent, Path: req.Name, Source: control.SourceRuntime, Interfaces: req.Interfaces}
		if req.Rate != nil {
			n.Rate, n.Ceil, n.UploadRate, n.UploadCeil = *req.Rate, *req.Rate, *req.Rate, *req.Rate
		}
		resp.Node = n
	}
	return resp, nil
}

// Nodes lists no nodes: the fake's State has none.
func (f *Fake) Nodes(ctx context.Context) (*control.NodeListResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "node list")
	return &control.NodeListResponse{Nodes: []control.ListedNode{}}, nil
}
