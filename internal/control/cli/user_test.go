package cli_test

import (
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/control/controltest"
	"github.com/shaperd/shaperd/internal/control/jsonout"
)

func TestUserCommandsSendTheirRequests(t *testing.T) {
	fake, sock := serve(t)
	env := cli.Env{}
	for _, tc := range []struct {
		args []string
		call string
		out  string
	}{
		{[]string{"user", "add", "carol", "--tier", "gold", "--address", "198.18.1.30", "--address", "2001:db8::30"},
			"user add carol [198.18.1.30 2001:db8::30]", "carol: tier gold, addresses 198.18.1.30, 2001:db8::30"},
		{[]string{"user", "set-addresses", "carol", "198.18.1.31", "198.18.1.32"}, "user set-addresses carol [198.18.1.31 198.18.1.32]", "198.18.1.31, 198.18.1.32"},
		{[]string{"user", "add-address", "carol", "198.18.1.33", "--for", "1h"}, "user add-address carol [198.18.1.33]", "198.18.1.33"},
		{[]string{"user", "remove-address", "carol", "198.18.1.33"}, "user remove-address carol [198.18.1.33]", "198.18.1.33"},
		{[]string{"user", "remove", "carol"}, "user remove carol []", "carol: removed"},
		{[]string{"user", "add", "dave", "--tier", "gold", "--node", "north/ap-1", "--address", "198.18.1.40"},
			"user add dave [198.18.1.40] node north/ap-1", "dave: tier gold, node north/ap-1, addresses 198.18.1.40"},
		{[]string{"user", "move", "dave", "ap-2"}, "user move dave [] node ap-2", "node ap-2"},
		{[]string{"user", "move", "dave", "none"}, "user move dave []", "dave: tier"},
	} {
		code, out, errOut := run(t, env, append(tc.args, "--socket", sock)...)
		if code != cli.ExitOK || !strings.Contains(out, tc.out) {
			t.Errorf("%v: exit %d, out %q, err %q; want %q", tc.args, code, out, errOut, tc.out)
		}
		calls := fake.CallLog()
		if last := calls[len(calls)-1]; last != tc.call {
			t.Errorf("%v: the daemon got %q, want %q", tc.args, last, tc.call)
		}
	}
	code, out, _ := run(t, env, "user", "list", "--json", "--socket", sock)
	var list control.UserListResponse
	if code != cli.ExitOK || jsonout.Decode([]byte(out), &list) != nil || len(list.Users) == 0 || list.Users[0].Source != control.SourceFile {
		t.Errorf("user list --json: exit %d, %q", code, out)
	}
	code, out, _ = run(t, env, "user", "list", "--socket", sock)
	if code != cli.ExitOK || !strings.HasPrefix(out, "USER") || !strings.Contains(out, "users.toml") {
		t.Errorf("user list: exit %d, %q", code, out)
	}
}

func TestUserUsageErrors(t *testing.T) {
	fake, sock := serve(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"user"}, "expected a subcommand"},
		{[]string{"user", "rename", "carol"}, `unknown subcommand "rename"`},
		{[]string{"user", "add", "carol"}, "--tier is required"},
		{[]string{"user", "add"}, "no user name given"},
		{[]string{"user", "add", "carol", "--tier", "gold", "198.18.1.1"}, "addresses go with --address"},
		{[]string{"user", "add-address", "carol"}, "expected one ADDRESS, got 0 arguments"},
		{[]string{"user", "remove-address", "carol", "198.18.1.1", "--for", "1h"}, "--for goes with user add-address only"},
		{[]string{"user", "set-addresses", "carol"}, "no addresses given"},
		{[]string{"user", "remove", "carol", "--tier", "gold"}, "--tier, --rate and --ceil go with user add only"},
		{[]string{"user", "list", "carol"}, "user list takes only --json"},
		{[]string{"user", "move", "carol"}, "expected one NODE"},
		{[]string{"user", "remove", "carol", "--node", "ap-1"}, "--node goes with user add only"},
	} {
		code, _, errOut := run(t, cli.Env{}, append(tc.args, "--socket", sock)...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, %q; want usage error %q", tc.args, code, errOut, tc.msg)
		}
	}
	if n := len(fake.CallLog()); n != 0 {
		t.Errorf("usage errors reached the daemon %d times", n)
	}
	code, out, _ := run(t, cli.Env{}, "help", "user")
	if code != cli.ExitOK || !strings.Contains(out, "add-address NAME A [--for DUR]") || !strings.Contains(out, "the file\nwins") {
		t.Errorf("help user: exit %d, %q", code, out)
	}
}

func TestUserCompletion(t *testing.T) {
	_, sock := serve(t)
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"user", "add-"}, "add-address\n"},
		{[]string{"user", "add", "carol", "--ti"}, "--tier\n"},
		{[]string{"user", "add-address", "--f"}, "--for\n"},
		{[]string{"user", "remove", "ali"}, "alice\n"},
	} {
		code, out, errOut := run(t, cli.Env{}, append([]string{"--socket", sock, "__complete", "--"}, tc.words...)...)
		if code != cli.ExitOK || out != tc.want {
			t.Errorf("complete %q: exit %d, %q (%s), want %q", tc.words, code, out, errOut, tc.want)
		}
	}
}

// status shows a SOURCE column when some user was added at run time.
func TestStatusShowsRuntimeSource(t *testing.T) {
	_, sock := serve(t)
	if _, out, _ := run(t, cli.Env{}, "status", "--socket", sock); strings.Contains(out, "SOURCE") {
		t.Fatalf("status without run-time users has a SOURCE column:\n%s", out)
	}
	st := controltest.Sample()
	st.Users = append(st.Users, control.UserStatus{Name: "zed", Tier: "gold", Interface: "lan0", Source: control.SourceRuntime})
	sock = controltest.Serve(t, &controltest.Fake{State: st})
	_, out, _ := run(t, cli.Env{}, "status", "--socket", sock)
	if !strings.Contains(out, "SOURCE") {
		t.Fatalf("status with a run-time user has no SOURCE column:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "zed ") && !strings.Contains(l, "runtime") || strings.HasPrefix(l, "alice ") && !strings.Contains(l, "users.toml") {
			t.Errorf("line %q does not give its source", l)
		}
	}
}
