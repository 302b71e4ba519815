package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// UserAddEnv turns on TestUserAdd10kUsers (a minute or two).
const UserAddEnv = "SHAPERD_USERADD_TEST"

// TestUserAdd10kUsers measures `shaperctl user add` on the real kernel:
// shaperd runs in a namespace with 10,000 users (one address each, one
// interface, bandwidth for every guarantee) and a client adds one user
// (with an address) and removes it again, 300 times back to back and 480
// times paced (one every 25 ms: some meet a reconcile tick), through the control
// socket (control.Client: the HTTP request a client makes, no shaperctl
// process); the adds' p50, p99 and max are logged end to end, and so are
// the daemon's phases of the adds (check, journal, plan, apply: the user's
// objects built and written) and the kernel writes of adds and removes.
//
//	SHAPERD_USERADD_TEST=1 go test -run TestUserAdd10kUsers -v ./cmd/shaperd
func TestUserAdd10kUsers(t *testing.T) {
	if os.Getenv(UserAddEnv) != "1" {
		t.Skipf("set %s=1 to measure a user add at 10,000 users on the real kernel", UserAddEnv)
	}
	netnslab.Require(t)
	bin := buildShaperd(t)
	const users = 10000
	ns := netnslab.NewNS(t, "uadd")
	peer := netnslab.NewNS(t, "uaddp")
	netnslab.Veth(t, ns, "r-lan", peer, "p-lan")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
reconcile_interval = "5s"
[policy]
timezone = "UTC"
[[interface]]
name = "r-lan"
bandwidth = "400gbit"
default_tier = "t0"
[tiers.t0]
rate = "5mbit"
ceil = "20mbit"
[tiers.t1]
rate = "20mbit"
ceil = "50mbit"
`, dir)
	var u strings.Builder
	for i := 0; i < users; i++ {
		fmt.Fprintf(&u, "[[user]]\nname = \"user%05d\"\ntier = \"t%d\"\naddresses = [\"198.18.%d.%d\"]\n", i, i%2, i/250, i%250+1)
	}
	if err := os.WriteFile(filepath.Join(dir, "shaperd.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(u.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &netnslab.LockedBuffer{}
	cmd := ns.Command(bin, "--config", filepath.Join(dir, "shaperd.toml"))
	cmd.Stdout, cmd.Stderr = logs, logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for !strings.Contains(logs.String(), "msg=ready") {
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("not ready after 3 minutes:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("first apply of %d users: ready after %v", users, time.Since(start).Round(time.Millisecond))

	c := control.NewClient(filepath.Join(dir, "shaperd.sock"))
	defer c.Close()
	ctx := context.Background()
	if st, err := c.Status(ctx); err == nil {
		for _, is := range st.Interfaces {
			t.Logf("interface %s: classifier %s", is.Name, is.Classifier)
		}
	}
	// Back to back, then paced (one add and remove every 25 ms, 12 s:
	// the adds that meet a reconcile tick wait for it).
	const adds = 300
	run := func(what string, n int, every time.Duration) {
		var took []time.Duration
		next := time.Now()
		for i := 0; i < n; i++ {
			time.Sleep(time.Until(next))
			next = next.Add(every)
			t0 := time.Now()
			if _, err := c.ChangeUser(ctx, control.UserRequest{Op: control.UserAdd, Name: "newcomer", Tier: "t1",
				Addresses: []string{"198.18.250.1"}}); err != nil {
				t.Fatalf("user add: %v\n%s", err, logs.String())
			}
			took = append(took, time.Since(t0))
			if _, err := c.ChangeUser(ctx, control.UserRequest{Op: control.UserRemove, Name: "newcomer"}); err != nil {
				t.Fatalf("user remove: %v", err)
			}
		}
		slices.Sort(took)
		t.Logf("user add at %d users, end to end (the client's HTTP request over the control socket), %d adds %s: p50 %v, p99 %v, max %v", users, n, what,
			took[len(took)/2].Round(10*time.Microsecond), took[len(took)*99/100].Round(10*time.Microsecond), took[len(took)-1].Round(10*time.Microsecond))
	}
	run("back to back", adds, 0)
	run("paced, one every 25ms", 480, 25*time.Millisecond)
	// The log reaches the buffer through a pipe: wait for the last lines.
	for wait := time.Now(); strings.Count(logs.String(), "msg=\"run-time users changed\"") < 2*(adds+480) && time.Since(wait) < 5*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "msg=\"run-time users changed\""); n != 2*(adds+480) {
		t.Errorf("%d run-time user changes logged, want %d", n, 2*(adds+480))
	}
	// The daemon's phases of each change (its "run-time users changed"
	// line) and the kernel writes (the "applied" line's took=).
	phases := map[string][]time.Duration{}
	field := func(l, name string) (time.Duration, bool) {
		_, v, ok := strings.Cut(l, " "+name+"=")
		if !ok {
			return 0, false
		}
		d, err := time.ParseDuration(strings.Fields(v)[0])
		return d, err == nil
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=\"run-time users changed\"") && strings.Contains(l, "why=\"user add\"") {
			for _, name := range []string{"check", "journal", "plan", "apply", "took"} {
				if d, ok := field(l, name); ok {
					phases[name] = append(phases[name], d)
				}
			}
		}
		if strings.Contains(l, "why=user") && strings.Contains(l, "msg=applied") {
			if d, ok := field(l, "took"); ok {
				phases["kernel"] = append(phases["kernel"], d)
			}
		}
		if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
			t.Log(l)
		}
	}
	for _, name := range []string{"check", "journal", "plan", "apply", "kernel", "took"} {
		ds := phases[name]
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		t.Logf("  %-7s (%3d): p50 %v, p99 %v, max %v", name, len(ds), ds[len(ds)/2].Round(time.Microsecond),
			ds[len(ds)*99/100].Round(time.Microsecond), ds[len(ds)-1].Round(time.Microsecond))
	}
}
