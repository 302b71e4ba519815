package daemon

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// The state file loaders take any bytes: no panic, and either a clean load
// that the daemon can use and write back, or an error. The seed corpora in
// testdata/fuzz/Fuzz*File hold files written by the daemon (withState)
// and truncated, empty and garbage ones. After a change of a state file's
// format, regenerate them (no root needed) and review the diff:
//
//	go test ./internal/daemon -run '^TestWriteStateFuzzSeeds$' -update

// update makes TestWriteStateFuzzSeeds rewrite the seed corpora.
var update = flag.Bool("update", false, "rewrite the state files' fuzz seed corpora in testdata/fuzz/Fuzz*File (review the diff!)")

// fuzzPlan is the test configuration with a quota, for using loaded state.
func fuzzPlan(f *testing.F) *config.Plan {
	f.Helper()
	dir := f.TempDir()
	writeConfig(f, dir, quotaConfig, testUsers)
	p, err := config.Load(filepath.Join(dir, "shaperd.toml"))
	if err != nil {
		f.Fatal(err)
	}
	return p
}

// checkErr fails on an error without a message.
func checkErr(t *testing.T, err error) {
	t.Helper()
	if err.Error() == "" {
		t.Fatal("error without a message")
	}
}

var fuzzNow = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func FuzzOverridesFile(f *testing.F) {
	for _, s := range []string{`{"version":1,"overrides":[]}`, `{"version":1,"overrides":[{"target":"alice","rate":"3mbit","set":"2026-12-02T10:00:00Z"}]}`} {
		f.Add([]byte(s))
	}
	plan := fuzzPlan(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		ov, err := decodeOverrides(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		out, err := json.Marshal(&ov)
		if err != nil {
			t.Fatalf("a loaded file does not marshal: %v", err)
		}
		again, err := decodeOverrides(out)
		if err != nil {
			t.Fatalf("the daemon cannot read back what it writes: %v\n%s", err, out)
		}
		if again.Len() != ov.Len() {
			t.Fatalf("round trip: %d overrides, want %d", again.Len(), ov.Len())
		}
		ov.Prune(plan)
		policy.Evaluate(plan, ov, nil, fuzzNow)
		policy.NextChange(plan, &ov, fuzzNow)
		ov.Expire(fuzzNow.Add(time.Hour))
	})
}

func FuzzUsageFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"users":{"alice":{"period":"month","start":"2026-12-01T00:00:00Z","used":5,"counters":{"lan0/egress/1:100":7}}}}`))
	f.Add([]byte(`{"version":1,"users":{"alice":{"period":"month","start":"9999-12-31T00:00:00Z","used":5}}}`))
	plan := fuzzPlan(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := decodeUsage(b, time.UTC)
		if err != nil {
			checkErr(t, err)
			return
		}
		u.Configure(plan)
		for _, name := range []string{"alice", "bob"} {
			// status shows the period's end: it must marshal.
			if _, _, end := u.Used(name, config.PeriodMonth, fuzzNow); end.Year() > 9999 {
				t.Fatalf("%s: period end %s cannot be written as JSON", name, end)
			}
			u.Observe(name, "lan0/egress/1:100", 1000, fuzzNow)
			u.Observe(name, "lan0/egress/1:100", 10, fuzzNow.Add(-time.Hour))
		}
		policy.Evaluate(plan, policy.Overrides{}, u, fuzzNow)
		out, err := json.Marshal(u)
		if err != nil {
			t.Fatalf("a loaded usage does not marshal: %v", err)
		}
		if _, err := decodeUsage(out, time.UTC); err != nil {
			t.Fatalf("the daemon cannot read back what it writes: %v\n%s", err, out)
		}
	})
}

func FuzzAssignmentsFile(f *testing.F) {
	f.Add([]byte(`{"lan0/egress":{"users":{"alice":256,"bob":257},"tiers":{"gold":16},"next_user":258,"next_tier":17}}`))
	plan := fuzzPlan(f)
	targets := policy.NewRamper(plan.Policy).Step(policy.Evaluate(plan, policy.Overrides{}, nil, fuzzNow), fuzzNow)
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := decodeAssignments(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		out, err := json.Marshal(ids)
		if err != nil {
			t.Fatalf("loaded assignments do not marshal: %v", err)
		}
		if _, err := decodeAssignments(out); err != nil {
			t.Fatalf("the daemon cannot read back what it writes: %v\n%s", err, out)
		}
		// What makeReconcilers and setTargets do with them: build every
		// interface's tree (an error is fine: the daemon reports it).
		for i, in := range plan.Interfaces {
			if a := ids[ifaceKey(&in)]; a != nil && i < len(targets) {
				if tree, err := model.Build(targets[i], a.Clone()); err == nil && tree.Root == nil {
					t.Fatalf("%s: built a tree without a root", ifaceKey(&in))
				}
			}
		}
	})
}

// TestWriteStateFuzzSeeds writes the seed corpora from state files the
// daemon writes (with quota usage, an override and class ids), plus
// truncated, empty and garbage variants. It runs only with -update
// (go test ./internal/daemon -run '^TestWriteStateFuzzSeeds$' -update).
func TestWriteStateFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz/Fuzz*File")
	}
	k, clk := newFakeKernel("lan0"), newFakeClock()
	_, files := withState(t, k, clk)
	targets := map[string]string{OverridesFile: "FuzzOverridesFile", UsageFile: "FuzzUsageFile", AssignmentsFile: "FuzzAssignmentsFile"}
	for file, fuzz := range targets {
		real := files[file]
		seeds := map[string][]byte{
			"daemon":      real,
			"truncated":   real[:len(real)/2],
			"one-byte":    real[:1],
			"empty":       {},
			"null":        []byte("null\n"),
			"garbage":     []byte("\x00\x01not json\xff"),
			"trailing":    append(append([]byte{}, real...), []byte("}{")...),
			"wrong-shape": []byte(`{"version":1,"users":[],"overrides":{},"lan0/egress":[]}`),
		}
		dir := filepath.Join("testdata", "fuzz", fuzz)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
