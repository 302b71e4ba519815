package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/statefile"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// bench10k makes a daemon with n users on the fake kernel, applied once.
func bench10k(b *testing.B, n int) (*Daemon, *fakeClock) {
	b.Helper()
	clk := newFakeClock()
	return benchDaemonClock(b, n, testConfig, clk), clk
}

func benchDaemonClock(b *testing.B, n int, cfg string, clk Clock) *Daemon {
	b.Helper()
	var u strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&u, "[[user]]\nname = \"user%05d\"\ntier = \"%s\"\naddresses = [\"198.18.%d.%d\"]\n",
			i, []string{"gold", "bronze"}[i%2], i/250, i%250+1)
	}
	dir := b.TempDir()
	writeConfig(b, dir, cfg, u.String())
	k := newFakeKernel("lan0")
	d, _ := newTestDaemon(b, k, clk, dir)
	if err := d.Once(context.Background()); err != nil {
		b.Fatal(err)
	}
	return d
}

// The daemon's side of `shaperctl set-rate USER RATE --ramp 0s` with
// 10,000 users (both directions): one user re-evaluated, one class per
// interface rebuilt and applied.
//
//	go test -run - -bench SetRate10k -benchmem ./internal/daemon
func BenchmarkSetRate10kUsers(b *testing.B) {
	d, clk := bench10k(b, 10000)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		clk.mu.Lock()
		clk.now = clk.now.Add(time.Millisecond)
		clk.mu.Unlock()
		r := tbf.Rate(3+i%2) * tbf.Mbit
		if _, err := d.setRate(control.SetRateRequest{Target: "user04711", Rate: r, Ramp: control.DurationPtr(0)}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetRate10kUsers without the state file write (fsync): the
// override reaching the (fake) kernel.
func BenchmarkUserOverride10kUsers(b *testing.B) {
	d, clk := bench10k(b, 10000)
	zero := time.Duration(0)
	for i := 0; b.Loop(); i++ {
		now := clk.Now().Add(time.Duration(i) * time.Millisecond)
		o := policy.Override{Target: policy.Target{Kind: policy.TargetUser, Name: "user04711"},
			Rate: tbf.Rate(3+i%2) * tbf.Mbit, Set: now, Ramp: &zero}
		if err := d.overrides.Set(o); err != nil {
			b.Fatal(err)
		}
		if err := d.overrideChanged(o.Target, now); err != nil {
			b.Fatal(err)
		}
	}
	if d.work.userSteps == 0 {
		b.Fatal("no single-user steps")
	}
}

// A full policy evaluation with 10,000 users (both directions) when
// nothing changed: Evaluate, Ramper.Step, model.Desired.Set finding the same targets.
func BenchmarkPolicyStep10kUsers(b *testing.B) {
	d, clk := bench10k(b, 10000)
	for b.Loop() {
		if err := d.policyStep(clk.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// An idle policy tick with 10,000 users: nothing can have changed.
func BenchmarkIdleTick10kUsers(b *testing.B) {
	d, clk := bench10k(b, 10000)
	for b.Loop() {
		if err := d.policyTick(clk.Now()); err != nil {
			b.Fatal(err)
		}
	}
	if d.work.idleTicks == 0 {
		b.Fatal("no idle ticks")
	}
}

// `shaperctl user add` at 10,000 users (both directions), the daemon's
// side: validation, the state file write, the plan with the user and
// the kernel changes (the fake kernel's). Each add is followed by an
// untimed remove; p99-ns/add is the 99th percentile of the adds.
//
//	go test -run - -bench UserAdd10k -benchtime 200x ./internal/daemon
func BenchmarkUserAdd10kUsers(b *testing.B) {
	// Bandwidth for every guarantee: with oversubscribed guarantees a new
	// user scales everyone's (a full step; see policy.Result.AddUser).
	// The real clock: the phases' times (check, journal, plan, apply).
	benchUserAdd(b, benchDaemonClock(b, 10000, roomyConfig(), RealClock{}))
}

// BenchmarkUserAdd10kUsers with the 10,000 users added at run time (the
// DHCP/RADIUS case: users.toml holds two, users.json the rest).
//
//	go test -run - -bench UserAddRuntime10k -benchtime 200x ./internal/daemon
func BenchmarkUserAddRuntime10kUsers(b *testing.B) {
	dir := b.TempDir()
	writeConfig(b, dir, roomyConfig(), testUsers)
	rt := make([]runtimeUser, 10000)
	for i := range rt {
		rt[i] = runtimeUser{Name: fmt.Sprintf("user%05d", i), Tier: []string{"gold", "bronze"}[i%2],
			Addresses: []runtimeAddr{{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(10 + i/250), byte(i%250 + 1)}), 32)}}}
	}
	if err := statefile.SaveJSON(filepath.Join(dir, "state"), UsersFile, runtimeFile{Users: rt}); err != nil {
		b.Fatal(err)
	}
	d, _ := newTestDaemon(b, newFakeKernel("lan0"), RealClock{}, dir)
	if err := d.Once(context.Background()); err != nil {
		b.Fatal(err)
	}
	if len(d.runtime) != 10000 {
		b.Fatalf("%d run-time users, want 10000", len(d.runtime))
	}
	benchUserAdd(b, d)
}

// roomyConfig is testConfig with bandwidth for every guarantee.
func roomyConfig() string {
	return strings.NewReplacer(`"1gbit"`, `"400gbit"`, `"100mbit"`, `"400gbit"`).Replace(testConfig)
}

// benchUserAdd times `user add` (each followed by an untimed remove) on d
// and reports the adds' p50, p99 and max, the p50 and p99 of their phases
// (check, journal, plan, apply) and of the removes.
func benchUserAdd(b *testing.B, d *Daemon) {
	var took, removes, check, journal, plan, apply []time.Duration
	add := control.UserRequest{Op: control.UserAdd, Name: "newcomer", Tier: "bronze", Addresses: []string{"198.18.250.1"}}
	remove := control.UserRequest{Op: control.UserRemove, Name: "newcomer"}
	evals := d.work.evaluations
	for b.Loop() {
		start := time.Now()
		if _, err := d.changeUser(add); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		ph := d.userPhases
		check, journal, plan, apply = append(check, ph.check), append(journal, ph.journal), append(plan, ph.plan), append(apply, ph.apply)
		start = time.Now()
		if _, err := d.changeUser(remove); err != nil {
			b.Fatal(err)
		}
		removes = append(removes, time.Since(start))
		b.StartTimer()
	}
	for _, m := range []struct {
		name string
		ds   []time.Duration
	}{{"add", took}, {"check", check}, {"journal", journal}, {"plan", plan}, {"apply", apply}, {"remove", removes}} {
		slices.Sort(m.ds)
		b.ReportMetric(float64(m.ds[len(m.ds)/2].Nanoseconds()), "p50-ns/"+m.name)
		b.ReportMetric(float64(m.ds[len(m.ds)*99/100].Nanoseconds()), "p99-ns/"+m.name)
		if m.name == "add" {
			b.ReportMetric(float64(m.ds[len(m.ds)-1].Nanoseconds()), "max-ns/add")
		}
	}
	if d.work.evaluations > evals {
		b.Fatalf("%d full evaluations: the adds were not incremental", d.work.evaluations-evals)
	}
}

// BenchmarkUserAddQueues is BenchmarkUserAdd10kUsers on per-queue trees
// (queues = 4 in both directions) at 1,000 and at 100,000 users: a user's
// add is placed on a queue and patched in (its class and filter), not a
// rebuild of the trees, so both sizes cost the same; the output has both,
// measured in the same run.
//
//	go test -run - -bench UserAddQueues -benchtime 200x ./internal/daemon
func BenchmarkUserAddQueues(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("users=%d", n), func(b *testing.B) {
			benchUserAdd(b, queuesDaemon(b, n))
		})
	}
}

