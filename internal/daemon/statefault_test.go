package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// mountOrSkip runs mount(2); without the privilege it skips, unless
// SHAPERD_REQUIRE_NETNS=1 (the privileged suite) makes it fail.
func mountOrSkip(t *testing.T, source, target, fstype string, flags uintptr, data string) {
	t.Helper()
	if err := syscall.Mount(source, target, fstype, flags, data); err != nil {
		if errors.Is(err, syscall.EPERM) && os.Getenv("SHAPERD_REQUIRE_NETNS") != "1" {
			t.Skipf("mount %s: %v (needs root)", target, err)
		}
		t.Fatalf("mount %s on %s: %v", fstype, target, err)
	}
}

// stateFault is a real fault of the state directory: break makes writes
// in dir fail with want, fix undoes it.
type stateFault struct {
	name   string
	want   string
	break_ func(t *testing.T, dir string)
	fix    func(t *testing.T, dir string)
}

var stateFaults = []stateFault{
	{
		name: "read-only", want: "read-only file system",
		break_: func(t *testing.T, dir string) {
			mountOrSkip(t, dir, dir, "", syscall.MS_BIND, "")
			mountOrSkip(t, "", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, "")
		},
		fix: func(t *testing.T, dir string) {
			if err := syscall.Unmount(dir, 0); err != nil {
				t.Fatalf("umount %s: %v", dir, err)
			}
		},
	},
	{
		// A 64 KiB tmpfs filled by one 64 KiB file: every write of data fails.
		name: "disk full", want: "no space left on device",
		break_: func(t *testing.T, dir string) {
			mountOrSkip(t, "tmpfs", dir, "tmpfs", 0, "size=64k,mode=0750")
			if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, 64<<10), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		fix: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
				t.Fatal(err)
			}
		},
	},
}

// An unwritable or full state_dir does not stop the shaping: set-rate is
// refused with the write error (the override could not be kept), quota
// usage keeps counting in memory, the problems show in status and metrics
// and are logged once per error, not on every retry. Once the directory
// accepts writes again, the next reconcile tick writes the state and the
// problems go.
func TestStateDirWriteFaults(t *testing.T) {
	for _, f := range stateFaults {
		t.Run(f.name, func(t *testing.T) {
			k, clk, logs := newFakeKernel("lan0"), newFakeClock(), &syncBuffer{}
			d, c := runDaemon(t, k, clk, logs, &recNotifier{})
			syncLoop(t, c)
			dir := d.plan.Daemon.StateDir
			f.break_(t, dir)
			t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) }) // EINVAL when fixed by unmounting
			ctx := context.Background()

			_, err := c.SetRate(ctx, control.SetRateRequest{Target: "bob", Rate: 3 * tbf.Mbit})
			if err == nil || !strings.Contains(err.Error(), f.want) || !strings.Contains(err.Error(), OverridesFile) {
				t.Errorf("set-rate with a broken state dir: %v, want an error naming %s and %q", err, OverridesFile, f.want)
			}
			// Two minutes of ticks: the usage flush is due after one and
			// fails; every reconcile tick retries.
			clk.Advance(t, 2*time.Minute)
			st := syncLoop(t, c)
			got := map[string]control.StateProblem{}
			for _, p := range st.StateProblems {
				got[p.File] = p
			}
			for _, file := range []string{OverridesFile, UsageFile} {
				p, ok := got[file]
				if !ok || p.Kind != StateWrite || !strings.Contains(p.Error, f.want) || !strings.Contains(p.Error, filepath.Join(dir, file)) {
					t.Errorf("status: no write problem for %s with %q: %+v", file, f.want, st.StateProblems)
				}
				if n := metricValue(t, d.stats.stateErrors.WithLabelValues(file, StateWrite)); n < 2 {
					t.Errorf("shaperd_state_errors_total{file=%q,kind=write} = %v, want the retries counted", file, n)
				}
				if v := metricValue(t, d.stats.stateFailing.WithLabelValues(file)); v != 1 {
					t.Errorf("shaperd_state_write_failing{file=%q} = %v, want 1", file, v)
				}
				if n := strings.Count(logs.String(), `msg="cannot save state file; shaping goes on, retrying on later ticks" file=`+file); n != 1 {
					t.Errorf("%s: the write error was logged %d times, want once", file, n)
				}
			}
			// Shaping went on: the loop still reconciles and holds the plan.
			for _, is := range st.Interfaces {
				if is.Device == "lan0" && is.State != control.StateOK {
					t.Errorf("interface %s is %s (%s) while the state dir is broken", is.Name, is.State, is.Error)
				}
			}

			f.fix(t, dir)
			clk.Advance(t, 5*time.Second) // one reconcile tick
			st = syncLoop(t, c)
			if len(st.StateProblems) != 0 {
				t.Errorf("problems left after the state dir was fixed: %+v", st.StateProblems)
			}
			for _, file := range []string{OverridesFile, UsageFile} {
				if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
					t.Errorf("%s not written after the fix: %v", file, err)
				}
				if v := metricValue(t, d.stats.stateFailing.WithLabelValues(file)); v != 0 {
					t.Errorf("shaperd_state_write_failing{file=%q} = %v after the fix", file, v)
				}
			}
			if !strings.Contains(logs.String(), `msg="state file written again" file=`+UsageFile) {
				t.Errorf("recovery not logged:\n%s", logs.String())
			}
			if _, err := c.SetRate(ctx, control.SetRateRequest{Target: "bob", Rate: 3 * tbf.Mbit}); err != nil {
				t.Errorf("set-rate after the fix: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, OverridesFile)); err != nil || !strings.Contains(string(b), `"bob"`) {
				t.Errorf("override not saved after the fix: %v %s", err, b)
			}
		})
	}
}
