package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// RSSEnv turns on TestRSS10kUsers (it takes about a minute).
const RSSEnv = "SHAPERD_RSS_TEST"

// RSSUsersEnv sets TestRSS10kUsers' number of users (default 10,000; at
// most 65,279 in one HTB tree, RSSQueuesEnv's per-queue trees hold more):
// scripts/bench-memory.sh sets it and the variables below.
const RSSUsersEnv = "SHAPERD_RSS_USERS"

// RSSQueuesEnv gives the LAN device that many transmit queues and the
// interfaces `queues = N` (per-queue trees: more than 65,279 users).
const RSSQueuesEnv = "SHAPERD_RSS_QUEUES"

// RSSDirectionEnv runs only one of the subtests: "egress" or "both".
const RSSDirectionEnv = "SHAPERD_RSS_DIRECTION"

// RSSMemoryLimitEnv sets daemon.memory_limit (e.g. "256mb").
const RSSMemoryLimitEnv = "SHAPERD_RSS_MEMORY_LIMIT"

// TestRSS10kUsers runs the daemon with 10,000 users in a namespace and
// reports its resident memory after the first apply and after the
// reconcile ticks of an idle 30 s, its CPU in those 30 s, the reconcile
// durations and the end-to-end time of a single-user set-rate.
//
//   - egress: one interface, one address per user (10,000 classes,
//     10,000 filters). Target: VmRSS <= 60 MB (asserted).
//
//   - both: the interface shaped in both directions, two addresses per
//     user (20,000 classes, 40,000 u32 filters); reported only.
//
//     SHAPERD_RSS_TEST=1 go test -run TestRSS10kUsers -v ./cmd/shaperd
func TestRSS10kUsers(t *testing.T) {
	if os.Getenv(RSSEnv) != "1" {
		t.Skipf("set %s=1 to measure the daemon's memory with 10,000 users", RSSEnv)
	}
	netnslab.Require(t)
	users, queues := 10000, 1
	if v := os.Getenv(RSSQueuesEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 16 {
			t.Fatalf("%s=%q: want a number of queues from 1 to 16", RSSQueuesEnv, v)
		}
		queues = n
	}
	if v := os.Getenv(RSSUsersEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 5000 || n > 200000 || (queues == 1 && n > 65279) {
			t.Fatalf("%s=%q: want a number of users from 5000 to 65279 (one HTB tree's user classes), or to 200000 with %s", RSSUsersEnv, v, RSSQueuesEnv)
		}
		users = n
	}
	dir := os.Getenv(RSSDirectionEnv)
	if dir != "" && dir != "egress" && dir != "both" {
		t.Fatalf("%s=%q: want egress or both", RSSDirectionEnv, dir)
	}
	bin := buildShaperd(t)
	if dir != "both" {
		t.Run("egress", func(t *testing.T) {
			if rss := measureDaemon(t, bin, users, queues, false); rss > 60*1024 && users == 10000 && os.Getenv(RSSMemoryLimitEnv) == "" {
				t.Errorf("median VmRSS %.1f MB while idle is above the 60 MB target", float64(rss)/1024)
			}
		})
	}
	if dir != "egress" {
		t.Run("both", func(t *testing.T) { measureDaemon(t, bin, users, queues, true) })
	}
}

