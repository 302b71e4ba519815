package control_test

import (
	"context"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/controltest"
)

func TestListenModeAndParentDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "shaperd")
	path := filepath.Join(dir, "shaperd.sock")
	old := syscall.Umask(0) // the socket's mode must not depend on the umask
	l, err := control.Listen(path, "")
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want socket 0660", fi.Mode())
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o755 {
		t.Errorf("parent dir mode %v, want 0755", di.Mode().Perm())
	}
	// Nothing else is left in the directory (the private temp dir is gone).
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the socket", len(ents))
	}
	l.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket file left after Close: %v", err)
	}
}

func TestListenGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting the socket's group needs root")
	}
	g := otherGroup(t)
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := control.Listen(path, g.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; strconv.Itoa(int(gid)) != g.Gid {
		t.Errorf("socket gid %d, want %s (%s)", gid, g.Gid, g.Name)
	}
	if _, err := control.Listen(filepath.Join(t.TempDir(), "t.sock"), "no-such-group-shaperd"); err == nil ||
		!strings.Contains(err.Error(), `group "no-such-group-shaperd" does not exist`) {
		t.Errorf("unknown group: %v", err)
	}
}

// otherGroup returns an existing group that is neither root's nor nobody's.
func otherGroup(t *testing.T) *user.Group {
	t.Helper()
	for _, name := range []string{"daemon", "bin", "sys", "adm", "users"} {
		if g, err := user.LookupGroup(name); err == nil && g.Gid != "0" && g.Gid != "65534" {
			return g
		}
	}
	t.Skip("no suitable group in /etc/group")
	return nil
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	// A crashed daemon leaves its socket file behind.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket not there: %v", err)
	}
	l, err := control.Listen(path, "")
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	controltest.ServeOn(t, &controltest.Fake{State: controltest.Sample()}, l)
	c := control.NewClient(path)
	defer c.Close()
	if _, err := c.Status(context.Background()); err != nil {
		t.Errorf("status over the replacing socket: %v", err)
	}
}

func TestListenRefusesLiveSocket(t *testing.T) {
	fake := &controltest.Fake{State: controltest.Sample()}
	path := controltest.Serve(t, fake)
	_, err := control.Listen(path, "")
	want := "another shaperd is running on " + path
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second Listen: %v, want %q", err, want)
	}
	// The first server is untouched.
	c := control.NewClient(path)
	defer c.Close()
	if _, err := c.Status(context.Background()); err != nil {
		t.Errorf("first server after refused second: %v", err)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := control.Listen(path, ""); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Errorf("regular file clobbered: %q", b)
	}
}

func TestCloseKeepsSuccessorSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l1, err := control.Listen(path, "")
	if err != nil {
		t.Fatal(err)
	}
	// Someone removed our socket and another daemon took the path.
	os.Remove(path)
	l2, err := control.Listen(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	l1.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("closing the old listener removed the new socket: %v", err)
	}
}
