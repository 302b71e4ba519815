package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestInterfaceLocks(t *testing.T) {
	dir := t.TempDir()
	a, err := lockInterfaces(dir, "", []string{"lan0", "ifb-lan0", "lan0"})
	if err != nil {
		t.Fatal(err)
	}
	// A second manager of one of the devices (another open file
	// description, as another process has) is refused, naming the device
	// and the holder's pid; it keeps none of the locks it took.
	_, err = lockInterfaces(dir, "", []string{"wan0", "lan0"})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "lan0") ||
		!strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second lock of lan0: %v, want ErrLocked naming lan0, pid %d and --force", err, os.Getpid())
	}
	w, err := lockInterfaces(dir, "", []string{"wan0"})
	if err != nil {
		t.Fatalf("wan0 stayed locked after a refused attempt: %v", err)
	}
	w.release()
	a.release()
	b, err := lockInterfaces(dir, "", []string{"lan0"})
	if err != nil {
		t.Fatalf("lan0 after release: %v", err)
	}
	b.release()
}

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
		l, err := lockInterfaces(lockDir, "", []string{"lan0", "ifb-lan0"})
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
		l2, err := lockInterfaces(lockDir, "", []string{"lan0"})
		if err != nil {
			t.Fatalf("lan0 after teardown: %v", err)
		}
		l2.release()
		d.Close()
	}
}
