package daemon

import (
	"errors"
	"os"
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
