package fleetcli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/fleet/etcdlab"
	"github.com/shaperd/shaperd/pkg/config"
)

func TestIsFleet(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"fleet", "push"}, true},
		{[]string{"set-rate", "alice", "3mbit", "--fleet"}, true},
		{[]string{"clear", "--fleet", "alice"}, true},
		{[]string{"set-rate", "alice", "3mbit"}, false},
		{[]string{"status", "--fleet"}, false},
		{[]string{"help", "fleet"}, true},
		{[]string{"help", "status"}, false},
		{nil, false},
	} {
		if got := IsFleet(c.args); got != c.want {
			t.Errorf("IsFleet(%q) = %v", c.args, got)
		}
	}
}

const planTOML = `[daemon]
users_file = "users.toml"
[[interface]]
name = "lan0"
bandwidth = "100mbit"
default_tier = "basic"
[tiers.basic]
%s
[fleet]
endpoints = ["%s"]
prefix = "/cli"
`

// TestPushRefusesInvalid: an invalid plan is refused with its positions
// and nothing is written; a valid one is written and pulled back; a fleet
// set-rate of a user the plan lacks is refused.
func TestPushRefusesInvalid(t *testing.T) {
	s := etcdlab.Start(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "plan.toml")
	write := func(rate string) {
		if err := os.WriteFile(p, []byte(fmt.Sprintf(planTOML, rate, s.Endpoint)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte("[[user]]\nname = \"alice\"\ntier = \"basic\"\naddresses = [\"198.18.0.10\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		var out, errb strings.Builder
		code := Run(context.Background(), args, &out, &errb, Env{})
		return code, out.String() + errb.String()
	}
	write("rate = \"2mbit\"\nceil = \"1mbit\"")
	if code, out := run("fleet", "push", "--config", p); code != ExitError || !strings.Contains(out, p+":9:1: tiers.basic.ceil") ||
		!strings.Contains(out, "nothing was written") {
		t.Fatalf("invalid push: exit %d\n%s", code, out)
	}
	c, err := fleet.Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := fleet.Pull(context.Background(), c, "/cli"); err != nil || got != nil {
		t.Fatalf("after an invalid push etcd holds %+v (%v)", got, err)
	}
	write("rate = \"2mbit\"")
	if code, out := run("fleet", "push", "--config", p); code != ExitOK || !strings.Contains(out, "1 tiers, 1 users") {
		t.Fatalf("valid push: exit %d\n%s", code, out)
	}
	write("rate = \"3mbit\"")
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte("[[user]]\nname = \"bob\"\ntier = \"basic\"\naddresses = [\"198.18.0.11\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run("fleet", "push", "--diff", "--config", p); code != ExitOK || !strings.Contains(out, "~ tier basic\n- user alice\n+ user bob\n") {
		t.Fatalf("push --diff: exit %d\n%s", code, out)
	}
	write("rate = \"2mbit\"")
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte("[[user]]\nname = \"alice\"\ntier = \"basic\"\naddresses = [\"198.18.0.10\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run("fleet", "push", "--diff", "--config", p); code != ExitOK || !strings.Contains(out, "no change") {
		t.Fatalf("push --diff of the plan in etcd: exit %d\n%s", code, out)
	}
	if code, out := run("fleet", "pull", "--config", p); code != ExitOK || !strings.Contains(out, `rate = "2mbit"`) || strings.Contains(out, "lan0") {
		t.Fatalf("pull: exit %d\n%s", code, out)
	}
	if code, out := run("set-rate", "bob", "1mbit", "--fleet", "--config", p); code != ExitError || !strings.Contains(out, "bob: no such user") {
		t.Fatalf("set-rate of an unknown user: exit %d\n%s", code, out)
	}
	if code, out := run("set-rate", "alice", "1mbit", "--for", "1h", "--fleet", "--config", p); code != ExitOK || !strings.Contains(out, "fleet-wide rate 1mbit") {
		t.Fatalf("set-rate: exit %d\n%s", code, out)
	}
	if code, out := run("fleet", "status", "--config", p); code != ExitOK || !strings.Contains(out, "1 fleet overrides") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	if code, out := run("clear", "alice", "--fleet", "--config", p); code != ExitOK || !strings.Contains(out, "cleared") {
		t.Fatalf("clear: exit %d\n%s", code, out)
	}
	if code, out := run("fleet", "push"); code != ExitError || !strings.Contains(out, "no such file") && !strings.Contains(out, DefaultConfig) {
		t.Fatalf("push without a config: exit %d\n%s", code, out)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "fleet"}, {"fleet"}, {"fleet", "--help"}} {
		var out, errb strings.Builder
		if code := Run(context.Background(), args, &out, &errb, Env{}); code != ExitOK || !strings.Contains(out.String(), "shaperctl fleet push --config FILE") {
			t.Errorf("%q: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
	}
}
