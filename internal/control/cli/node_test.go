package cli_test

import (
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/control/jsonout"
)

func TestNodeCommandsSendTheirRequests(t *testing.T) {
	fake, sock := serve(t)
	for _, tc := range []struct {
		args []string
		call string
		out  string
	}{
		{[]string{"node", "add", "ap-3", "--parent", "north", "--rate", "50mbit", "--interface", "lan0"},
			`node add ap-3 parent "north"`, "ap-3: at ap-3, download 50mbit/50mbit, upload 50mbit/50mbit, on lan0"},
		{[]string{"node", "remove", "ap-3"}, `node remove ap-3 parent ""`, "ap-3: removed"},
	} {
		code, out, errOut := run(t, cli.Env{}, append(tc.args, "--socket", sock)...)
		if code != cli.ExitOK || !strings.Contains(out, tc.out) {
			t.Errorf("%v: exit %d, out %q, err %q; want %q", tc.args, code, out, errOut, tc.out)
		}
		calls := fake.CallLog()
		if last := calls[len(calls)-1]; last != tc.call {
			t.Errorf("%v: the daemon got %q, want %q", tc.args, last, tc.call)
		}
	}
	code, out, _ := run(t, cli.Env{}, "node", "add", "ap-4", "--rate", "1mbit", "--json", "--socket", sock)
	var resp control.NodeResponse
	if code != cli.ExitOK || jsonout.Decode([]byte(out), &resp) != nil || resp.Node == nil || resp.Node.Rate.String() != "1mbit" {
		t.Errorf("node add --json: exit %d, %q", code, out)
	}
	code, out, _ = run(t, cli.Env{}, "node", "list", "--socket", sock)
	if code != cli.ExitOK || !strings.HasPrefix(out, "NODE") {
		t.Errorf("node list: exit %d, %q", code, out)
	}
}

func TestNodeUsageErrors(t *testing.T) {
	fake, sock := serve(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"node"}, "expected a subcommand: add, remove or list"},
		{[]string{"node", "rename", "ap-1"}, `unknown subcommand "rename"`},
		{[]string{"node", "add", "ap-1"}, "node add ap-1: --rate is required"},
		{[]string{"node", "add"}, "expected one NAME, got 0 arguments"},
		{[]string{"node", "add", "ap-1", "ap-2", "--rate", "1mbit"}, "expected one NAME, got 2 arguments"},
		{[]string{"node", "add", "ap-1", "--rate", "fast"}, "--rate"},
		{[]string{"node", "remove", "ap-1", "--rate", "1mbit"}, "go with node add only"},
		{[]string{"node", "list", "ap-1"}, "node list takes only --json"},
	} {
		code, _, errOut := run(t, cli.Env{}, append(tc.args, "--socket", sock)...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, %q; want usage error %q", tc.args, code, errOut, tc.msg)
		}
	}
	if n := len(fake.CallLog()); n != 0 {
		t.Errorf("usage errors reached the daemon %d times", n)
	}
	code, out, _ := run(t, cli.Env{}, "help", "node")
	if code != cli.ExitOK || !strings.Contains(out, "--upload-ceil RATE") || !strings.Contains(out, "nodes.json") {
		t.Errorf("help node: exit %d, %q", code, out)
	}
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "__complete", "--", "node", "re")
	if code != cli.ExitOK || out != "remove\n" {
		t.Errorf("complete node re: exit %d, %q (%s)", code, out, errOut)
	}
}
