package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/control/jsonout"
)

// jsonCommands are the --json command lines the shape test runs against
// the fake daemon; docs/json.md has a section for each.
var jsonCommands = [][]string{
	{"status", "--json"},
	{"status", "alice", "--json"},
	{"status", "tier:gold", "--json"},
	{"status", "iface:lan0", "--json"},
	{"top", "--once", "--json"},
	{"top", "--nodes", "--once", "--json"},
	{"overrides", "--json"},
	{"set-rate", "alice", "3mbit", "--json"},
	{"set-rate", "tier:gold", "3mbit", "--ceil", "5mbit", "--for", "1h", "--json"},
	{"clear", "alice", "--json"},
	{"reload", "--json"},
	{"reload", "--dry-run", "--json"},
	{"quota", "reset", "carol", "--json"},
	{"simulate", "--json"},
	{"user", "list", "--json"},
	{"node", "list", "--json"},
	{"export", "--json"},
}

// runJSON runs every command of jsonCommands and returns each output,
// decoded, by command line.
func runJSON(t *testing.T) map[string]any {
	t.Helper()
	fake, sock := serve(t)
	fake.Usage = map[string]uint64{"carol": 10 << 30}
	out := map[string]any{}
	for _, args := range jsonCommands {
		code, stdout, stderr := run(t, cli.Env{}, append([]string{"--socket", sock}, args...)...)
		if code != cli.ExitOK && !(args[0] == "status" && code == cli.ExitError) {
			t.Errorf("%q: exit %d: %s", args, code, stderr)
			continue
		}
		// top prints one line per snapshot; the others one object.
		dec := json.NewDecoder(strings.NewReader(stdout))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Errorf("%q: not JSON: %v\n%s", args, err, stdout)
			continue
		}
		if dec.More() {
			t.Errorf("%q: more than one JSON value:\n%s", args, stdout)
		}
		out[strings.Join(args, " ")] = v
	}
	return out
}

// Every --json output follows docs/json.md's conventions: snake_case
// keys, no "name" (user, tier, node, interface instead), direction in
// users' words and interface_direction in the interface's, rates as
// integers in bit/s, no base64, and one JSON type per key across every
// command (cleared is a count everywhere, the list cleared_overrides).
func TestJSONShape(t *testing.T) {
	var c jsonout.Checker
	for cmd, v := range runJSON(t) {
		for _, p := range c.Check(cmd, v) {
			t.Error(p)
		}
	}
	for _, p := range c.Inconsistent() {
		t.Error(p)
	}
}

// Before this, status printed "name" for users, tc strings for rates and
// "egress" as a direction; clear "cleared" as a list; reload --dry-run a
// text blob.
func TestJSONShapeExamples(t *testing.T) {
	outs := runJSON(t)
	st := outs["status --json"].(map[string]any)
	u := st["users"].([]any)[0].(map[string]any)
	if u["user"] != "alice" || u["name"] != nil || u["effective_ceil"] != 38e6 && u["effective_ceil"] == nil {
		t.Errorf("status users[0]: %v", u)
	}
	in := st["interfaces"].([]any)[0].(map[string]any)
	if in["interface"] != "lan0" || in["interface_direction"] != "egress" || in["direction"] != "download" {
		t.Errorf("status interfaces[0]: %v", in)
	}
	if _, ok := in["bandwidth"].(float64); !ok {
		t.Errorf("bandwidth %v is not a number", in["bandwidth"])
	}
	cl := outs["clear alice --json"].(map[string]any)
	if _, ok := cl["cleared"].(float64); !ok {
		t.Errorf("clear: cleared %v is not a count", cl["cleared"])
	}
	if _, ok := cl["cleared_overrides"].([]any); !ok {
		t.Errorf("clear: cleared_overrides %v is not a list", cl["cleared_overrides"])
	}
	dry := outs["reload --dry-run --json"].(map[string]any)
	if dry["text"] != nil || dry["change_count"] != 1.0 {
		t.Errorf("reload --dry-run: %v", dry)
	}
	ch := dry["interfaces"].([]any)[0].(map[string]any)["changes"].([]any)[0].(map[string]any)
	if ch["op"] != "change" || ch["object"] != "class" || ch["user"] != "alice" ||
		ch["before"].(map[string]any)["ceil"] != 40e6 || ch["after"].(map[string]any)["ceil"] != 60e6 {
		t.Errorf("reload --dry-run change: %v", ch)
	}
}

