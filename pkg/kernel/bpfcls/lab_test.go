package bpfcls

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/clstest"
	"github.com/shaperd/shaperd/pkg/model"
)

// lab is the shared classifier lab with a bpf Classifier of its device's
// HTB root, pinning under a bpffs of the test's own (mounted by the
// classifier itself, see EnsureBPFFS) that is unmounted on cleanup.
type lab struct {
	*clstest.Lab
	c    *Classifier
	opts Options
}

func newLab(t testing.TB) *lab {
	t.Helper()
	cl := clstest.NewLab(t, "bpf")
	ino, err := NetNSInode(cl.NSFD)
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{Lab: cl, opts: Options{PinRoot: testPinRoot(t), NetNS: ino, Replaces: []uint16{100, 101, 102, 103}}}
	l.c = NewConn(cl.Conn, cl.Ifindex, model.RootQdisc, l.opts)
	t.Cleanup(func() { l.c.Close() })
	return l
}

// testPinRoot is a pin root whose parent, a fresh directory, becomes a
// bpffs mount when a classifier first needs it. On cleanup the test fails
// if pins are left under it, and the mount is removed.
func testPinRoot(t testing.TB) string {
	dir := filepath.Join(t.TempDir(), "bpf")
	root := filepath.Join(dir, "shaperd")
	t.Cleanup(func() {
		var left []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				left = append(left, strings.TrimPrefix(p, root))
			}
			return nil
		})
		if len(left) > 0 && !t.Failed() {
			t.Errorf("pins left behind under %s: %v", root, left)
		}
		_ = unix.Unmount(dir, unix.MNT_DETACH)
	})
	return root
}
