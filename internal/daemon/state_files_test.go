package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// quotaConfig is testConfig with a monthly quota on gold (alice's tier).
var quotaConfig = strings.Replace(testConfig, "[tiers.gold]\n", "[tiers.gold]\nquota = \"1gb\"\nover_quota_rate = \"1mbit\"\n", 1)

// stateDaemon makes a daemon on k and clk from the config in dir, logging
// to logs.
func stateDaemon(t *testing.T, k Kernel, clk Clock, dir string, logs *syncBuffer) *Daemon {
	t.Helper()
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("New refused to start: %v", err)
	}
	return d
}

// withState runs a daemon once with an override of alice so that all three
// state files exist, and returns the directory and the files' contents.
func withState(t *testing.T, k *fakeKernel, clk *fakeClock) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	writeConfig(t, dir, quotaConfig, testUsers)
	d := stateDaemon(t, k, clk, dir, &syncBuffer{})
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.setRate(control.SetRateRequest{Target: "alice", Rate: 3 * tbf.Mbit}, nil); err != nil {
		t.Fatal(err)
	}
	setUserBytes(t, d, k, "alice", 4000) // some quota usage to save
	d.saveUsage(clk.Now())
	if err := d.saveRuntimeUsers(d.plan.Daemon.StateDir, nil); err != nil { // no run-time users: the other files stay as they were
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range stateFiles {
		b, err := os.ReadFile(filepath.Join(dir, "state", f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	return dir, files
}

// A corrupt, truncated or empty state file never stops the daemon: the
// file is moved aside to NAME.corrupt-TIMESTAMP (the injected clock, UTC),
// the error is logged naming the file, counted, and shown in status; each
// file's contents are recovered where the kernel allows it.
func TestCorruptStateFileStartsAnyway(t *testing.T) {
	for _, file := range stateFiles {
		for _, kind := range []string{"empty", "truncated", "garbage"} {
			t.Run(file+"/"+kind, func(t *testing.T) {
				k, clk := newFakeKernel("lan0"), newFakeClock()
				dir, files := withState(t, k, clk)
				path := filepath.Join(dir, "state", file)
				bad := map[string][]byte{
					"empty":     {},
					"truncated": files[file][:len(files[file])/2],
					"garbage":   []byte("\x00\x01not json at all\n"),
				}[kind]
				if err := os.WriteFile(path, bad, 0o640); err != nil {
					t.Fatal(err)
				}
				writes := k.writeCount()
				logs := &syncBuffer{}
				d := stateDaemon(t, k, clk, dir, logs)

				moved := path + ".corrupt-20261202T100000Z"
				if b, err := os.ReadFile(moved); err != nil || string(b) != string(bad) {
					t.Errorf("corrupt file not moved to %s: %v (%q)", moved, err, b)
				}
				if _, err := os.Stat(path); !os.IsNotExist(err) {
					t.Errorf("%s still in place: %v", path, err)
				}
				if n := metricValue(t, d.stats.stateErrors.WithLabelValues(file, StateCorrupt)); n != 1 {
					t.Errorf("shaperd_state_errors_total{file=%q,kind=corrupt} = %v, want 1", file, n)
				}
				if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, path) || !strings.Contains(l, "moved_to="+moved) {
					t.Errorf("log does not name the file, its error and where it went:\n%s", l)
				}
				ps := d.status().StateProblems
				if len(ps) != 1 || ps[0].File != file || ps[0].Kind != StateCorrupt || ps[0].MovedTo != moved ||
					!strings.Contains(ps[0].Error, path) || ps[0].Effect == "" {
					t.Fatalf("status state problems: %+v", ps)
				}

				if err := d.Once(context.Background()); err != nil {
					t.Fatalf("Once after a corrupt %s: %v", file, err)
				}
				switch file {
				case OverridesFile:
					if d.overrides.Len() != 0 {
						t.Errorf("%d overrides in force from a corrupt file", d.overrides.Len())
					}
				case UsersFile:
					if len(d.runtime) != 0 {
						t.Errorf("run-time users from a corrupt file: %+v", d.runtime)
					}
				case AssignmentsFile:
					if got := k.writeCount() - writes; got != 0 {
						t.Errorf("class ids not recovered from the kernel: %d writes on restart", got)
					}
				case UsageFile:
					// alice's egress class has sent 5000 bytes since it was
					// created: rebuilt from the counter, not zeroed.
					setUserBytes(t, d, k, "alice", 5000)
					if used, _, _ := d.usage.Used("alice", "month", clk.Now()); used != 5000 {
						t.Errorf("alice's usage after a lost usage file: %d, want 5000 from her class counter", used)
					}
					if e := d.status().StateProblems[0].Effect; !strings.Contains(e, "1 class counters counted") {
						t.Errorf("status effect does not count the rebuilt counters: %q", e)
					}
				}
			})
		}
	}
}

// setUserBytes samples a dump of lan0 in which user's egress class has
// sent bytes since its creation (the fake kernel keeps no counters).
func setUserBytes(t *testing.T, d *Daemon, k *fakeKernel, user string, bytes uint64) {
	t.Helper()
	st := d.ifaces[0]
	m, ok := st.ids.User(user)
	if !ok {
		t.Fatalf("%s has no class", user)
	}
	tr := k.tree("lan0")
	for i := range tr.Classes {
		if tr.Classes[i].Handle == model.MakeHandle(1, m) {
			tr.Classes[i].Stats = &model.Stats{Bytes: bytes}
		}
	}
	d.sample(st, tr, d.clock.Now())
}

// A clock stepped back behind the last evaluation re-evaluates the policy
// at once instead of waiting for the old next-change time.
func TestPolicyTickEvaluatesAfterClockStepBack(t *testing.T) {
	clk := newFakeClock()
	d, _ := newTestDaemon(t, newFakeKernel("lan0"), clk, "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	n := d.work.evaluations
	if err := d.policyTick(now.Add(time.Second)); err != nil || d.work.evaluations != n {
		t.Fatalf("an idle tick evaluated (err %v)", err)
	}
	if err := d.policyTick(now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if d.work.evaluations != n+1 {
		t.Errorf("a tick after a 1h step back did not evaluate the policy")
	}
}

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var v dto.Metric
	if err := m.Write(&v); err != nil {
		t.Fatal(err)
	}
	if c := v.GetCounter(); c != nil {
		return c.GetValue()
	}
	return v.GetGauge().GetValue()
}

// A state file that cannot be read (here a directory in its place) is a
// "read" problem: the daemon starts without it and says so; it is not
// moved aside (it is not a corrupt file), and saving over it fails as a
// write problem.
func TestUnreadableStateFileStartsAnyway(t *testing.T) {
	k, clk := newFakeKernel("lan0"), newFakeClock()
	dir := t.TempDir()
	writeConfig(t, dir, quotaConfig, testUsers)
	path := filepath.Join(dir, "state", UsageFile)
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o750); err != nil {
		t.Fatal(err)
	}
	d := stateDaemon(t, k, clk, dir, &syncBuffer{})
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	ps := d.status().StateProblems
	if len(ps) != 2 || ps[0].Kind != StateRead || ps[1].Kind != StateWrite || !strings.Contains(ps[0].Error, path) || ps[0].MovedTo != "" {
		t.Fatalf("state problems: %+v", ps)
	}
	if n := metricValue(t, d.stats.stateErrors.WithLabelValues(UsageFile, StateRead)); n != 1 {
		t.Errorf("shaperd_state_errors_total{kind=read} = %v, want 1", n)
	}
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		t.Errorf("%s moved: %v", path, err)
	}
}
