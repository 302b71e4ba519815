package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/control/controltest"
	"github.com/shaperd/shaperd/internal/control/jsonout"
)

// State file problems appear in the status table, one line each with the
// file, kind, error, where a corrupt file went and the effect, and in
// --json as state_problems.
func TestStatusShowsStateProblems(t *testing.T) {
	st := controltest.Sample()
	since := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	st.StateProblems = []control.StateProblem{
		{File: "usage.json", Kind: "corrupt", Since: since, Error: "state file /var/lib/shaperd/usage.json (7 bytes): unexpected end of JSON input",
			MovedTo: "/var/lib/shaperd/usage.json.corrupt-20261202T100000Z", Effect: "quota usage rebuilt"},
		{File: "overrides.json", Kind: "write", Since: since, Error: "write /var/lib/shaperd/overrides.json: no space left on device"},
	}
	fake := &controltest.Fake{State: st}
	sock := controltest.Serve(t, fake)
	code, out, errOut := run(t, cli.Env{}, "--socket", sock, "status")
	if code != 1 { // wan0 of Sample is failed
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"state file usage.json: corrupt since 2026-12-02 10:00:00 UTC: state file /var/lib/shaperd/usage.json (7 bytes): unexpected end of JSON input; moved to /var/lib/shaperd/usage.json.corrupt-20261202T100000Z; quota usage rebuilt\n",
		"state file overrides.json: write since 2026-12-02 10:00:00 UTC: write /var/lib/shaperd/overrides.json: no space left on device\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = run(t, cli.Env{}, "--socket", sock, "status", "--json")
	var got struct {
		StateProblems []control.StateProblem `json:"state_problems"`
	}
	if code != 1 || jsonout.Decode([]byte(out), &got) != nil || len(got.StateProblems) != 2 || got.StateProblems[0].MovedTo == "" {
		t.Errorf("--json state_problems: exit %d, %+v\n%s", code, got, out)
	}
}

// status exits 1 when the daemon cannot save a state file (state_dir full
// or read-only), naming the file on stderr, even with every interface ok;
// a problem met at start (a corrupt file moved aside) is shown but exits 0.
func TestStatusExitsNonZeroWhenStateUnsaved(t *testing.T) {
	st := controltest.Sample()
	for i := range st.Interfaces {
		st.Interfaces[i].State, st.Interfaces[i].Error = control.StateOK, ""
	}
	since := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	corrupt := control.StateProblem{File: "usage.json", Kind: "corrupt", Since: since, Error: "unexpected end of JSON input"}
	unsaved := control.StateProblem{File: "overrides.json", Kind: control.StateProblemWrite, Since: since,
		Error: "write /var/lib/shaperd/overrides.json: read-only file system"}
	fake := &controltest.Fake{State: st}
	sock := controltest.Serve(t, fake)
	fake.State.StateProblems = []control.StateProblem{corrupt}
	for _, args := range [][]string{{"status"}, {"status", "--json"}} {
		if code, _, errOut := run(t, cli.Env{}, append([]string{"--socket", sock}, args...)...); code != 0 {
			t.Errorf("%v with a corrupt file recovered at start: exit %d, want 0: %s", args, code, errOut)
		}
	}
	fake.State.StateProblems = []control.StateProblem{corrupt, unsaved}
	for _, args := range [][]string{{"status"}, {"status", "--json"}} {
		code, out, errOut := run(t, cli.Env{}, append([]string{"--socket", sock}, args...)...)
		if code != 1 || !strings.Contains(errOut, "cannot save its state") || !strings.Contains(errOut, "overrides.json") ||
			strings.Contains(errOut, "usage.json") || !strings.Contains(out, "read-only file system") {
			t.Errorf("%v with overrides.json unsaved: exit %d\nstdout %s\nstderr %s", args, code, out, errOut)
		}
	}
}
