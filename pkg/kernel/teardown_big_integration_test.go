package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// TestTeardownOfABigTree: the kernel destroys a root's whole tree in the
// one delete request, in time that grows faster than the number of
// classes, so a fixed request timeout reports an error for a teardown the
// kernel completes (100,000 users once timed out after 30 s). Teardown
// gives that request a deadline that grows with the tree: here 15,000
// classes with leaves, a request timeout of 200 ms that the delete
// outlasts, and the teardown succeeds with the tree gone.
func TestTeardownOfABigTree(t *testing.T) {
	lab, _ := labKernel(t, 1)
	const classes = 15_000
	var b strings.Builder
	dev := netnslab.RouterLANDev
	fmt.Fprintf(&b, "qdisc replace dev %s root handle 1: htb default 2\nclass add dev %s parent 1: classid 1:1 htb rate 10gbit\n", dev, dev)
	for i := 2; i < classes+2; i++ {
		fmt.Fprintf(&b, "class add dev %s parent 1:1 classid 1:%x htb rate 1mbit ceil 10mbit quantum 1514\n", dev, i)
		fmt.Fprintf(&b, "qdisc add dev %s parent 1:%x handle %x: bfifo limit 100000\n", dev, i, i)
	}
	batch := filepath.Join(t.TempDir(), "tree.batch")
	if err := os.WriteFile(batch, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	lab.Router.MustRun("tc", "-batch", batch)

	const timeout = 200 * time.Millisecond
	k, err := Open(Options{NetNS: lab.Router.Name, RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	start := time.Now()
	if err := k.Teardown(dev, ""); err != nil {
		t.Fatalf("Teardown of %d classes: %v", classes+1, err)
	}
	took := time.Since(start)
	t.Logf("Teardown of %d classes with leaves: %v (request timeout %v)", classes+1, took.Round(time.Millisecond), timeout)
	if out := lab.Router.MustRun("tc", "qdisc", "show", "dev", dev); strings.Contains(out, "htb") {
		t.Errorf("the tree is still there:\n%s", out)
	}
	if took <= timeout {
		t.Errorf("the teardown took %v, within the request timeout %v: the test no longer shows a delete that outlasts it (use a bigger tree)", took, timeout)
	}
}
