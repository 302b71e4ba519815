package main

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
)

// The rate sweep: every tier gets its rate, from the cheapest plan to a
// gigabit, whatever sends the TCP and whatever the leaf qdisc. The daemon
// runs as the unit runs it, with one user per ceiling, all busy at once,
// in each of these phases, for IPv4 and IPv6 (the fifo leaves: IPv4):
//   - download, router: TCP sent by the router itself (TCP hands the qdisc
//     GSO aggregates of up to 64 KiB);
//   - download, forwarded: TCP from the wan namespace (its veth passes the
//     sender's GSO packets through whole);
//   - download, gro: the wan sender without TSO/GSO and GRO on the
//     router's wan device, so the aggregates are built by the router's GRO,
//     as a physical NIC does with forwarded traffic;
//   - upload, forwarded: TCP from the user to the wan host, through the
//     IFB;
//   - upload, router: TCP from the user to the router itself.
//
// Each user's class must pass 0.90-1.03 of its ceil (its link-layer bytes,
// from the kernel's counters over 3 s of the run), and the user's goodput
// (iperf3), scaled to link-layer bytes (1514 per 1448 bytes of IPv4
// payload, per 1428 of IPv6), at least 0.90 of it; under the
// latency-sized leaves, the ping of a user with a saturating download
// (up to 100mbit) stays below queue_latency + 20 ms at the 99th
// percentile. The pfifo configuration also shows that aggregates really
// reach the leaves (bytes per queued packet above a frame).

// sweepCeils are the users' ceilings in mbit, one user each.
var sweepCeils = []int{1, 2, 5, 8, 10, 25, 100, 1000}

// sweepLatency is the configurations' queue_latency (the default).
const sweepLatency = 50 * time.Millisecond

// sweepWindow is how long each class's bytes are counted, mid-run.
const sweepWindow = 3 * time.Second

const sweepConfig = `
[daemon]
socket = "%%[1]s/shaperd.sock"
state_dir = "%%[1]s/state"
metrics = ""

[policy]
ramp = "0s"

[[interface]]
name = "r-lan"
direction = "egress"
bandwidth = "5gbit"
default_tier = "guest"
queues = %[1]d
%[2]s

[[interface]]
name = "r-lan"
direction = "ingress"
ifb = "r-ifb"
bandwidth = "5gbit"
queues = %[1]d
%[2]s

[tiers.guest]
rate = "1mbit"
ceil = "10mbit"
%[3]s`

// sweepUsers gives lab user i the tier of ceils[i].
func sweepUsers(ceils []int) func(*netnslab.RouterLab) string {
	return func(lab *netnslab.RouterLab) string {
		var b strings.Builder
		for i, a := range lab.Users4 {
			fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = \"c%d\"\naddresses = [%q, %q]\n\n", ceils[i], ceils[i], a, lab.Users6[i])
		}
		return b.String()
	}
}

// sweepTiers is a tier c<N> with rate = ceil = N mbit per ceiling.
func sweepTiers(ceils []int) string {
	var b strings.Builder
	for _, c := range ceils {
		fmt.Fprintf(&b, "\n[tiers.c%d]\nrate = \"%dmbit\"\nceil = \"%dmbit\"\n", c, c, c)
	}
	return b.String()
}

// sweepSource is where a phase's TCP comes from.
type sweepSource string

const (
	fromRouter    sweepSource = "router"
	fromForwarded sweepSource = "forwarded"
	fromGRO       sweepSource = "gro"
)

// sweepRow is one user's result in one phase.
type sweepRow struct {
	config, source, dir, family string
	ceil                        int
	// mbit is the goodput (iperf3), ratio that scaled to link-layer bytes
	// over the ceil; class is the class's link-layer rate over the ceil.
	mbit, ratio, class float64
	// cburst is the class's ceil bucket in bytes, as the kernel holds it.
	cburst  float64
	pingP99 time.Duration // 0: not measured
}

