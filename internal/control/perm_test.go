package control_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/controltest"
)

// helperEnv names the socket a helper subprocess should call.
const helperEnv = "SHAPERD_CONTROL_TEST_HELPER_SOCKET"

// TestHelperClientProcess is not a test: run as a subprocess (as another
// user) by TestSocketGroupPermission, it calls Status on the socket named by
// helperEnv and prints RESULT lines for the parent to check.
func TestHelperClientProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("helper process only")
	}
	_, err := control.NewClient(path).Status(context.Background())
	if err != nil {
		fmt.Printf("RESULT uid=%d error: %v\n", os.Getuid(), err)
		return
	}
	fmt.Printf("RESULT uid=%d ok\n", os.Getuid())
}

// TestSocketGroupPermission runs the client as nobody against a socket
// owned by root and another group: refused without that group, allowed with
// it (which shows the refusal comes from the socket's mode and group, not
// from the directory or the binary).
func TestSocketGroupPermission(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as nobody")
	}
	g := otherGroup(t)
	gid, _ := strconv.Atoi(g.Gid)
	// A directory nobody may traverse, holding the socket and a copy of this
	// test binary (the go build cache is private to root).
	dir, err := os.MkdirTemp("", "shaperd-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "control.test")
	copyExecutable(t, bin)

	path := filepath.Join(dir, "s.sock")
	l, err := control.Listen(path, g.Name)
	if err != nil {
		t.Fatal(err)
	}
	controltest.ServeOn(t, &controltest.Fake{State: controltest.Sample()}, l)

	run := func(groups []uint32) string {
		cmd := exec.Command(bin, "-test.run=^TestHelperClientProcess$", "-test.count=1")
		cmd.Env = []string{helperEnv + "=" + path}
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: groups}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper as nobody (groups %v): %v\n%s", groups, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if r, ok := strings.CutPrefix(line, "RESULT "); ok {
				return r
			}
		}
		t.Fatalf("helper printed no result:\n%s", out)
		return ""
	}
	if got := run([]uint32{}); !strings.Contains(got, "uid=65534 error: permission denied on "+path+": run as root or as a member of the socket's group") {
		t.Errorf("nobody without the socket group: %q, want permission denied", got)
	}
	if got := run([]uint32{uint32(gid)}); got != "uid=65534 ok" {
		t.Errorf("nobody in the socket group %s: %q, want ok", g.Name, got)
	}
}

// copyExecutable copies the running test binary to dst, mode 0755.
func copyExecutable(t *testing.T, dst string) {
	t.Helper()
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
