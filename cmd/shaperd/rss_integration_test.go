package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/netnslab"
)

// RSSEnv turns on TestRSS10kUsers (it takes about a minute).
const RSSEnv = "SHAPERD_RSS_TEST"

// TestRSS10kUsers runs the daemon with 10,000 users on one interface
// shaped in both directions (20,000 classes, 20,000 filters) in a
// namespace, and reports its resident memory after the first apply and
// after a reconcile tick, and the reconcile durations. Target: <= 60 MB.
//
//	SHAPERD_RSS_TEST=1 go test -run TestRSS10kUsers -v ./cmd/shaperd
func TestRSS10kUsers(t *testing.T) {
	if os.Getenv(RSSEnv) != "1" {
		t.Skipf("set %s=1 to measure the daemon's memory with 10,000 users", RSSEnv)
	}
	netnslab.Require(t)
	const users = 10000
	bin := buildShaperd(t)
	ns := netnslab.NewNS(t, "rss")
	peer := netnslab.NewNS(t, "rssp")
	netnslab.Veth(t, ns, "r-lan", peer, "p-lan")
	dir := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf(`[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
metrics = "127.0.0.1:%[2]d"
reconcile_interval = "5s"
[policy]
timezone = "UTC"
[[interface]]
name = "r-lan"
bandwidth = "10gbit"
default_tier = "t0"
[[interface]]
name = "r-lan"
direction = "ingress"
ifb = "r-ifb"
bandwidth = "10gbit"
default_tier = "t0"
[tiers.t0]
rate = "5mbit"
ceil = "20mbit"
[tiers.t1]
rate = "20mbit"
ceil = "50mbit"
[tiers.t2]
rate = "50mbit"
ceil = "100mbit"
`, dir, port)
	var u strings.Builder
	for i := 0; i < users; i++ {
		fmt.Fprintf(&u, "[[user]]\nname = \"user%05d\"\ntier = \"t%d\"\naddresses = [\"198.18.%d.%d\", \"2001:db8:1::%x\"]\n",
			i, i%3, i/250, i%250+1, i+16)
	}
	os.WriteFile(filepath.Join(dir, "shaperd.toml"), []byte(cfg), 0o644)
	os.WriteFile(filepath.Join(dir, "users.toml"), []byte(u.String()), 0o644)

	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "--config", filepath.Join(dir, "shaperd.toml"), "--netns", ns.Name)
	cmd.Stdout, cmd.Stderr = logs, logs
	if v := os.Getenv("GOGC"); v != "" {
		t.Logf("GOGC=%s", v)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for !strings.Contains(logs.String(), "msg=ready") {
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("not ready after 3 minutes:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("first apply of %d users x 2 directions: ready after %v", users, time.Since(start).Round(time.Millisecond))
	rss1 := vmRSS(t, cmd.Process.Pid)
	t.Logf("VmRSS after the first apply: %.1f MB", float64(rss1)/1024)
	sum0, count0 := reconcileStats(t, port)
	cpu0 := cpuSeconds(t, cmd.Process.Pid)
	time.Sleep(11 * time.Second) // two reconcile ticks
	t.Logf("CPU while idle (policy ticks every 1s, reconcile every 5s): %.0f%% of one core", 100*(cpuSeconds(t, cmd.Process.Pid)-cpu0)/11)
	rss2 := vmRSS(t, cmd.Process.Pid)
	t.Logf("VmRSS after two reconcile ticks: %.1f MB (VmHWM %.1f MB)", float64(rss2)/1024, float64(procStatus(t, cmd.Process.Pid, "VmHWM"))/1024)
	sum, count := reconcileStats(t, port)
	if count > count0 {
		t.Logf("reconciles after the first apply (dump, diff; one interface each): %d, mean %.3f s", int(count-count0), (sum-sum0)/(count-count0))
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=applied") || strings.Contains(l, "memory limit") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
			t.Log(l)
		}
	}
	if rss2 > 60*1024 {
		t.Errorf("VmRSS %.1f MB is above the 60 MB target", float64(rss2)/1024)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func vmRSS(t *testing.T, pid int) int64 { return procStatus(t, pid, "VmRSS") }

// procStatus returns a kB field of /proc/PID/status.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			v, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// reconcileStats reads shaperd_reconcile_duration_seconds' sum and count.
func reconcileStats(t *testing.T, port int) (sum, count float64) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "shaperd_reconcile_duration_seconds_sum "); ok {
			sum, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(l, "shaperd_reconcile_duration_seconds_count "); ok {
			count, _ = strconv.ParseFloat(v, 64)
		}
	}
	return sum, count
}

// cpuSeconds returns the user+system CPU time of pid from /proc/PID/stat
// (in clock ticks of 1/100 s, as on Linux).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which is in parentheses).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}