// queuesDaemon is a daemon that has applied n users on per-queue trees
// (queues = 4 in both directions) to a fake kernel.
func queuesDaemon(b *testing.B, n int) *Daemon {
	cfg := strings.ReplaceAll(strings.ReplaceAll(roomyConfig(), `"400gbit"`, `"4000gbit"`), "[[interface]]\n", "[[interface]]\nqueues = 4\n")
	var u strings.Builder
	for i := 0; i < n; i++ {
		v := uint32(198)<<24 | uint32(18)<<16 | uint32(i+1)
		if i+1 >= 250<<8|1 {
			v++ // 198.18.250.1 is benchUserAdd's newcomer
		}
		fmt.Fprintf(&u, "[[user]]\nname = \"user%06d\"\ntier = \"%s\"\naddresses = [\"%d.%d.%d.%d\"]\n",
			i, []string{"gold", "bronze"}[i%2], v>>24, v>>16&0xff, v>>8&0xff, v&0xff)
	}
	dir := b.TempDir()
	writeConfig(b, dir, cfg, u.String())
	d, _ := newTestDaemon(b, newFakeKernel("lan0"), RealClock{}, dir)
	if err := d.Once(context.Background()); err != nil {
		b.Fatal(err)
	}
	if q := d.ifaces[0].targets().Interface.Queues; q != 4 {
		b.Fatalf("%d queues, want 4", q)
	}
	return d
}

// `shaperctl status` at 10,000 users (both directions: 20,000 user rows),
// the daemon's side: the policy evaluated afresh for the explanations, the
// rows assembled and encoded as the control API sends them.
//
//	go test -run - -bench Status10k -benchmem ./internal/daemon
func BenchmarkStatus10kUsers(b *testing.B) {
	d, _ := bench10k(b, 10000)
	for b.Loop() {
		st := d.status()
		if len(st.Users) != 20000 {
			b.Fatalf("%d user rows, want 20000", len(st.Users))
		}
		if _, err := json.Marshal(st); err != nil {
			b.Fatal(err)
		}
	}
}
