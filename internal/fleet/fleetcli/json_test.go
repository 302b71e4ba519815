package fleetcli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/internal/lab/etcdlab"
)

// The fleet commands' --json follows docs/json.md: snake_case keys, rates
// in bit/s, the plan's documents as text (before this, fleet pull --json
// printed fleet.Plan with PascalCase keys and base64 documents), counts
// named *_count, and a failing command prints {"error", "exit_code",
// "problems"} on stdout.
func TestFleetJSONShape(t *testing.T) {
	s := etcdlab.Start(t)
	p, write := planFixture(t, s)
	run := func(args ...string) (int, string, string) { return runFleet(Env{}, args...) }
	write("rate = \"2mbit\"\nceil = \"1mbit\"")
	code, out, _ := run("fleet", "push", "--config", p, "--json")
	var e jsonout.ErrorObject
	if err := json.Unmarshal([]byte(out), &e); err != nil || code != ExitError || e.ExitCode != ExitError ||
		len(e.Problems) == 0 || e.Problems[0].File != p || e.Problems[0].Line != 9 {
		t.Fatalf("invalid push --json: exit %d, %+v (%v)\n%s", code, e, err, out)
	}
	write("rate = \"2mbit\"")
	var c jsonout.Checker
	outs := map[string]map[string]any{}
	for _, args := range [][]string{
		{"fleet", "push", "--config", p, "--json"},
		{"fleet", "push", "--diff", "--config", p, "--json"},
		{"fleet", "pull", "--config", p, "--json"},
		{"set-rate", "alice", "1mbit", "--for", "1h", "--fleet", "--config", p, "--json"},
		{"fleet", "status", "--config", p, "--json"},
		{"clear", "alice", "--fleet", "--config", p, "--json"},
	} {
		code, out, errOut := run(args...)
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil || code != ExitOK {
			t.Fatalf("%q: exit %d (%v): %s%s", args, code, err, out, errOut)
		}
		cmd := strings.Join(args[:3], " ")
		outs[cmd] = v
		for _, pr := range c.Check(cmd, v) {
			t.Error(pr)
		}
	}
	for _, pr := range c.Inconsistent() {
		t.Error(pr)
	}
	pull := outs["fleet pull --config"]
	if st, _ := pull["shared_toml"].(string); !strings.Contains(st, `rate = "2mbit"`) {
		t.Errorf("fleet pull --json: shared_toml %q", pull["shared_toml"])
	}
	if outs["fleet push --config"]["user_count"] != 1.0 || outs["fleet status --config"]["override_count"] != 1.0 ||
		outs["set-rate alice 1mbit"]["rate"] != 1e6 || outs["set-rate alice 1mbit"]["direction"] != "both" {
		t.Errorf("counts and rates: %v", outs)
	}
}
