package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/netnslab"
)

const labConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
reconcile_interval = "1s"
log_level = "debug"

[policy]
timezone = "UTC"

[[interface]]
name = "%[2]s"
bandwidth = "1gbit"
default_tier = "bronze"

[[interface]]
name = "%[2]s"
direction = "ingress"
ifb = "r-ifb"
bandwidth = "1gbit"
default_tier = "bronze"

[tiers.bronze]
rate = "10mbit"
ceil = "20mbit"
`

func writeLabConfig(t *testing.T, dir, iface string, lab *netnslab.RouterLab) string {
	t.Helper()
	p := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(labConfig, dir, iface)), 0o644); err != nil {
		t.Fatal(err)
	}
	users := fmt.Sprintf("[[user]]\nname = \"u0\"\ntier = \"bronze\"\naddresses = [%q]\n", lab.Users4[0])
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBinaryInNetns(t *testing.T) {
	netnslab.Require(t)
	bin := buildShaperd(t)
	lab := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: 1})
	dir := t.TempDir()
	cfg := writeLabConfig(t, dir, netnslab.RouterLANDev, lab)
	qdisc := func(dev string) string {
		out, _ := lab.Router.Run("tc", "qdisc", "show", "dev", dev)
		return out
	}
	shaperd := func(args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"--config", cfg, "--netns", lab.Router.Name}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}

	if code, out := shaperd("--once", "--log-format", "json"); code != 0 || !strings.Contains(out, `"msg":"applied"`) {
		t.Fatalf("--once: exit %d\n%s", code, out)
	}
	if q := qdisc("r-lan"); !strings.Contains(q, "qdisc htb 1:") {
		t.Fatalf("--once left no htb on r-lan:\n%s", q)
	}
	if q := qdisc("r-ifb"); !strings.Contains(q, "qdisc htb 1:") {
		t.Fatalf("--once left no htb on r-ifb:\n%s", q)
	}
	// Again: nothing to do.
	if code, out := shaperd("--once"); code != 0 || strings.Contains(out, "msg=applied") {
		t.Errorf("second --once: exit %d, wrote something:\n%s", code, out)
	}

	// The daemon: SIGHUP with an invalid config is refused, SIGTERM leaves
	// the shaping in place.
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "--config", cfg, "--netns", lab.Router.Name)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitLog := func(what string) {
		t.Helper()
		for start := time.Now(); !strings.Contains(logs.String(), what); time.Sleep(20 * time.Millisecond) {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("no %q in the daemon's log:\n%s", what, logs.String())
			}
		}
	}
	waitLog("msg=ready")
	good, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, bytes.Replace(good, []byte(`ceil = "20mbit"`), []byte(`ceil = "1mbit"`), 1), 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog("reload refused")
	os.WriteFile(cfg, good, 0o644)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("SIGTERM: %v\n%s", err, logs.String())
	}
	if strings.Contains(logs.String(), "msg=applied") {
		t.Errorf("the daemon wrote to the kernel after --once had applied the plan:\n%s", logs.String())
	}
	if q := qdisc("r-lan"); !strings.Contains(q, "qdisc htb 1:") {
		t.Errorf("SIGTERM removed the shaping:\n%s", q)
	}

	if code, out := shaperd("--teardown"); code != 0 {
		t.Fatalf("--teardown: exit %d\n%s", code, out)
	}
	if q := qdisc("r-lan"); strings.Contains(q, "htb") {
		t.Errorf("--teardown left htb:\n%s", q)
	}
	if out, err := lab.Router.Run("ip", "link", "show", "r-ifb"); err == nil {
		t.Errorf("--teardown left the IFB:\n%s", out)
	}

	// A missing interface: --once fails naming it.
	writeLabConfig(t, dir, "r-nope", lab)
	if code, out := shaperd("--once"); code != 1 || !strings.Contains(out, "r-nope") {
		t.Errorf("--once with a missing interface: exit %d\n%s", code, out)
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
