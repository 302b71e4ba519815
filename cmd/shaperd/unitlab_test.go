package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// The daemon tests run shaperd the way routers run it: the built binaries,
// started from the ExecStartPre=/ExecStart=/ExecReload= lines of
// systemd/shaperd.service (installed paths rewritten to the test's files),
// inside the lab's router namespace with `ip netns exec` (never --netns),
// with NOTIFY_SOCKET and WATCHDOG_USEC set as systemd sets them.
// shaperctl always runs as a separate process against the socket.

const unitFile = "../../systemd/shaperd.service"

var (
	binOnce            sync.Once
	binDir, binErr     string
	shaperdBin, ctlBin string
)

// binaries builds shaperd and shaperctl once per test binary.
func binaries(t testing.TB) (shaperd, shaperctl string) {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shaperd-bin-")
		if err != nil {
			binErr = err.Error()
			return
		}
		// World-readable, so that unprivileged uids can run shaperctl.
		_ = os.Chmod(dir, 0o755)
		binDir = dir
		for _, b := range []struct{ out, pkg string }{{"shaperd", "."}, {"shaperctl", "../shaperctl"}} {
			if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg).CombinedOutput(); err != nil {
				binErr = fmt.Sprintf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
		shaperdBin, ctlBin = filepath.Join(dir, "shaperd"), filepath.Join(dir, "shaperctl")
	})
	if binErr != "" {
		t.Fatal(binErr)
	}
	return shaperdBin, ctlBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// metricsAddr is where the lab daemons serve /metrics, inside the router
// namespace (each lab has its own loopback).
const metricsAddr = "127.0.0.1:9717"

// unitLab is a router lab with shaperd running in its router namespace as
// the systemd unit runs it.
type unitLab struct {
	*netnslab.RouterLab
	*netnslab.Service
	t                   *testing.T
	dir, cfg, sock, ctl string
	k                   *kernel.Kernel // the test's own view of the router's kernel
}

// newUnitLab builds a lab with users hosts, writes config (a format with
// %[1]s for the test's directory) and users (from the lab's addresses)
// and starts shaperd from the unit. It waits for READY=1.
func newUnitLab(t *testing.T, users int, config string, usersTOML func(*netnslab.RouterLab) string) *unitLab {
	t.Helper()
	return newUnitLabBefore(t, users, config, usersTOML, nil)
}

// unitEdit changes how newUnitLabBefore starts the daemon: unit edits the
// unit as read; noWait returns without waiting for READY=1 (a start that
// must fail).
type unitEdit struct {
	unit   func(*netnslab.Unit)
	noWait bool
	// lanQueues, when above 1, gives the lab's r-lan that many queues.
	lanQueues int
	// prefix names the lab's namespaces (netnslab.RouterLabOptions.Prefix).
	prefix string
}

// newUnitLabBefore is newUnitLab that calls before (when not nil) with the
// lab before shaperd starts, and each edit with the unit as read.
func newUnitLabBefore(t *testing.T, users int, config string, usersTOML func(*netnslab.RouterLab) string, before func(*netnslab.RouterLab), edits ...unitEdit) *unitLab {
	t.Helper()
	netnslab.Require(t)
	bin, ctl := binaries(t)
	o := netnslab.RouterLabOptions{Users: users}
	for _, e := range edits {
		o.LANQueues = max(o.LANQueues, e.lanQueues)
		if e.prefix != "" {
			o.Prefix = e.prefix
		}
	}
	lab := netnslab.NewRouterLab(t, o)
	if before != nil {
		before(lab)
	}
	dir, err := os.MkdirTemp("", "shaperd-unit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // nobody may reach the socket's mode bits
		t.Fatal(err)
	}
	u := &unitLab{RouterLab: lab, t: t, dir: dir, cfg: filepath.Join(dir, "shaperd.toml"),
		sock: filepath.Join(dir, "shaperd.sock"), ctl: ctl}
	u.writeConfig(config, usersTOML(lab))
	unit, err := netnslab.ReadUnit(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	// As an operator with a non-default socket would: Environment= in the unit.
	unit.Environment = append(unit.Environment, "SHAPERD_SOCKET="+u.sock)
	noWait := false
	for _, e := range edits {
		if e.unit != nil {
			e.unit(unit)
		}
		noWait = noWait || e.noWait
	}
	paths := map[string]string{
		"/usr/local/bin/shaperd":    bin,
		"/usr/local/bin/shaperctl":  ctl,
		"/etc/shaperd/shaperd.toml": u.cfg,
	}
	for _, argv := range append(unit.ExecStart, unit.ExecStartPre...) {
		if r := netnslab.Rewrite(argv, paths); strings.Contains(strings.Join(r, " "), "/usr/local") || strings.Contains(strings.Join(r, " "), "/etc/shaperd") {
			t.Fatalf("%s: a command line the test cannot rewrite: %q", unitFile, argv)
		}
	}
	if u.k, err = kernel.Open(kernel.Options{NetNS: lab.Router.Name}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.k.Close() })
	u.Service = netnslab.StartService(t, lab.Router, unit, paths)
	if noWait {
		return u
	}
	u.WaitReady(60 * time.Second)
	return u
}

