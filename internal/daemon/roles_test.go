package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control/controltest"
)

// TestRunControlRoles runs the daemon with socket_group and admin_group
// from its config, its own control socket (Listen, group, ACL), and the
// built shaperctl as nobody with real temporary groups: the socket group
// reads and is refused set-rate, the admin group (not in the socket group)
// connects and changes.
func TestRunControlRoles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create groups and run shaperctl as nobody")
	}
	readName, readGID := controltest.TempGroup(t, "shrd-r-")
	adminName, adminGID := controltest.TempGroup(t, "shrd-a-")
	dir := controltest.OpenDir(t)
	bin := controltest.BuildShaperctl(t, dir)
	cfg := strings.Replace(testConfig, "[daemon]\n", "[daemon]\nsocket_group = \""+readName+"\"\nadmin_group = \""+adminName+"\"\n", 1)
	writeConfig(t, dir, cfg, testUsers)

	k := newFakeKernel("lan0")
	logs := &syncBuffer{}
	ready := make(chan struct{})
	d, err := New(Options{ConfigPath: filepath.Join(dir, "shaperd.toml"), Kernel: k, Clock: newFakeClock(),
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Notifier: readyNotifier(ready), Watchdog: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	sock := filepath.Join(dir, "shaperd.sock")
	run := func(groups []uint32, args ...string) (int, string) {
		code, out, errOut := controltest.RunAs(t, bin, sock, controltest.Nobody, groups, args...)
		return code, out + errOut
	}
	// READY=1 comes after the socket is listening and the first apply.
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("no READY=1; logs:\n%s", logs)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != readGID || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket gid %d, mode %v; want %d (%s), 0660", gid, fi.Mode().Perm(), readGID, readName)
	}
	if code, out := run([]uint32{readGID}, "status"); code != 0 || !strings.Contains(out, "alice") {
		t.Errorf("socket group status: exit %d\n%s", code, out)
	}
	want := "shaperctl: permission denied: set-rate needs the admin group '" + adminName + "' (or root); the caller is uid 65534\n"
	if code, out := run([]uint32{readGID}, "set-rate", "alice", "3mbit"); code != 1 || out != want {
		t.Errorf("socket group set-rate: exit %d %q, want 1 %q", code, out, want)
	}
	if code, out := run([]uint32{adminGID}, "set-rate", "alice", "3mbit", "--ramp", "0s"); code != 0 || !strings.Contains(out, "alice: rate 3mbit") {
		t.Errorf("admin group set-rate: exit %d\n%s", code, out)
	}
	if code, out := run([]uint32{adminGID}, "set-rate", "alice", "1gbps"); code != 1 ||
		!strings.Contains(out, "rate 1gbps (8gbit) is above lan0 ingress's bandwidth 100mbit") {
		t.Errorf("admin group set-rate above the bound: exit %d\n%s", code, out)
	}
	if code, _ := run(nil, "status"); code != 1 {
		t.Errorf("nobody without groups: status exit %d, want 1", code)
	}
	if !strings.Contains(logs.String(), "control request refused") {
		t.Errorf("the refusal is not logged:\n%s", logs)
	}
}

// readyNotifier closes ready at the first READY=1.
type readyNotifier chan struct{}

func (r readyNotifier) Notify(s string) {
	if s == "READY=1" {
		select {
		case <-r:
		default:
			close(r)
		}
	}
}