// measureDaemon runs shaperd with users users (both: both directions and
// an IPv6 address per user too), logs the figures and returns the median
// VmRSS (kB) of 30 idle seconds.
func measureDaemon(t *testing.T, bin string, users, queues int, both bool) int64 {
	ns := netnslab.NewNS(t, "rss")
	peer := netnslab.NewNS(t, "rssp")
	if queues > 1 {
		netnslab.VethQueues(t, ns, "r-lan", peer, "p-lan", queues)
	} else {
		netnslab.Veth(t, ns, "r-lan", peer, "p-lan")
	}
	dir := t.TempDir()
	port := freePort(t)
	memLimit, queuesKey := "", ""
	if v := os.Getenv(RSSMemoryLimitEnv); v != "" {
		memLimit = fmt.Sprintf("memory_limit = %q\n", v)
		t.Logf("daemon.memory_limit = %q", v)
	}
	if queues > 1 {
		queuesKey = fmt.Sprintf("queues = %d\n", queues)
	}
	cfg := fmt.Sprintf(`[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
metrics = "127.0.0.1:%[2]d"
reconcile_interval = "5s"
%[3]s[policy]
timezone = "UTC"
[[interface]]
name = "r-lan"
bandwidth = "10gbit"
default_tier = "t0"
%[4]s`, dir, port, memLimit, queuesKey)
	if both {
		cfg += `[[interface]]
name = "r-lan"
direction = "ingress"
ifb = "r-ifb"
bandwidth = "10gbit"
default_tier = "t0"
` + queuesKey
	}
	cfg += `[tiers.t0]
rate = "5mbit"
ceil = "20mbit"
[tiers.t1]
rate = "20mbit"
ceil = "50mbit"
[tiers.t2]
rate = "50mbit"
ceil = "100mbit"
`
	var u strings.Builder
	for i := 0; i < users; i++ {
		v6 := ""
		if both {
			v6 = fmt.Sprintf(", \"2001:db8:1::%x\"", i+16)
		}
		a := uint32(198)<<24 | uint32(18)<<16 | uint32(i+1) // within 198.18.0.0/15
		fmt.Fprintf(&u, "[[user]]\nname = \"user%05d\"\ntier = \"t%d\"\naddresses = [\"%d.%d.%d.%d\"%s]\n",
			i, i%3, a>>24, a>>16&0xff, a>>8&0xff, a&0xff, v6)
	}
	os.WriteFile(filepath.Join(dir, "shaperd.toml"), []byte(cfg), 0o644)
	os.WriteFile(filepath.Join(dir, "users.toml"), []byte(u.String()), 0o644)

	logs := &netnslab.LockedBuffer{}
	// As the unit runs it: inside the namespace (ip netns exec execs the
	// daemon, so cmd's pid is the daemon's).
	cmd := ns.Command(bin, "--config", filepath.Join(dir, "shaperd.toml"))
	cmd.Stdout, cmd.Stderr = logs, logs
	profDir := os.Getenv(RSSProfileEnv)
	pprofAddr := ""
	if profDir != "" {
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		cmd.Env = append(os.Environ(), PprofEnv+"="+pprofAddr)
	}
	if v := os.Getenv("GOGC"); v != "" {
		t.Logf("GOGC=%s", v)
	}
	readyWithin := 3 * time.Minute * time.Duration(max(1, users/20000))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	peak := int64(0) // profile mode: a heap profile whenever VmRSS reaches a new high by 10 %
	for !strings.Contains(logs.String(), "msg=ready") {
		if profDir != "" {
			if rss := vmRSS(t, cmd.Process.Pid); rss > peak+peak/10 {
				peak = rss
				saveProfile(t, ns, fmt.Sprintf("http://%s/debug/pprof/heap", pprofAddr), filepath.Join(profDir, fmt.Sprintf("heap-start-both-%v.pprof", both)))
				t.Logf("VmRSS %.1f MB %v after the start, during the first apply: heap profile taken", float64(rss)/1024, time.Since(start).Round(10*time.Millisecond))
			}
		}
		if time.Since(start) > readyWithin {
			t.Fatalf("not ready after %v:\n%s", readyWithin, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("first apply of %d users (both directions: %v): ready after %v", users, both, time.Since(start).Round(time.Millisecond))
	rss1 := vmRSS(t, cmd.Process.Pid)
	t.Logf("VmRSS after the first apply: %.1f MB", float64(rss1)/1024)
	sum0, count0 := reconcileStats(t, ns, port)
	user0, sys0 := cpuSplit(t, cmd.Process.Pid)
	cpu0 := user0 + sys0
	const idle = 30 * time.Second
	profDone := make(chan struct{})
	if profDir != "" { // a CPU profile of the idle time, then a heap profile
		go func() {
			defer close(profDone)
			saveProfile(t, ns, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, int(idle.Seconds())-2),
				filepath.Join(profDir, fmt.Sprintf("cpu-both-%v.pprof", both)))
		}()
	} else {
		close(profDone)
	}
	var samples []int64 // VmRSS once a second: six reconcile ticks
	for i := 0; i < int(idle/time.Second); i++ {
		time.Sleep(time.Second)
		samples = append(samples, vmRSS(t, cmd.Process.Pid))
	}
	user1, sys1 := cpuSplit(t, cmd.Process.Pid)
	t.Logf("CPU while idle for %v (policy ticks every 1s, reconcile every 5s): %.1f%% of one core (user %.1f%%, system %.1f%%)",
		idle, 100*(user1+sys1-cpu0)/idle.Seconds(), 100*(user1-user0)/idle.Seconds(), 100*(sys1-sys0)/idle.Seconds())
	<-profDone
	if profDir != "" {
		saveProfile(t, ns, fmt.Sprintf("http://%s/debug/pprof/heap", pprofAddr), filepath.Join(profDir, fmt.Sprintf("heap-both-%v.pprof", both)))
	}
	slices.Sort(samples)
	rss2 := samples[len(samples)/2]
	t.Logf("VmRSS while idle (%d samples, 1/s): median %.1f MB, min %.1f MB, max %.1f MB (VmHWM %.1f MB)", len(samples),
		float64(rss2)/1024, float64(samples[0])/1024, float64(samples[len(samples)-1])/1024, float64(procStatus(t, cmd.Process.Pid, "VmHWM"))/1024)
	t.Logf("VmRSS at the end of the idle time: anonymous %.1f MB, file-backed (the binary's pages) %.1f MB",
		float64(procStatus(t, cmd.Process.Pid, "RssAnon"))/1024, float64(procStatus(t, cmd.Process.Pid, "RssFile"))/1024)
	sum, count := reconcileStats(t, ns, port)
	if count > count0 {
		t.Logf("reconciles while idle (dump, diff; one interface each): %d, mean %.3f s", int(count-count0), (sum-sum0)/(count-count0))
	}

	// One user's set-rate with --ramp 0s, end to end through the socket.
	c := control.NewClient(filepath.Join(dir, "shaperd.sock"))
	defer c.Close()
	var best time.Duration
	for i := 0; i < 5; i++ {
		r := tbf.Rate(3+i%2) * tbf.Mbit
		t0 := time.Now()
		if _, err := c.SetRate(context.Background(), control.SetRateRequest{Target: "user04711", Rate: r, Ramp: control.DurationPtr(0)}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); best == 0 || d < best {
			best = d
		}
	}
	t.Logf("set-rate of one user (--ramp 0s), end to end through the control socket: best of 5 %v", best.Round(10*time.Microsecond))
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=applied") || strings.Contains(l, "memory") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
			t.Log(l)
		}
	}
	return rss2
}

// RSSProfileEnv names a directory where TestRSS10kUsers saves a CPU
// profile of the idle time and a heap profile after it (the daemon serves
// pprof on a free port, PprofEnv); for `go tool pprof`.
const RSSProfileEnv = "SHAPERD_RSS_PROFILE"

// saveProfile fetches a pprof profile from url inside ns into file.
func saveProfile(t *testing.T, ns *netnslab.NS, url, file string) {
	resp, err := ns.HTTPClient().Get(url)
	if err != nil {
		t.Errorf("profile %s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(file, b, 0o644)
	}
	if err != nil {
		t.Errorf("profile %s: %v", url, err)
		return
	}
	t.Logf("profile saved: %s", file)
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
func reconcileStats(t *testing.T, ns *netnslab.NS, port int) (sum, count float64) {
	t.Helper()
	resp, err := ns.HTTPClient().Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
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

// cpuSplit returns the user and system CPU seconds of pid.
func cpuSplit(t *testing.T, pid int) (user, sys float64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which is in parentheses).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return ut / 100, st / 100
}
