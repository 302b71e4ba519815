package fleetcli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
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
		{[]string{"--socket", "/run/s.sock", "set-rate", "u2", "3mbit", "--fleet"}, true},
		{[]string{"--socket=/run/s.sock", "clear", "--fleet", "u2"}, true},
		{[]string{"-socket", "/run/s.sock", "fleet", "status"}, true},
		{[]string{"--socket", "/run/s.sock", "set-rate", "u2", "3mbit"}, false},
		{[]string{"--socket", "/run/s.sock"}, false},
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
	p, write := planFixture(t, s)
	run := func(args ...string) (int, string) { return runCombined(Env{}, args...) }
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
	if err := os.WriteFile(filepath.Join(filepath.Dir(p), "users.toml"), []byte("[[user]]\nname = \"bob\"\ntier = \"basic\"\naddresses = [\"198.18.0.11\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run("fleet", "push", "--diff", "--config", p); code != ExitOK || !strings.Contains(out, "~ tier basic\n- user alice\n+ user bob\n") {
		t.Fatalf("push --diff: exit %d\n%s", code, out)
	}
	write("rate = \"2mbit\"")
	if err := os.WriteFile(filepath.Join(filepath.Dir(p), "users.toml"), []byte("[[user]]\nname = \"alice\"\ntier = \"basic\"\naddresses = [\"198.18.0.10\"]\n"), 0o644); err != nil {
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

// TestSocketIsRefused: --fleet talks to etcd, so a --socket before or
// after the command is refused with a usage error saying so (before any
// etcd is asked), not "flag provided but not defined: -fleet".
func TestSocketIsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--socket", "/run/s.sock", "set-rate", "u2", "3mbit", "--fleet"},
		{"set-rate", "--fleet", "u2", "3mbit", "--socket", "/run/s.sock"},
		{"--socket=/run/s.sock", "clear", "u2", "--fleet"},
		{"--socket", "/run/s.sock", "fleet", "push", "--config", "plan.toml"},
	} {
		var out, errb strings.Builder
		code := Run(context.Background(), args, &out, &errb, Env{})
		if code != ExitUsage || !strings.Contains(errb.String(), "talks to the fleet's etcd, not to a daemon's socket: --socket does not apply") {
			t.Errorf("%q: exit %d\nstdout %s\nstderr %s", args, code, out.String(), errb.String())
		}
	}
}

// planNoFleet is a plan file without [fleet]: where etcd is comes from
// --endpoints or $SHAPERD_ETCD_ENDPOINTS.
const planNoFleet = `[daemon]
users_file = "users.toml"
[[interface]]
name = "lan0"
bandwidth = "1gbit"
[tiers.gold]
rate = "20mbit"
ceil = "100mbit"
`

