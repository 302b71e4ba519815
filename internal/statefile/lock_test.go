package statefile

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestInterfaceLocks(t *testing.T) {
	dir := t.TempDir()
	a, err := LockInterfaces(dir, "", []string{"lan0", "ifb-lan0", "lan0"})
	if err != nil {
		t.Fatal(err)
	}
	// A second manager of one of the devices (another open file
	// description, as another process has) is refused, naming the device
	// and the holder's pid; it keeps none of the locks it took.
	_, err = LockInterfaces(dir, "", []string{"wan0", "lan0"})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "lan0") ||
		!strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second lock of lan0: %v, want ErrLocked naming lan0, pid %d and --force", err, os.Getpid())
	}
	w, err := LockInterfaces(dir, "", []string{"wan0"})
	if err != nil {
		t.Fatalf("wan0 stayed locked after a refused attempt: %v", err)
	}
	w.Release()
	a.Release()
	b, err := LockInterfaces(dir, "", []string{"lan0"})
	if err != nil {
		t.Fatalf("lan0 after release: %v", err)
	}
	b.Release()
}

// Remove deletes the lock files and the directory LockInterfaces made; a
// nil *Locks holds nothing.
func TestRemoveLocks(t *testing.T) {
	dir := t.TempDir() + "/run"
	l, err := LockInterfaces(dir, "", []string{"lan0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lock directory LockInterfaces made is still there: %v", err)
	}
	var none *Locks
	none.Release()
	if err := none.Remove(); err != nil {
		t.Errorf("nil Locks: %v", err)
	}
}