// writeConfig writes shaperd.toml (config formatted with the directory)
// and users.toml.
func (u *unitLab) writeConfig(config, users string) {
	u.t.Helper()
	if err := os.WriteFile(u.cfg, []byte(fmt.Sprintf(config, u.dir)), 0o644); err != nil {
		u.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(u.dir, "users.toml"), []byte(users), 0o644); err != nil {
		u.t.Fatal(err)
	}
}

// shaperctl runs shaperctl as a separate process against the daemon's
// socket and returns its exit code and combined output.
func (u *unitLab) shaperctl(args ...string) (int, string) {
	u.t.Helper()
	return runCmd(u.t, exec.Command(u.ctl, append([]string{"--socket", u.sock}, args...)...))
}

// runCmd runs cmd and returns its exit code and combined output.
func runCmd(t testing.TB, cmd *exec.Cmd) (int, string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return 0, string(out)
}

// mustCtl is shaperctl that fails the test unless it exits 0.
func (u *unitLab) mustCtl(args ...string) string {
	u.t.Helper()
	code, out := u.shaperctl(args...)
	if code != 0 {
		u.t.Fatalf("shaperctl %s: exit %d\n%s\ndaemon log:\n%s", strings.Join(args, " "), code, out, u.Logs.String())
	}
	return out
}

// status is `shaperctl status --json`, decoded. Its exit code is 1 when
// an interface is not ok (it still prints the status), so only stdout is
// decoded.
func (u *unitLab) status() control.Status {
	u.t.Helper()
	cmd := exec.Command(u.ctl, "--socket", u.sock, "status", "--json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var st control.Status
	if jerr := jsonout.Decode(out, &st); jerr != nil {
		u.t.Fatalf("shaperctl status --json: %v, %v\n%s%s", err, jerr, out, stderr.String())
	}
	return st
}

// metric scrapes /metrics inside the router namespace and returns the sum
// of the samples of name whose labels contain every one of labels
// (`key="value"` strings).
func (u *unitLab) metric(name string, labels ...string) float64 {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+metricsAddr+"/metrics", nil)
	if err != nil {
		u.t.Fatal(err)
	}
	resp, err := u.Router.HTTPClient().Do(req)
	if err != nil {
		u.t.Fatalf("scrape /metrics in %s: %v", u.Router.Name, err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		ok := true
		for _, lb := range labels {
			ok = ok && strings.Contains(l, lb)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			u.t.Fatalf("metric line %q: %v", l, err)
		}
		sum += v
	}
	return sum
}

// classOf dumps device and returns the class addr's filter points at.
func (u *unitLab) classOf(device string, addr netip.Addr) model.Class {
	u.t.Helper()
	tr, err := u.k.Dump(device)
	if err != nil {
		u.t.Fatal(err)
	}
	for _, f := range tr.Filters {
		if f.Prefix.Addr() == addr {
			for i := range tr.Classes {
				if tr.Classes[i].Handle == f.ClassID {
					return tr.Classes[i]
				}
			}
		}
	}
	u.t.Fatalf("%s: no class for %s\n%s", device, addr, u.Logs.String())
	return model.Class{}
}

// asUser runs cmd as uid/gid (a real unprivileged process).
func asUser(cmd *exec.Cmd, uid, gid uint32, groups ...uint32) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	return cmd
}

// waitFor polls cond every 20 ms until it holds or d passes; it returns
// how long it took.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}