// TestPushWithEndpoints: a plan file without [fleet] is pushed to the etcd
// --endpoints names (or $SHAPERD_ETCD_ENDPOINTS, a bare HOST:PORT too) and
// pulled back; without either the refusal says how to give them;
// set-rate --fleet takes its flags in any order.
func TestPushWithEndpoints(t *testing.T) {
	s := etcdlab.Start(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "plan.toml")
	if err := os.WriteFile(p, []byte(planNoFleet), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte("[[user]]\nname = \"u2\"\ntier = \"gold\"\naddresses = [\"198.18.0.12\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	run := func(args ...string) (int, string) {
		return runCombined(Env{Getenv: func(k string) string { return env[k] }}, args...)
	}
	if code, out := run("fleet", "push", "--config", p); code != ExitError || !strings.Contains(out, "has no [fleet] table") || !strings.Contains(out, "--endpoints") {
		t.Fatalf("push without endpoints: exit %d\n%s", code, out)
	}
	if code, out := run("fleet", "push", "--config", p, "--endpoints", "ftp://x"); code != ExitUsage || !strings.Contains(out, "--endpoints") {
		t.Fatalf("push with a bad endpoint: exit %d\n%s", code, out)
	}
	if code, out := run("fleet", "push", "--endpoints", s.Endpoint+",", "--config", p, "--prefix", "/ep"); code != ExitOK || !strings.Contains(out, "pushed revision") || !strings.Contains(out, "/ep: 1 tiers, 1 users") {
		t.Fatalf("push --endpoints: exit %d\n%s", code, out)
	}
	c, err := fleet.Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := fleet.Pull(context.Background(), c, "/ep")
	if err != nil || got == nil || !strings.Contains(string(got.Shared.Main), `ceil = "100mbit"`) || !strings.Contains(string(got.Shared.Users), `"u2"`) {
		t.Fatalf("pulled %+v (%v); want the pushed plan", got, err)
	}
	// A router's messages name the operator's files, with their lines.
	if sh := got.SharedFor(); sh.Name != fmt.Sprintf("fleet rev %d: plan.toml", got.Revision) || sh.UsersName != fmt.Sprintf("fleet rev %d: users.toml", got.Revision) {
		t.Errorf("shared documents named %q and %q, want after plan.toml and users.toml", sh.Name, sh.UsersName)
	}
	if want, _ := os.ReadFile(p); strings.Count(string(got.Shared.Main), "\n") != strings.Count(string(want), "\n") {
		t.Errorf("the shared document has other lines than plan.toml:\n%s", got.Shared.Main)
	}
	// The environment, with a bare HOST:PORT, as etcdctl takes it.
	env[EndpointsEnv] = strings.TrimPrefix(s.Endpoint, "http://")
	if code, out := run("fleet", "pull", "--config", p, "--prefix", "/ep"); code != ExitOK || !strings.Contains(out, `rate = "20mbit"`) {
		t.Fatalf("pull with $%s: exit %d\n%s", EndpointsEnv, code, out)
	}
	for _, args := range [][]string{
		{"set-rate", "--fleet", "u2", "3mbit", "--prefix", "/ep"},
		{"set-rate", "u2", "--prefix=/ep", "3mbit", "--fleet", "--ceil", "4mbit"},
	} {
		if code, out := run(args...); code != ExitOK || !strings.Contains(out, "fleet-wide rate 3mbit") {
			t.Fatalf("%q: exit %d\n%s", args, code, out)
		}
	}
	ovs, _, err := fleet.Overrides(context.Background(), c, "/ep")
	if err != nil || len(ovs) != 1 || ovs[0].Target.Name != "u2" || ovs[0].Ceil != 4*tbf.Mbit {
		t.Fatalf("fleet overrides %+v (%v); want u2 at 3mbit/4mbit", ovs, err)
	}
}

// quota reset USER --fleet writes the reset and drops the user's usage
// keys in one transaction; a bad name is a usage error, --socket refused.
func TestQuotaResetFleet(t *testing.T) {
	s := etcdlab.Start(t)
	c, err := fleet.Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, r := range []string{"r1", "r2"} {
		if _, _, err := c.Txn(t.Context(), fleet.PutOp(fleet.UsageKey("/q", "alice", r), []byte(`{"start":"2026-12-01T00:00:00Z","bytes":5}`), 0)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (int, string) { return runCombined(Env{}, args...) }
	if !IsFleet([]string{"quota", "reset", "alice", "--fleet"}) || IsFleet([]string{"quota", "reset", "alice"}) {
		t.Fatal("IsFleet does not tell quota reset --fleet from a router's reset")
	}
	code, out := run("quota", "reset", "alice", "--fleet", "--endpoints", s.Endpoint, "--prefix", "/q", "--json")
	var got struct {
		User             string `json:"user"`
		Revision         int64  `json:"revision"`
		UsageKeysDeleted int64  `json:"usage_keys_deleted"`
	}
	if code != ExitOK || json.Unmarshal([]byte(out), &got) != nil || got.User != "alice" || got.UsageKeysDeleted != 2 || got.Revision == 0 {
		t.Fatalf("quota reset --fleet --json: exit %d\n%s", code, out)
	}
	kvs, _, err := c.Range(t.Context(), fleet.UsageDir("/q"), fleet.QuotaResetDir("/q"))
	if err != nil || len(kvs[0]) != 0 || len(kvs[1]) != 1 || !strings.Contains(string(kvs[1][0].Value), `"at":`) {
		t.Fatalf("after the reset: usage %v, resets %v (%v); want none and alice's", kvs[0], kvs[1], err)
	}
	if code, out := run("quota", "reset", "Not A Name", "--fleet", "--endpoints", s.Endpoint); code != ExitUsage || !strings.Contains(out, "is not a user name") {
		t.Errorf("a bad name: exit %d\n%s", code, out)
	}
	if code, out := run("--socket", "/x", "quota", "reset", "alice", "--fleet"); code == ExitOK || !strings.Contains(out, "--socket") {
		t.Errorf("--socket: exit %d\n%s", code, out)
	}
}

// planFixture writes alice's users.toml and returns the path of the
// plan.toml beside it and a function that writes planTOML there with the
// given tier keys and etcd s.
func planFixture(t *testing.T, s *etcdlab.Server) (path string, write func(rate string)) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, "plan.toml")
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte("[[user]]\nname = \"alice\"\ntier = \"basic\"\naddresses = [\"198.18.0.10\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, func(rate string) {
		if err := os.WriteFile(path, []byte(fmt.Sprintf(planTOML, rate, s.Endpoint)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runFleet runs the fleet commands as shaperctl does and returns the exit
// code, stdout and stderr.
func runFleet(env Env, args ...string) (code int, stdout, stderr string) {
	var out, errb strings.Builder
	code = Run(context.Background(), args, &out, &errb, env)
	return code, out.String(), errb.String()
}

// runCombined is runFleet with stdout and stderr together.
func runCombined(env Env, args ...string) (int, string) {
	code, out, errs := runFleet(env, args...)
	return code, out + errs
}
