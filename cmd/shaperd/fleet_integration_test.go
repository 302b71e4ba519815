package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// The fleet tests run three shaperd processes, each shaping its own router
// namespace, all following one real etcd on loopback. They start shaperd
// with --netns (the only way every router reaches the same loopback etcd).

// fleetPlan is a full configuration pushed with `shaperctl fleet push`:
// its [policy], [tiers] and users file are the shared part.
const fleetPlan = `
[daemon]
users_file = "plan-users.toml"

[policy]
ramp = "0s"
timezone = "UTC"

[[interface]]
name = "r-lan"
bandwidth = "100mbit"
default_tier = "basic"

[tiers.basic]
rate = "%s"

[fleet]
endpoints = ["%s"]
prefix = "/fleettest"
`

// fleetRouterConfig is a router's own file: [daemon], [[interface]] and
// [fleet] only; its tiers and users come from the fleet.
const fleetRouterConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"

[[interface]]
name = "r-lan"
bandwidth = "100mbit"
default_tier = "basic"

[fleet]
endpoints = ["%[2]s"]
prefix = "/fleettest"
router = "%[3]s"
dial_timeout = "1s"
`

// fleetRouter is one router of the fleet lab.
type fleetRouter struct {
	name string
	lab  *netnslab.RouterLab
	dir  string
	cmd  *exec.Cmd
	log  *os.File
}

type fleetLab struct {
	t       *testing.T
	etcd    *etcdlab.Server
	shaperd string
	ctl     string
	dir     string
	routers []*fleetRouter
}

func (f *fleetLab) writePlan(rate string) string {
	f.t.Helper()
	p := filepath.Join(f.dir, "plan.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(fleetPlan, rate, f.etcd.Endpoint)), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// ctlRun runs shaperctl with args and returns its exit code and output.
func (f *fleetLab) ctlRun(args ...string) (int, string) {
	f.t.Helper()
	cmd := exec.Command(f.ctl, args...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		f.t.Fatal(err)
	}
	return 0, string(out)
}

func (f *fleetLab) mustCtl(args ...string) string {
	f.t.Helper()
	code, out := f.ctlRun(args...)
	if code != 0 {
		f.t.Fatalf("shaperctl %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

func (f *fleetLab) start(r *fleetRouter) {
	f.t.Helper()
	lf, err := os.OpenFile(filepath.Join(r.dir, "shaperd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command(f.shaperd, "--config", filepath.Join(r.dir, "shaperd.toml"), "--netns", r.lab.Router.Name, "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	r.cmd, r.log = cmd, lf
}

func (f *fleetLab) stop(r *fleetRouter) {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = r.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
	r.cmd = nil
	_ = r.log.Close()
}

// logs returns every router's log, for failures.
func (f *fleetLab) logs() string {
	var b strings.Builder
	for _, r := range f.routers {
		data, _ := os.ReadFile(filepath.Join(r.dir, "shaperd.log"))
		fmt.Fprintf(&b, "=== %s\n%s\n", r.name, data)
	}
	return b.String()
}

// classes is `tc class show dev r-lan` in r's namespace.
func (r *fleetRouter) classes() string {
	out, _ := r.lab.Router.Run("tc", "class", "show", "dev", "r-lan")
	return out
}

// userRate is the kernel rate of the lab user's class (the one class
// under the root that is not the default class 1:ffff... so: the class
// that is neither the root nor the default), as tc prints it.
func (r *fleetRouter) hasRate(rate string) bool {
	return strings.Contains(r.classes(), "rate "+rate+" ")
}

// await waits until cond holds for every router in rs, at most d; it
// returns how long it took.
func (f *fleetLab) await(d time.Duration, what string, rs []*fleetRouter, cond func(*fleetRouter) bool) time.Duration {
	f.t.Helper()
	start := time.Now()
	for {
		ok := true
		for _, r := range rs {
			if !cond(r) {
				ok = false
				break
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > d {
			var b strings.Builder
			for _, r := range rs {
				fmt.Fprintf(&b, "--- %s classes:\n%s", r.name, r.classes())
			}
			f.t.Fatalf("timed out after %v waiting for %s\n%s\n%s", d, what, b.String(), f.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fleetLab) status(r *fleetRouter) (*control.Status, error) {
	out, err := exec.Command(f.ctl, "--socket", filepath.Join(r.dir, "shaperd.sock"), "status", "--json").Output()
	if err != nil && len(out) == 0 {
		return nil, err
	}
	var st control.Status
	if err := jsonout.Decode(out, &st); err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	return &st, nil
}

// fleetStatus is `shaperctl fleet status --json`'s routers. It exits 1
// while a router is not ok (down, refusing, lagging) and still prints the
// JSON on stdout; any other exit fails the test.
func (f *fleetLab) fleetStatus() []fleet.Registration {
	f.t.Helper()
	cmd := exec.Command(f.ctl, "fleet", "status", "--json", "--config", filepath.Join(f.dir, "plan.toml"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); (err != nil && !ok) || (ok && ee.ExitCode() != 1) {
		f.t.Fatalf("shaperctl fleet status --json: %v\n%s%s", err, stdout, stderr.String())
	}
	out := string(stdout)
	var st struct {
		Routers []fleet.Registration `json:"routers"`
	}
	if err := jsonout.Decode([]byte(out), &st); err != nil {
		f.t.Fatalf("fleet status --json: %v\n%s", err, out)
	}
	return st.Routers
}

func newFleetLab(t *testing.T, n int) *fleetLab {
	t.Helper()
	netnslab.Require(t)
	f := &fleetLab{t: t, etcd: etcdlab.Start(t), dir: t.TempDir()}
	f.shaperd, f.ctl = binaries(t)
	users := "[[user]]\nname = \"alice\"\ntier = \"basic\"\naddresses = [\"198.18.0.10\"]\n"
	if err := os.WriteFile(filepath.Join(f.dir, "plan-users.toml"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := &fleetRouter{name: fmt.Sprintf("r%d", i+1), lab: netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: 1})}
		dir, err := os.MkdirTemp("", "shaperd-fleet-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		r.dir = dir
		cfg := fmt.Sprintf(fleetRouterConfig, dir, f.etcd.Endpoint, r.name)
		if err := os.WriteFile(filepath.Join(dir, "shaperd.toml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		f.routers = append(f.routers, r)
	}
	t.Cleanup(func() {
		for _, r := range f.routers {
			f.stop(r)
		}
	})
	return f
}

// TestFleet drives three routers through a fleet's life: a pushed plan
// reaches all three, an invalid revision written by hand is refused by
// all (the old plan stays, fleet status says why), a fleet set-rate
// reaches all three and a local one wins on its router, losing etcd
// leaves shaping and local shaperctl working, a router restarted without
// etcd comes back with the cached plan, and after etcd returns a change
// propagates again.
func TestFleet(t *testing.T) {
	f := newFleetLab(t, 3)
	all := f.routers
	plan := f.writePlan("2mbit")
	out := f.mustCtl("fleet", "push", "--config", plan)
	if !strings.Contains(out, "pushed revision") {
		t.Fatalf("push: %s", out)
	}
	// --check (the unit's ExecStartPre) of a router whose tiers and users
	// are the fleet's.
	if out, err := exec.Command(f.shaperd, "--config", filepath.Join(all[0].dir, "shaperd.toml"), "--check").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "checked with the fleet's shared plan") {
		t.Fatalf("--check of a fleet router: %v\n%s", err, out)
	}
	for _, r := range all {
		f.start(r)
	}
	f.await(15*time.Second, "the pushed plan (2Mbit) on every router", all, func(r *fleetRouter) bool { return r.hasRate("2Mbit") })

	// A new plan: every router applies it.
	plan = f.writePlan("3mbit")
	f.mustCtl("fleet", "push", "--config", plan)
	took := f.await(5*time.Second, "3Mbit on every router", all, func(r *fleetRouter) bool { return r.hasRate("3Mbit") })
	t.Logf("a pushed plan reached the kernels of 3 routers in %v", took)
	if took > 2*time.Second {
		t.Errorf("a pushed plan took %v to reach every router (want about 1 s)", took)
	}

	// An invalid plan is refused by push with positions, nothing written.
	bad := strings.Replace(fmt.Sprintf(fleetPlan, "3mbit", f.etcd.Endpoint), `rate = "3mbit"`, "rate = \"3mbit\"\nceil = \"1mbit\"", 1)
	badPath := filepath.Join(f.dir, "bad.toml")
	if err := os.WriteFile(badPath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := f.ctlRun("fleet", "push", "--config", badPath); code != 1 || !strings.Contains(out, badPath+":16:1: tiers.basic.ceil") ||
		!strings.Contains(out, "nothing was written") {
		t.Errorf("push of an invalid plan: exit %d\n%s", code, out)
	}

	// An invalid revision written by hand: all keep 3Mbit and say why.
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{f.etcd.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Put(context.Background(), "/fleettest/plan/shared", "[policy]\nramp = \"0s\"\n[tiers.basic]\nrate = \"4mbit\"\nceil = \"1mbit\"\n")
	if err != nil {
		t.Fatal(err)
	}
	badRev := resp.Header.Revision
	f.await(5*time.Second, "every router to refuse the hand-written revision", all, func(r *fleetRouter) bool {
		for _, reg := range f.fleetStatus() {
			if reg.Router == r.name {
				return reg.Alive && reg.Refused == badRev && len(reg.Errors) > 0 && strings.Contains(strings.Join(reg.Errors, "\n"), "tiers.basic.ceil")
			}
		}
		return false
	})
	for _, r := range all {
		if !r.hasRate("3Mbit") {
			t.Errorf("%s dropped the old plan for an invalid one:\n%s", r.name, r.classes())
		}
	}
	if code, out := f.ctlRun("fleet", "status", "--config", plan); code != 1 || !strings.Contains(out, fmt.Sprintf("refused revision %d", badRev)) {
		t.Errorf("fleet status exits %d and does not say the revision was refused (want exit 1):\n%s", code, out)
	}
	plan = f.writePlan("3mbit")
	f.mustCtl("fleet", "push", "--config", plan) // repaired

	// A fleet set-rate reaches all three; a local one wins on its router.
	f.mustCtl("set-rate", "alice", "5mbit", "--ramp", "0s", "--fleet", "--config", plan)
	took = f.await(5*time.Second, "the fleet set-rate (5Mbit) on every router", all, func(r *fleetRouter) bool { return r.hasRate("5Mbit") })
	t.Logf("a fleet set-rate reached the kernels of 3 routers in %v", took)
	r1, r2, r3 := all[0], all[1], all[2]
	f.mustCtl("--socket", filepath.Join(r1.dir, "shaperd.sock"), "set-rate", "alice", "4mbit", "--ramp", "0s")
	f.await(3*time.Second, "the local override on r1", all[:1], func(r *fleetRouter) bool { return r.hasRate("4Mbit") })
	if !r2.hasRate("5Mbit") || !r3.hasRate("5Mbit") {
		t.Errorf("a local set-rate on r1 changed another router")
	}

	// etcd goes away: shaping stays, local shaperctl works, status says
	// the link is down.
	f.etcd.Stop()
	f.await(5*time.Second, "every router to see the fleet link down", all, func(r *fleetRouter) bool {
		st, err := f.status(r)
		return err == nil && st.Fleet != nil && !st.Fleet.Connected
	})
	f.mustCtl("--socket", filepath.Join(r2.dir, "shaperd.sock"), "set-rate", "alice", "6mbit", "--ramp", "0s")
	f.await(3*time.Second, "a local set-rate on r2 while etcd is down", all[1:2], func(r *fleetRouter) bool { return r.hasRate("6Mbit") })
	if !r1.hasRate("4Mbit") || !r3.hasRate("5Mbit") {
		t.Errorf("shaping changed while etcd was down:\nr1 %s\nr3 %s", r1.classes(), r3.classes())
	}

	// r3 restarts while etcd is down: the cached plan and fleet override.
	f.stop(r3)
	f.start(r3)
	f.await(10*time.Second, "r3 back with the cached plan", all[2:], func(r *fleetRouter) bool {
		st, err := f.status(r)
		return err == nil && st.Fleet != nil && st.Fleet.Revision != 0 && !st.Fleet.Connected && len(st.Interfaces) == 1 &&
			st.Interfaces[0].State == control.StateOK
	})
	if !r3.hasRate("5Mbit") {
		t.Errorf("r3 restarted without etcd lost the fleet override:\n%s", r3.classes())
	}

	// etcd returns: a change made now reaches every router.
	f.etcd.Restart()
	f.mustCtl("--socket", filepath.Join(r1.dir, "shaperd.sock"), "clear", "alice")
	f.mustCtl("--socket", filepath.Join(r2.dir, "shaperd.sock"), "clear", "alice")
	f.await(20*time.Second, "every router to reconnect", all, func(r *fleetRouter) bool {
		st, err := f.status(r)
		return err == nil && st.Fleet != nil && st.Fleet.Connected
	})
	f.mustCtl("clear", "alice", "--fleet", "--config", plan)
	plan = f.writePlan("7mbit")
	f.mustCtl("fleet", "push", "--config", plan)
	f.await(5*time.Second, "7Mbit on every router after etcd returned", all, func(r *fleetRouter) bool { return r.hasRate("7Mbit") })
	f.await(15*time.Second, "every router alive on the pushed revision", all, func(r *fleetRouter) bool {
		for _, reg := range f.fleetStatus() {
			if reg.Router == r.name {
				return reg.Alive && reg.Refused == 0 && reg.Health == "ok"
			}
		}
		return false
	})
	if out := f.mustCtl("fleet", "pull", "--config", plan); !strings.Contains(out, `rate = "7mbit"`) || !strings.Contains(out, `name = "alice"`) {
		t.Errorf("fleet pull:\n%s", out)
	}

	// A router that stops is listed, not alive.
	f.stop(r3)
	for _, reg := range f.fleetStatus() {
		if reg.Router == "r3" && reg.Alive {
			t.Errorf("r3 stopped but is listed alive: %+v", reg)
		}
	}
}

// TestFleetQuota: alice's traffic split over two routers, each under her
// quota alone, puts her over quota on both within 2 s of the fleet-wide
// sum passing it. The routers read counters at the default
// reconcile_interval (5 s) but policy.quota_interval (1 s) apart.
func TestFleetQuota(t *testing.T) {
	f := newFleetLab(t, 2)
	plan := f.writePlan("50mbit\"\nquota = \"1mb\"\nquota_period = \"day\"\nover_quota_rate = \"1mbit")
	f.mustCtl("fleet", "push", "--config", plan)
	for _, r := range f.routers {
		f.start(r)
	}
	f.await(15*time.Second, "the plan on both routers", f.routers, func(r *fleetRouter) bool { return r.hasRate("50Mbit") })
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{f.etcd.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ledger := func() map[string]uint64 {
		resp, err := c.Get(context.Background(), "/fleettest/usage/alice/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint64{}
		for _, kv := range resp.Kvs {
			var u struct{ Bytes uint64 }
			if err := json.Unmarshal(kv.Value, &u); err != nil {
				t.Fatal(err)
			}
			out[string(kv.Key)] = u.Bytes
		}
		return out
	}
	ping := func(r *fleetRouter, count int, interval string) {
		t.Helper()
		if out, err := r.lab.LAN.Run("ping", "-q", "-c", strconv.Itoa(count), "-i", interval, "-s", "1000", r.lab.WAN4.String()); err != nil {
			t.Fatalf("%s: ping: %v\n%s", r.name, err, out)
		}
	}
	// About 730 kB of ping replies to alice through r1: under the 1 MiB
	// quota; then wait until the ledger has them.
	const pings = 700
	ping(f.routers[0], pings, "0.002")
	var first uint64
	f.await(10*time.Second, "r1's usage in the ledger", f.routers[:1], func(*fleetRouter) bool {
		first = ledger()["/fleettest/usage/alice/r1"]
		return first > pings*1000
	})
	// A burst through r2 that passes the quota in total, r2 alone staying
	// under it: the total crosses during the burst, so the time from the
	// burst's start bounds the time from the crossing.
	perPing := first / pings
	burst := int((1<<20-first)/perPing) + 100
	began := time.Now()
	ping(f.routers[1], burst, "0.001")
	f.await(5*time.Second, "alice over quota (1Mbit) on both routers", f.routers, func(r *fleetRouter) bool { return r.hasRate("1Mbit") })
	took := time.Since(began)
	t.Logf("r1 %d bytes, then a burst of %d pings through r2 (%d bytes each): over quota on both routers %v after the burst began", first, burst, perPing, took)
	if took > 2*time.Second {
		t.Errorf("over quota on both routers %v after the burst that crossed the quota began; want within 2 s", took)
	}
	// Each router's own count, in the ledger: under the quota alone.
	var total uint64
	l := ledger()
	for k, b := range l {
		t.Logf("%s: %d bytes", k, b)
		if b >= 1<<20 {
			t.Errorf("%s: %d bytes: one router alone passed the quota; the test shows nothing", k, b)
		}
		total += b
	}
	if len(l) != 2 || total < 1<<20 {
		t.Errorf("ledger: %d keys, %d bytes in total", len(l), total)
	}

	// A fleet-wide reset, as an operator runs it: both routers give alice
	// the plan back, and their counts start again from zero.
	began = time.Now()
	f.mustCtl("quota", "reset", "alice", "--fleet", "--config", plan)
	f.await(5*time.Second, "alice's plan back on both routers after quota reset --fleet", f.routers, func(r *fleetRouter) bool { return r.hasRate("50Mbit") })
	t.Logf("quota reset --fleet: the plan back on both routers %v after the command began", time.Since(began))
	for k, b := range ledger() {
		if b > 100_000 {
			t.Errorf("%s: %d bytes after the fleet-wide reset, want the count started again", k, b)
		}
	}
	// Bytes after the reset count, and a restart (which reads the reset
	// key again) does not forgive them.
	ping(f.routers[0], 300, "0.002")
	var after uint64
	f.await(10*time.Second, "r1's new usage in the ledger", f.routers[:1], func(*fleetRouter) bool {
		after = ledger()["/fleettest/usage/alice/r1"]
		return after > 300*1000
	})
	f.stop(f.routers[0])
	f.start(f.routers[0])
	f.await(15*time.Second, "r1 back and connected to etcd", f.routers[:1], func(r *fleetRouter) bool {
		st, err := f.status(r)
		return err == nil && st.Fleet != nil && st.Fleet.Connected
	})
	time.Sleep(1500 * time.Millisecond) // a usage report interval and more
	if got := ledger()["/fleettest/usage/alice/r1"]; got < after {
		t.Errorf("r1's count %d after a restart, %d before it: the fleet-wide reset was applied again", got, after)
	}
	if data, _ := os.ReadFile(filepath.Join(f.routers[0].dir, "shaperd.log")); strings.Count(string(data), "fleet quota reset") != 1 {
		t.Errorf("r1 logged the fleet quota reset %d times over a restart, want once:\n%s", strings.Count(string(data), "fleet quota reset"), data)
	}
}
