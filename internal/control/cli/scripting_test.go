package cli_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/control/jsonout"
)

// statusUsers runs status --json with args and returns the user/interface
// rows and the interfaces' names.
func statusUsers(t *testing.T, sock string, args ...string) (users, ifaces []string) {
	t.Helper()
	code, out, errOut := run(t, cli.Env{}, append([]string{"--socket", sock, "status", "--json"}, args...)...)
	// Exit 1 with the status printed when a shown interface is not ok.
	if code != cli.ExitOK && !(code == cli.ExitError && strings.Contains(errOut, "not every interface is ok")) {
		t.Fatalf("status %q: exit %d: %s", args, code, errOut)
	}
	var st control.Status
	if err := jsonout.Decode([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	for _, u := range st.Users {
		users = append(users, u.Name+"/"+u.Interface)
	}
	for _, i := range st.Interfaces {
		ifaces = append(ifaces, i.Name)
	}
	return users, ifaces
}

func TestStatusFilters(t *testing.T) {
	_, sock := serve(t)
	for _, tc := range []struct {
		target        string
		users, ifaces []string
	}{
		{"alice", []string{"alice/lan0", "alice/wan0"}, []string{"lan0", "wan0"}},
		{"tier:silver", []string{"bob/lan0"}, []string{"lan0"}},
		{"iface:wan0", []string{"alice/wan0"}, []string{"wan0"}},
	} {
		users, ifaces := statusUsers(t, sock, tc.target)
		if !reflect.DeepEqual(users, tc.users) || !reflect.DeepEqual(ifaces, tc.ifaces) {
			t.Errorf("status %s: users %v interfaces %v; want %v %v", tc.target, users, ifaces, tc.users, tc.ifaces)
		}
	}
	// The table too, filter after the flag.
	code, out, _ := run(t, cli.Env{}, "--socket", sock, "status", "tier:bronze")
	if code != cli.ExitOK || !strings.Contains(out, "1 interface, 1 user") || strings.Contains(out, "alice") || !strings.Contains(out, "carol") {
		t.Errorf("status tier:bronze: exit %d\n%s", code, out)
	}
	code, _, errOut := run(t, cli.Env{}, "--socket", sock, "status", "zoe")
	if code != cli.ExitError || !strings.Contains(errOut, `unknown target "zoe"`) {
		t.Errorf("status zoe: exit %d, %q", code, errOut)
	}
	code, _, errOut = run(t, cli.Env{}, "--socket", sock, "status", "group:x")
	if code != cli.ExitUsage {
		t.Errorf("status group:x: exit %d, %q", code, errOut)
	}
}

func TestTopOnceAndJSON(t *testing.T) {
	fake, sock := serve(t)
	// --once: one plain snapshot even on a terminal, no waiting.
	env := cli.Env{Terminal: true, After: never, Cbreak: func() (func(), error) {
		t.Error("top --once touched the terminal")
		return func() {}, nil
	}}
	code, out, errOut := run(t, env, "--socket", sock, "top", "--once")
	if code != cli.ExitOK || strings.Count(out, "shaperd top at") != 1 || strings.Contains(out, "\x1b[") {
		t.Errorf("top --once: exit %d %q\n%s", code, errOut, out)
	}
	if calls := fake.CallLog(); len(calls) != 1 {
		t.Errorf("top --once asked the daemon %d times", len(calls))
	}
	code, out, errOut = run(t, cli.Env{After: now}, "--socket", sock, "top", "--json", "--iterations", "2")
	if code != cli.ExitOK {
		t.Fatalf("top --json: exit %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("top --json --iterations 2: %d lines, want 2:\n%s", len(lines), out)
	}
	var snap struct {
		Total int64 `json:"total"`
		Users []struct {
			User       string `json:"user"`
			Throughput int64  `json:"throughput"`
		} `json:"users"`
	}
	if err := jsonout.Decode([]byte(lines[0]), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Total != 47492456 || len(snap.Users) != 4 || snap.Users[0].User != "bob" || snap.Users[3].User != "carol" {
		t.Errorf("snapshot %+v", snap)
	}
}

func TestClearAndReloadJSON(t *testing.T) {
	_, sock := serve(t)
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "clear", "alice", "--json")
	var cleared control.ClearResponse
	if code != cli.ExitOK || jsonout.Decode([]byte(out), &cleared) != nil || cleared.Target != "alice" {
		t.Errorf("clear --json: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut = run(t, cli.Env{}, "--socket", sock, "reload", "--json")
	var reloaded control.ReloadStatus
	if code != cli.ExitOK || jsonout.Decode([]byte(out), &reloaded) != nil || reloaded.Result != "ok" {
		t.Errorf("reload --json: exit %d %q %q", code, out, errOut)
	}
}

// TestEveryCommandTakesJSON: each command's help lists --json, except
// help and completion (whose output is a script).
func TestEveryCommandTakesJSON(t *testing.T) {
	for _, cmd := range cli.HelpTopics() {
		if cmd == "help" || cmd == "completion" {
			continue
		}
		if _, out, _ := run(t, cli.Env{}, "help", cmd); !strings.Contains(out, "--json") {
			t.Errorf("shaperctl help %s lists no --json", cmd)
		}
	}
}
