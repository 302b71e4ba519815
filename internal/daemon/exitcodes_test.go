package daemon

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control/cli"
)

// A malformed value is a usage error (exit 2) whether shaperctl finds it
// (set-rate) or the daemon does (simulate --set and --demand, user add's
// addresses); a well-formed request the plan refuses exits 1.
func TestMalformedValuesExitUsage(t *testing.T) {
	d, c := runDaemon(t, newFakeKernel("lan0"), newFakeClock(), io.Discard, nil)
	syncLoop(t, c)
	sock := filepath.Join(filepath.Dir(d.opts.ConfigPath), "ctl.sock")
	for _, tt := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"set-rate", "alice", "3"}, cli.ExitUsage, "missing unit"},
		{[]string{"simulate", "--set", "alice=3"}, cli.ExitUsage, "missing unit"},
		{[]string{"simulate", "--set", "alice"}, cli.ExitUsage, "want TARGET=RATE[:CEIL]"},
		{[]string{"simulate", "--demand", "alice"}, cli.ExitUsage, "want TARGET=DEMAND"},
		{[]string{"user", "add", "carol", "--tier", "bronze", "--address", "198.18.1"}, cli.ExitUsage, "198.18.1"},
		{[]string{"simulate", "--set", "nosuch=3mbit"}, cli.ExitError, "nosuch"},
		{[]string{"set-rate", "nosuch", "3mbit"}, cli.ExitError, "nosuch"},
	} {
		var out, errb bytes.Buffer
		code := cli.Run(context.Background(), append([]string{"--socket", sock}, tt.args...), &out, &errb, cli.Env{})
		if code != tt.code || !strings.Contains(errb.String(), tt.msg) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d with %q", tt.args, code, errb.String(), tt.code, tt.msg)
		}
	}
}
