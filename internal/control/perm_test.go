package control_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/controltest"
)

// nobody is the unprivileged uid the helper processes run as.
const nobody = controltest.Nobody

// TestRoles runs the built shaperctl as nobody with real groups against a
// server whose Access has a socket group (read) and an admin group
// (change): the kernel's SO_PEERCRED and the helper's /proc groups decide,
// not a fake.
func TestRoles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create groups and run shaperctl as nobody")
	}
	readName, readGID := controltest.TempGroup(t, "shrd-r-")
	adminName, adminGID := controltest.TempGroup(t, "shrd-a-")

	dir, err := os.MkdirTemp("", "shaperd-roles-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := controltest.BuildShaperctl(t, dir)

	access, err := control.NewAccess(readName, adminName)
	if err != nil {
		t.Fatal(err)
	}
	if access.FileGroup() != readName {
		t.Errorf("FileGroup %q, want the socket group %q", access.FileGroup(), readName)
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := control.Listen(sock, access.FileGroup())
	if err != nil {
		t.Fatal(err)
	}
	// As the daemon does: the admin group gets an ACL entry on the socket
	// file, which belongs to the socket group.
	if gid, ok := access.ExtraGroup(); !ok || gid != int(adminGID) {
		t.Fatalf("ExtraGroup %d %v, want the admin group %d", gid, ok, adminGID)
	}
	if err := control.AllowGroup(sock, int(adminGID)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode after the ACL: %v (%v), want 0660", fi.Mode().Perm(), err)
	}
	fake := &controltest.Fake{State: controltest.Sample()}
	controltest.ServeAccess(t, fake, l, access)

	const nogroup = nobody
	denied := "shaperctl: permission denied: set-rate needs the admin group '" + adminName + "' (or root); the caller is uid 65534\n"
	for _, tc := range []struct {
		name   string
		gid    uint32
		groups []uint32
		args   []string
		code   int
		stdout string // substring
		stderr string // exact, when not empty
	}{
		// Not in either group: the socket file's mode refuses the connect.
		{"no groups, status", nogroup, []uint32{}, []string{"status"}, 1, "",
			"shaperctl: permission denied on " + sock + ": run as root or as a member of the socket's group (daemon.socket_group or daemon.admin_group in shaperd.toml)\n"},
		{"no groups, set-rate", nogroup, []uint32{}, []string{"set-rate", "alice", "3mbit"}, 1, "",
			"shaperctl: permission denied on " + sock + ": run as root or as a member of the socket's group (daemon.socket_group or daemon.admin_group in shaperd.toml)\n"},
		// The socket group reads and may not change.
		// (status exits 1: wan0 of the sample is failed.)
		{"socket group, status", nogroup, []uint32{readGID}, []string{"status"}, 1, "alice", ""},
		{"socket group, set-rate", nogroup, []uint32{readGID}, []string{"set-rate", "alice", "3mbit"}, 1, "", denied},
		{"socket group, clear", nogroup, []uint32{readGID}, []string{"clear", "alice"}, 1, "",
			"shaperctl: permission denied: clear needs the admin group '" + adminName + "' (or root); the caller is uid 65534\n"},
		{"socket group, reload", nogroup, []uint32{readGID}, []string{"reload"}, 1, "",
			"shaperctl: permission denied: reload needs the admin group '" + adminName + "' (or root); the caller is uid 65534\n"},
		// The admin group (supplementary, or the primary gid) changes.
		{"admin group, set-rate", nogroup, []uint32{readGID, adminGID}, []string{"set-rate", "alice", "3mbit"}, 0, "alice: rate 3mbit", ""},
		{"admin primary gid, set-rate", adminGID, []uint32{readGID}, []string{"set-rate", "bob", "2mbit"}, 0, "bob: rate 2mbit", ""},
		{"admin group, status", nogroup, []uint32{readGID, adminGID}, []string{"status"}, 1, "alice", ""},
		// Admins need not be in the socket group: the ACL lets them connect.
		{"admin group only, clear", nogroup, []uint32{adminGID}, []string{"clear", "carol"}, 0, "carol: nothing to clear", ""},
		{"admin group only, status", nogroup, []uint32{adminGID}, []string{"status"}, 1, "alice", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := controltest.RunAs(t, bin, sock, tc.gid, tc.groups, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || (tc.stderr != "" && errOut != tc.stderr) {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout with %q, stderr %q", code, out, errOut, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
	// Only the admins' changes reached the service.
	if got := strings.Join(fake.CallLog(), ","); strings.Count(got, "set-rate") != 2 || strings.Count(got, "clear") != 1 ||
		strings.Contains(got, "clear alice") || strings.Contains(got, "reload") {
		t.Errorf("service calls %v: want exactly the admins' two set-rates and clear carol (and statuses)", got)
	}

	// With the file mode opened by hand, the server still refuses readers
	// that are in neither group (SO_PEERCRED, not the file mode).
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := controltest.RunAs(t, bin, sock, nogroup, []uint32{}, "status")
	want := "shaperctl: permission denied: status needs the socket group '" + readName + "' or the admin group '" + adminName + "' (or root); the caller is uid 65534\n"
	if code != 1 || errOut != want {
		t.Errorf("nobody on an open socket: exit %d, stderr %q; want 1, %q", code, errOut, want)
	}
}

// TestAdminGroupOnly: with only admin_group set, the socket file belongs
// to it, its members change, and nobody else may even read.
func TestAdminGroupOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create groups and run shaperctl as nobody")
	}
	adminName, adminGID := controltest.TempGroup(t, "shrd-a-")
	dir, err := os.MkdirTemp("", "shaperd-roles-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := controltest.BuildShaperctl(t, dir)
	access, err := control.NewAccess("", adminName)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := control.Listen(sock, access.FileGroup())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != adminGID || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket gid %d mode %v; want %d (%s), 0660", gid, fi.Mode().Perm(), adminGID, adminName)
	}
	controltest.ServeAccess(t, &controltest.Fake{State: controltest.Sample()}, l, access)
	if code, out, errOut := controltest.RunAs(t, bin, sock, nobody, []uint32{adminGID}, "set-rate", "alice", "3mbit"); code != 0 {
		t.Errorf("admin: exit %d %q %q", code, out, errOut)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := controltest.RunAs(t, bin, sock, nobody, []uint32{}, "status")
	want := "shaperctl: permission denied: status needs the admin group '" + adminName + "' (or root); the caller is uid 65534\n"
	if code != 1 || errOut != want {
		t.Errorf("nobody: exit %d, stderr %q; want 1, %q", code, errOut, want)
	}
}

// TestNoGroupsMeansRootOnly: without groups only uid 0 may do anything, a
// server refuses a request whose peer is unknown, and an unknown group is
// an error.
func TestNoGroupsMeansRootOnly(t *testing.T) {
	a, err := control.NewAccess("", "")
	if err != nil {
		t.Fatal(err)
	}
	if r := a.Role(control.Peer{UID: 0}); r != control.RoleAdmin {
		t.Errorf("root: %v, want admin", r)
	}
	if r := a.Role(control.Peer{UID: nobody, GID: 0}); r != control.RoleNone {
		t.Errorf("uid %d in gid 0: %v, want none (only uid 0 is root)", nobody, r)
	}
	srv := control.NewServer(&controltest.Fake{State: controltest.Sample()}, nil)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/status", nil))
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(),
		`permission denied: status needs root (no daemon.socket_group is configured); the caller's credentials are unknown`) {
		t.Errorf("no peer: %d %s", rec.Code, rec.Body)
	}
	if _, err := control.NewAccess("", "no-such-group-shaperd"); err == nil ||
		!strings.Contains(err.Error(), `admin_group: group "no-such-group-shaperd" does not exist`) {
		t.Errorf("unknown admin group: %v", err)
	}
}
