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
	"github.com/shaperd/shaperd/internal/netnslab"
)

// UserAddEnv turns on TestUserAdd10kUsers (a minute or two).
const UserAddEnv = "SHAPERD_USERADD_TEST"

// TestUserAdd10kUsers measures `shaperctl user add` on the real kernel:
// shaperd runs in a namespace with 10,000 users (one address each, one
// interface, bandwidth for every guarantee) and a client adds one user
// (with an address) and removes it again, 100 times, through the control
// socket; the adds' p50 and p99 are logged (end to end: request,
// validation, the users.json write, the kernel's class and filter).
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
	var took []time.Duration
	for i := 0; i < 100; i++ {
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
	t.Logf("user add at %d users, end to end through the control socket (100 adds): p50 %v, p99 %v, max %v", users,
		took[len(took)/2].Round(10*time.Microsecond), took[len(took)*99/100].Round(10*time.Microsecond), took[len(took)-1].Round(10*time.Microsecond))
	if n := strings.Count(logs.String(), "msg=\"run-time users changed\""); n != 200 {
		t.Errorf("%d run-time user changes logged, want 200", n)
	}
	var applies []time.Duration // the kernel writes of each change (the log's took=)
	for _, l := range strings.Split(logs.String(), "\n") {
		if _, rest, ok := strings.Cut(l, "why=user"); ok && strings.Contains(l, "msg=applied") {
			if _, v, ok := strings.Cut(rest, "took="); ok {
				if d, err := time.ParseDuration(strings.Fields(v)[0]); err == nil {
					applies = append(applies, d)
				}
			}
		}
		if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
			t.Log(l)
		}
	}
	if len(applies) > 0 {
		slices.Sort(applies)
		t.Logf("of which the kernel apply (%d applies of adds and removes): p50 %v, p99 %v", len(applies),
			applies[len(applies)/2].Round(time.Microsecond), applies[len(applies)*99/100].Round(time.Microsecond))
	}
}
