package controltest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Nobody is the unprivileged uid that permission tests run shaperctl as.
const Nobody = 65534

// TempGroup creates a group named prefix plus random hex with groupadd
// and deletes it when the test ends (also when it fails). It returns the
// name and gid. It needs root.
func TempGroup(t testing.TB, prefix string) (string, uint32) {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	if out, err := exec.Command("groupadd", name).CombinedOutput(); err != nil {
		t.Fatalf("groupadd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("groupdel", name).CombinedOutput(); err != nil {
			t.Errorf("groupdel %s: %v\n%s", name, err, out)
		}
	})
	g, err := user.LookupGroup(name)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return name, uint32(gid)
}

// OpenDir makes a temporary directory that every uid may enter (so that
// Nobody reaches a socket's own mode bits and a binary in it), removed when
// the test ends.
func OpenDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shaperd-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// BuildShaperctl builds cmd/shaperctl into dir and returns its path.
func BuildShaperctl(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "shaperctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/shaperd/shaperd/cmd/shaperctl").CombinedOutput(); err != nil {
		t.Fatalf("build shaperctl: %v\n%s", err, out)
	}
	return bin
}

// RunAs runs the shaperctl binary bin against socket sock as uid Nobody
// with primary group gid and the supplementary groups, a real
// unprivileged process, and returns its exit code, stdout and stderr.
func RunAs(t testing.TB, bin, sock string, gid uint32, groups []uint32, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--socket", sock}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: gid, Groups: groups}}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	}
	t.Fatalf("run shaperctl as uid %d: %v", Nobody, err)
	return 0, "", ""
}