func TestRateSweep(t *testing.T) {
	var mu sync.Mutex
	var rows []sweepRow
	for _, cfg := range []struct {
		name   string
		queues int
		leaf   string
		// latencySized: the leaves hold queue_latency at the ceil (ping
		// is asserted); aggregates: aggregates pass the leaf whole (the
		// test shows they reach it, and a class's bytes move in steps of
		// up to 64 KiB). ceils: the users' ceilings, default sweepCeils.
		latencySized, aggregates bool
		ceils                    []int
		// v4only: IPv4 phases only. The leaf's kind does not depend on
		// the family, and IPv6 is swept in the default configurations;
		// the fifo leaves' long queues make every phase slow to drain.
		v4only bool
	}{
		{name: "default", queues: 1, latencySized: true},
		{name: "default-queues4", queues: 4, latencySized: true},
		{name: "pfifo", queues: 1, leaf: "leaf_qdisc = \"pfifo\"\nleaf_limit = 1000", aggregates: true, v4only: true},
		// The configured 12,500 bytes that carried 0.10 Mbit/s at 2mbit
		// before aggregates were split in front of it (at 100mbit and more
		// it is a queue of a millisecond or less: too small for any TCP).
		{name: "bfifo-12500", queues: 1, leaf: "leaf_qdisc = \"bfifo\"\nleaf_limit = 12500", ceils: []int{1, 2, 5, 8, 10}, v4only: true},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			ceils := cfg.ceils
			if ceils == nil {
				ceils = sweepCeils
			}
			config := fmt.Sprintf(sweepConfig, cfg.queues, cfg.leaf, sweepTiers(ceils))
			u := newUnitLabBefore(t, len(ceils), config, sweepUsers(ceils), nil, unitEdit{lanQueues: cfg.queues})
			for _, ph := range []struct {
				source sweepSource
				dir    netnslab.Direction
			}{
				{fromRouter, netnslab.Download}, {fromForwarded, netnslab.Download}, {fromGRO, netnslab.Download},
				{fromForwarded, netnslab.Upload}, {fromRouter, netnslab.Upload},
			} {
				if ph.source == fromGRO {
					sweepGRO(t, u.RouterLab)
				}
				for _, v6 := range []bool{false, true} {
					if v6 && cfg.v4only {
						continue
					}
					got := sweepPhase(t, u, ceils, ph.source, ph.dir, v6, cfg.aggregates)
					misses := sweepMisses(cfg.name, got, cfg.aggregates, cfg.latencySized)
					if len(misses) > 0 {
						// Two cores carry the gigabit user's TCP, the
						// other users' and the kernel's softirqs: a
						// phase that misses is measured once more, and
						// the second measurement is the one that counts.
						t.Logf("measured again, the first run missed:\n%s", strings.Join(misses, "\n"))
						got = sweepPhase(t, u, ceils, ph.source, ph.dir, v6, cfg.aggregates)
						misses = sweepMisses(cfg.name, got, cfg.aggregates, cfg.latencySized)
					}
					for _, m := range misses {
						t.Error(m)
					}
					for i := range got {
						got[i].config = cfg.name
					}
					mu.Lock()
					rows = append(rows, got...)
					mu.Unlock()
				}
			}
			if t.Failed() {
				for _, dev := range []string{netnslab.RouterLANDev, netnslab.RouterIFB} {
					out, _ := u.Router.Run("tc", "-s", "qdisc", "show", "dev", dev)
					t.Logf("tc -s qdisc show dev %s:\n%s", dev, out)
				}
				t.Logf("shaperd's log:\n%s", u.Logs.String())
			}
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %-9s %-8s %-4s %6s %10s %6s %6s %9s\n", "config", "source", "dir", "ip", "ceil", "Mbit/s", "ratio", "class", "ping p99")
	for _, r := range rows {
		ping := "-"
		if r.pingP99 > 0 {
			ping = r.pingP99.Round(100 * time.Microsecond).String()
		}
		fmt.Fprintf(&b, "%-16s %-9s %-8s %-4s %6d %10.3f %6.3f %6.3f %9s\n", r.config, r.source, r.dir, r.family, r.ceil, r.mbit, r.ratio, r.class, ping)
	}
	t.Logf("rate sweep (Mbit/s: goodput; ratio: goodput scaled to link-layer bytes / ceil; class: the class's link-layer rate / ceil):\n%s", b.String())
}

// sweepMisses returns what in one phase's rows misses the sweep's bounds.
func sweepMisses(config string, rows []sweepRow, aggregates, latencySized bool) []string {
	var misses []string
	for _, r := range rows {
		// The class's bytes over the window are exact to one packet: a
		// frame, or an aggregate where they pass whole. Above the ceil the
		// kernel also lets through the ceil bucket (cburst) the class
		// refilled while TCP paused: 15,140 B at 1mbit is 4 % of a 3 s
		// window.
		step := 1514.0
		if aggregates {
			step = 65536
		}
		window := float64(r.ceil) * 1e6 * sweepWindow.Seconds()
		slack := step * 8 / window
		lo, hi := 0.90-slack, 1.02+slack+r.cburst*8/window
		if r.class < lo || r.class > hi {
			misses = append(misses, fmt.Sprintf("%s %s %s %s, ceil %dmbit: the class passed %.3f of its ceil, want %.3f-%.3f",
				config, r.source, r.dir, r.family, r.ceil, r.class, lo, hi))
		}
		if r.ratio < 0.90 {
			misses = append(misses, fmt.Sprintf("%s %s %s %s, ceil %dmbit: goodput %.3f Mbit/s = %.3f of the ceil (link-layer), want at least 0.90",
				config, r.source, r.dir, r.family, r.ceil, r.mbit, r.ratio))
		}
		if latencySized && r.pingP99 > sweepLatency+20*time.Millisecond {
			misses = append(misses, fmt.Sprintf("%s %s %s %s, ceil %dmbit: ping p99 %s under a saturating download, want below %s",
				config, r.source, r.dir, r.family, r.ceil, r.pingP99, sweepLatency+20*time.Millisecond))
		}
	}
	return misses
}

// sweepGRO makes the wan host send frames, not GSO packets, and the
// router's wan device merge them with GRO (veth does GRO in NAPI mode,
// which `ethtool -K ... gro on` turns on).
func sweepGRO(t *testing.T, lab *netnslab.RouterLab) {
	t.Helper()
	lab.WAN.MustRun("ethtool", "-K", netnslab.WANDev, "tso", "off", "gso", "off")
	lab.Router.MustRun("ethtool", "-K", netnslab.RouterWANDev, "gro", "on")
	t.Cleanup(func() {
		_, _ = lab.WAN.Run("ethtool", "-K", netnslab.WANDev, "tso", "on", "gso", "on")
		_, _ = lab.Router.Run("ethtool", "-K", netnslab.RouterWANDev, "gro", "off")
	})
}

// sweepPhase runs one TCP flow per user (of ceils, in mbit) at once, from source in direction
// dir, for 5 s after an omitted second, measures each user's class over 3 s
// of it, pings each user up to 100mbit from
// the sender during downloads, and returns one row per user.
func sweepPhase(t *testing.T, u *unitLab, ceils []int, source sweepSource, dir netnslab.Direction, v6, aggregates bool) []sweepRow {
	t.Helper()
	lab := u.RouterLab
	family, far, router, users := "ipv4", lab.WAN4, netip.MustParseAddr("198.18.0.1"), lab.Users4
	payload := 1448.0
	if v6 {
		family, far, router, users = "ipv6", lab.WAN6, netip.MustParseAddr("2001:db8:1::1"), lab.Users6
		payload = 1428
	}
	type flow struct {
		client *netnslab.NS
		src    netip.Addr
		server *netnslab.Server
	}
	flows := make([]flow, len(users))
	device := netnslab.RouterLANDev
	if dir == netnslab.Upload {
		device = netnslab.RouterIFB
	}
	handles := make([]model.Handle, len(users))
	cbursts := make([]float64, len(users))
	for i, a := range users {
		c := u.classOf(device, a)
		handles[i], cbursts[i] = c.Handle, float64(c.CBurst)
		switch {
		case dir == netnslab.Download && source == fromRouter:
			flows[i] = flow{lab.Router, router, netnslab.StartServer(t, lab.LAN, a)}
		case dir == netnslab.Download:
			flows[i] = flow{lab.WAN, far, netnslab.StartServer(t, lab.LAN, a)}
		case source == fromRouter:
			flows[i] = flow{lab.LAN, a, netnslab.StartServer(t, lab.Router, router)}
		default:
			flows[i] = flow{lab.LAN, a, netnslab.StartServer(t, lab.WAN, far)}
		}
	}
	rates := make([]float64, len(users))
	pings := make([]time.Duration, len(users))
	errs := make([]error, len(users))
	var wg sync.WaitGroup
	for i, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rates[i], errs[i] = netnslab.RunClient(f.client, f.src, f.server, netnslab.ClientOptions{Seconds: 5})
		}()
		if dir == netnslab.Download && ceils[i] <= 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(2 * time.Second) // the queue is full and TCP past its start
				pings[i] = pingP99(t, f.client, users[i], 110)
			}()
		}
	}
	var perPacket float64
	time.Sleep(1500 * time.Millisecond) // past the omitted second
	if aggregates && dir == netnslab.Download {
		wg.Add(1)
		go func() {
			defer wg.Done()
			perPacket = largestQueuedPacket(t, lab.Router, 3*time.Second)
		}()
	}
	class := classRates(t, u, device, sweepWindow, handles...)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s %v %s, ceil %dmbit: %v", source, dir, family, ceils[i], err)
		}
	}
	dirName := map[netnslab.Direction]string{netnslab.Download: "download", netnslab.Upload: "upload"}[dir]
	if aggregates && dir == netnslab.Download {
		t.Logf("%s %s %s: at most %.0f bytes per packet queued in a leaf", source, dirName, family, perPacket)
		if perPacket < 3*1514 {
			t.Errorf("%s %s %s: at most %.0f bytes per packet queued in a leaf: no GSO/GRO aggregates reached the leaves, so this phase tests nothing about them",
				source, dirName, family, perPacket)
		}
	}
	rows := make([]sweepRow, len(users))
	for i := range users {
		ceil := float64(ceils[i]) * 1e6
		rows[i] = sweepRow{source: string(source), dir: dirName, family: family, ceil: ceils[i],
			mbit: rates[i] / 1e6, ratio: rates[i] * 1514 / payload / ceil, class: class[i] / ceil, cburst: cbursts[i], pingP99: pings[i]}
	}
	return rows
}

