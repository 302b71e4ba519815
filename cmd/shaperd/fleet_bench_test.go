package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/fleet/fleetd"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestFleetBench is scripts/bench-fleet.sh: with 3 routers and a real
// etcd it measures a fleet set-rate's propagation to the kernels of all
// three (p50/p99 over SHAPERD_BENCH_SETRATES, default 50), the time from
// pushing SHAPERD_BENCH_USERS users (default 10,000) until every router
// has it in force, and etcd's database size. It runs only with
// SHAPERD_BENCH_FLEET=1 (it loads the machine for a while).
func TestFleetBench(t *testing.T) {
	if os.Getenv("SHAPERD_BENCH_FLEET") != "1" {
		t.Skip("a benchmark: set SHAPERD_BENCH_FLEET=1 (scripts/bench-fleet.sh)")
	}
	nSet, nUsers := envInt(t, "SHAPERD_BENCH_SETRATES", 50), envInt(t, "SHAPERD_BENCH_USERS", 10000)
	f := newFleetLab(t, 3)
	plan := f.writePlan("2mbit")
	f.mustCtl("fleet", "push", "--config", plan)
	for _, r := range f.routers {
		f.start(r)
	}
	f.await(15*time.Second, "the plan on every router", f.routers, func(r *fleetRouter) bool { return r.hasRate("2Mbit") })
	ks := make([]*kernel.Kernel, len(f.routers))
	for i, r := range f.routers {
		k, err := kernel.Open(kernel.Options{NetNS: r.lab.Router.Name})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		ks[i] = k
	}
	c, err := fleetd.Dial(&config.Fleet{Endpoints: []string{f.etcd.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	kv := fleetd.KV(c)
	ctx := context.Background()

	// Fleet set-rate propagation: until alice's class has the rate in
	// every router's kernel.
	aliceRate := func(k *kernel.Kernel) tbf.Rate {
		tr, err := k.Dump("r-lan")
		if err != nil {
			return 0
		}
		for _, cl := range tr.Classes {
			if cl.Handle == model.MakeHandle(1, 0x100) { // the first user class: alice, the plan's only user
				return cl.Rate
			}
		}
		return 0
	}
	var lat []time.Duration
	for i := range nSet {
		rate := mbitRate(uint64(3 + i%20))
		o := policy.Override{Target: policy.Target{Kind: policy.TargetUser, Name: "alice"}, Rate: rate, Ceil: rate,
			Ramp: new(time.Duration), Set: time.Now()}
		start := time.Now()
		if err := fleet.SetOverride(ctx, kv, "/fleettest", o); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		worst := time.Duration(0)
		for _, k := range ks {
			wg.Go(func() {
				for aliceRate(k).BytesPerSecond() != rate.BytesPerSecond() {
					if time.Since(start) > 10*time.Second {
						t.Errorf("set-rate %d: %v not in a kernel after 10 s", i, rate)
						return
					}
					time.Sleep(time.Millisecond)
				}
				mu.Lock()
				worst = max(worst, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		lat = append(lat, worst)
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	t.Logf("BENCH fleet set-rate to 3 routers' kernels, %d changes: p50 %v, p99 %v, max %v", len(lat), p(0.5), p(0.99), lat[len(lat)-1])
	if _, err := fleet.ClearOverride(ctx, kv, "/fleettest", policy.Target{Kind: policy.TargetUser, Name: "alice"}, policy.DirBoth); err != nil {
		t.Fatal(err)
	}

	// A plan of nUsers users (198.18.0.10 stays alice).
	var b strings.Builder
	b.WriteString("[[user]]\nname = \"alice\"\ntier = \"basic\"\naddresses = [\"198.18.0.10\"]\n")
	for i := 0; i < nUsers-1; i++ {
		a := 256 + i // from 198.18.1.0 on
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = \"basic\"\naddresses = [\"198.18.%d.%d\"]\n", i, a/256, a%256)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "plan-users.toml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f.mustCtl("fleet", "push", "--config", plan)
	pushed := time.Since(start)
	pl, err := fleet.Pull(ctx, kv, "/fleettest")
	if err != nil {
		t.Fatal(err)
	}
	for {
		rs, err := fleet.Routers(ctx, kv, "/fleettest")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rs {
			if r.Revision == pl.Revision {
				n++
			}
		}
		if n == len(f.routers) {
			break
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("the %d-user plan is not in force everywhere after 5 min: %+v", nUsers, rs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	all := time.Since(start)
	st, err := c.Status(ctx, f.etcd.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BENCH push of %d users: shaperctl fleet push (check + write) %v; in force on 3 routers %v after the push began; users document %d bytes; etcd db size %d bytes (in use %d)",
		nUsers, pushed, all, len(pl.Shared.Users), st.DbSize, st.DbSizeInUse)
}

func mbitRate(n uint64) tbf.Rate { return tbf.Rate(n * 1_000_000) }

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