// With --json a failing command prints one object {"error", "exit_code"}
// on stdout, keeps its message on stderr and its exit code: 2 for usage
// errors, 1 for the daemon's refusals. Before this it printed nothing on
// stdout.
func TestJSONErrors(t *testing.T) {
	fake, sock := serve(t)
	fake.ReloadErr = &control.ValidationError{Problems: []string{"/etc/shaperd/users.toml:3:9: unknown tier \"platinum\""}}
	for _, tc := range []struct {
		args    []string
		code    int
		msg     string
		target  string
		problem bool
	}{
		{[]string{"set-rate", "alice", "3", "--json"}, cli.ExitUsage, "missing unit", "", false},
		{[]string{"set-rate", "alice", "3mbit", "--jsn", "--json"}, cli.ExitUsage, "flag provided but not defined: --jsn", "", false},
		{[]string{"status", "--json=maybe"}, cli.ExitUsage, "", "", false},
		{[]string{"set-rate", "nosuch", "3mbit", "--json"}, cli.ExitError, "nosuch", "nosuch", false},
		{[]string{"clear", "nosuch", "--json"}, cli.ExitError, "nosuch", "nosuch", false},
		{[]string{"reload", "--json"}, cli.ExitError, "configuration refused", "", true},
		{[]string{"status", "--tree", "--json"}, cli.ExitUsage, "--tree draws the text output", "", false},
	} {
		code, out, errOut := run(t, cli.Env{}, append([]string{"--socket", sock}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d with %q", tc.args, code, errOut, tc.code, tc.msg)
		}
		if tc.args[len(tc.args)-1] == "--json=maybe" {
			if out != "" {
				t.Errorf("%q: --json=maybe is no request for JSON, but stdout has %q", tc.args, out)
			}
			continue
		}
		var e struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
			Target   string `json:"target"`
			Problems []struct {
				File    string `json:"file"`
				Line    int    `json:"line"`
				Column  int    `json:"column"`
				Message string `json:"message"`
			} `json:"problems"`
		}
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || dec.More() {
			t.Errorf("%q: stdout is not one error object (%v): %q", tc.args, err, out)
			continue
		}
		if e.ExitCode != code || !strings.Contains(e.Error, tc.msg) || e.Target != tc.target || strings.HasPrefix(e.Error, "shaperctl") {
			t.Errorf("%q: %+v", tc.args, e)
		}
		if tc.problem && (len(e.Problems) != 1 || e.Problems[0].File != "/etc/shaperd/users.toml" || e.Problems[0].Line != 3 ||
			e.Problems[0].Column != 9 || e.Problems[0].Message != `unknown tier "platinum"`) {
			t.Errorf("%q: problems %+v", tc.args, e.Problems)
		}
	}
	// Without --json, nothing on stdout, as before.
	if code, out, _ := run(t, cli.Env{}, "--socket", sock, "set-rate", "nosuch", "3mbit"); code != cli.ExitError || out != "" {
		t.Errorf("set-rate nosuch without --json: exit %d, stdout %q", code, out)
	}
}

// Flag errors name flags with two dashes, as the help and man pages do.
func TestFlagErrorsTwoDashes(t *testing.T) {
	_, sock := serve(t)
	oneDash := regexp.MustCompile(`(^|[\s"'])-[a-z][a-z-]+`)
	for _, args := range [][]string{
		{"status", "--json=maybe"}, {"status", "-json=maybe"}, {"top", "--once", "--json=x"}, {"overrides", "-jsn"},
		{"set-rate", "alice", "3mbit", "-ceil", "fast"}, {"set-rate", "alice", "3mbit", "-ramp"}, {"user", "list", "--json=x"},
		{"node", "list", "-jsn"}, {"export", "-format"}, {"simulate", "-demand"}, {"quota", "reset", "carol", "-json=q"},
		{"-bogus", "status"},
	} {
		code, _, errOut := run(t, cli.Env{}, append([]string{"--socket", sock}, args...)...)
		first, _, _ := strings.Cut(errOut, "\n")
		if code != cli.ExitUsage || oneDash.MatchString(strings.SplitN(first, ": ", 2)[1]) {
			t.Errorf("%q: exit %d, %q; want exit 2 naming flags with two dashes", args, code, first)
		}
	}
}

// docs/json.md documents every key the commands print, and each command.
func TestJSONDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var collect func(v any)
	collect = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				keys[k] = true
				collect(e)
			}
		case []any:
			for _, e := range x {
				collect(e)
			}
		}
	}
	for cmd, v := range runJSON(t) {
		collect(v)
		name := strings.Fields(cmd)[0]
		if !bytes.Contains(doc, []byte("shaperctl "+name)) {
			t.Errorf("docs/json.md has no section for shaperctl %s", name)
		}
	}
	for _, k := range []string{"error", "exit_code", "problems", "file", "line", "column", "message"} {
		keys[k] = true
	}
	for k := range keys {
		if !bytes.Contains(doc, []byte("`"+k+"`")) && !bytes.Contains(doc, []byte(`"`+k+`"`)) {
			t.Errorf("docs/json.md does not document the key %q", k)
		}
	}
}

var _ = context.Background