var pingTime = regexp.MustCompile(`time=([0-9.]+) ms`)

// pingP99 pings addr from ns n times, 25 ms apart (small packets: 3% of
// a 1mbit class), and returns the 99th percentile of the round trips. A
// ping that gets fewer than half its replies fails the test.
func pingP99(t *testing.T, ns *netnslab.NS, addr netip.Addr, n int) time.Duration {
	rtts := pingRTTs(t, ns, addr, n)
	if len(rtts) == 0 {
		return 0
	}
	return rtts[int(math.Ceil(0.99*float64(len(rtts))))-1]
}

// pingRTTs pings addr from ns n times, 25 ms apart, and returns the round
// trips, sorted. A ping that gets fewer than half its replies fails the
// test (and returns none).
func pingRTTs(t *testing.T, ns *netnslab.NS, addr netip.Addr, n int) []time.Duration {
	t.Helper()
	out, _ := ns.Run("ping", "-n", "-i", "0.025", "-c", strconv.Itoa(n), "-W", "1", addr.String())
	var rtts []time.Duration
	for _, m := range pingTime.FindAllStringSubmatch(out, -1) {
		ms, _ := strconv.ParseFloat(m[1], 64)
		rtts = append(rtts, time.Duration(ms*float64(time.Millisecond)))
	}
	if len(rtts) < n/2 {
		t.Errorf("ping %s from %s: %d of %d replies:\n%s", addr, ns.Name, len(rtts), n, out)
		return nil
	}
	slices.Sort(rtts)
	return rtts
}

