package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/shaperd/shaperd/internal/statefile"
)

// Teardown removes the lock files it held and the lock directory when it
// made it; a directory that was there before (holding other files) stays.
func TestTeardownRemovesLockFiles(t *testing.T) {
	for _, existed := range []bool{false, true} {
		k := newFakeKernel("lan0")
		d, dir := newTestDaemon(t, k, newFakeClock(), "")
		if err := d.Once(context.Background()); err != nil {
			t.Fatal(err)
		}
		lockDir := filepath.Join(dir, "run")
		if existed {
			if err := os.Mkdir(lockDir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		l, err := statefile.LockInterfaces(lockDir, "", []string{"lan0", "ifb-lan0"})
		if err != nil {
			t.Fatal(err)
		}
		d.locks = l
		if err := d.Teardown(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, err = os.Stat(lockDir)
		switch {
		case existed && err != nil:
			t.Errorf("a lock directory that existed before is gone: %v", err)
		case !existed && !errors.Is(err, fs.ErrNotExist):
			t.Errorf("the lock directory teardown made is still there: %v", err)
		}
		if existed {
			if left, _ := os.ReadDir(lockDir); len(left) != 0 {
				t.Errorf("after teardown %s holds %v", lockDir, left)
			}
		}
		// The locks are free: another manager may start.
		l2, err := statefile.LockInterfaces(lockDir, "", []string{"lan0"})
		if err != nil {
			t.Fatalf("lan0 after teardown: %v", err)
		}
		l2.Release()
		d.Close()
	}
}