var leafBacklog = regexp.MustCompile(`(?m)^qdisc \S+ \S+ parent 1:[0-9a-f]+ .*\n.*\n backlog (\d+)b (\d+)p`)

// largestQueuedPacket samples the router's r-lan leaf qdiscs every 200 ms
// for d and returns the largest mean bytes per queued packet seen in one
// leaf (a qdisc counts a GSO or GRO aggregate as one packet).
func largestQueuedPacket(t *testing.T, router *netnslab.NS, d time.Duration) float64 {
	t.Helper()
	best := 0.0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		out, err := router.Run("tc", "-s", "qdisc", "show", "dev", netnslab.RouterLANDev)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range leafBacklog.FindAllStringSubmatch(out, -1) {
			bytes, _ := strconv.ParseFloat(m[1], 64)
			pkts, _ := strconv.ParseFloat(m[2], 64)
			if pkts > 0 {
				best = max(best, bytes/pkts)
			}
		}
	}
	return best
}

// Above a gigabit: one user at 2gbit alone on a 5gbit port, TCP sent by
// the router and forwarded, downloads and uploads, with the default leaf
// (at this ceil a bfifo of 50 ms: 12.5 MB). The lab's veth pair carries
// about 5 Gbit/s of one TCP flow on this 2-core machine: 2gbit leaves it
// room.
func TestRateAboveGigabit(t *testing.T) {
	ceils := []int{2000}
	config := fmt.Sprintf(sweepConfig, 1, "", sweepTiers(ceils))
	u := newUnitLabBefore(t, len(ceils), config, sweepUsers(ceils), nil)
	for _, ph := range []struct {
		source sweepSource
		dir    netnslab.Direction
	}{{fromRouter, netnslab.Download}, {fromForwarded, netnslab.Download}, {fromForwarded, netnslab.Upload}} {
		for _, r := range sweepPhase(t, u, ceils, ph.source, ph.dir, false, false) {
			t.Logf("%s %s %s, ceil %dmbit: goodput %.1f Mbit/s (%.3f), class %.3f of the ceil", r.source, r.dir, r.family, r.ceil, r.mbit, r.ratio, r.class)
			if r.class < 0.90 || r.class > 1.03 || r.ratio < 0.90 {
				t.Errorf("%s %s %s, ceil %dmbit: the class passed %.3f of its ceil, goodput %.3f; want 0.90-1.03 and at least 0.90",
					r.source, r.dir, r.family, r.ceil, r.class, r.ratio)
			}
		}
	}
}
