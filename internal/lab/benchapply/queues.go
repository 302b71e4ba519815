package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
)

// Per-queue trees under mq (one HTB tree per transmit queue, to shape on
// more than one core and hold more than 65,535 users), with -queues N,
// the daemon's configuration key queues = N:
//
//	(e) cold apply of USERS users on an N-queue veth by the daemon (Start +
//	    Once) vs tc -batch building the single tree (flat u32),
//	    interleaved: goal <= 0.5;
//	(f) with -queue-big M: M users on one N-queue interface: the daemon's
//	    cold apply, peak RSS, one user's rate change (Daemon.SetRate: end
//	    to end, and its kernel Apply p99, goal < 5 ms), one address added
//	    to and removed from a run-time user (Daemon.ChangeUser
//	    add-address/remove-address: end to end and kernel Apply p50/p99),
//	    re-apply of the unchanged tree (Once again: 0 writes);
//	(g) with -queue-tp-runs R: two saturating users on different queues vs
//	    the same two users in one tree (total throughput ratio), both
//	    applied by the daemon.
//
// The daemon's trees classify with -classifier (default: the daemon's,
// bpf, one cls_bpf classifier with its own maps per queue's HTB).

// newQueueLab is newLab with an N-queue veth pair.
func newQueueLab(name string, queues int, dev string) (*lab, error) {
	if _, err := command("ip", "netns", "add", name); err != nil {
		return nil, err
	}
	l := &lab{name: name, devs: []string{dev}}
	n := strconv.Itoa(queues)
	for _, argv := range [][]string{
		{"ip", "link", "add", dev, "numtxqueues", n, "numrxqueues", n, "type", "veth", "peer", "name", dev + "p", "numtxqueues", n, "numrxqueues", n},
		{"ip", "link", "set", dev, "up"},
		{"ip", "link", "set", dev + "p", "up"},
	} {
		if _, err := l.run(argv...); err != nil {
			_ = l.close()
			return nil, err
		}
	}
	return l, nil
}

// peakRSS returns the process's peak and current resident set (VmHWM,
// VmRSS) in MiB.
func peakRSS() (peak, now float64) {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmHWM:":
			peak = kb / 1024
		case "VmRSS:":
			now = kb / 1024
		}
	}
	return peak, now
}

func runQueues(o options) error {
	if o.queues < 2 {
		return nil
	}
	single, err := planTree(o, flatPlan(bigDev, o.users, 0, o.classifier))
	if err != nil {
		return fmt.Errorf("the daemon's single-tree plan: %w", err)
	}
	flatFile, _, remove, err := peerFiles(o, "e", single, false)
	if err != nil {
		return err
	}
	defer remove()
	var mq, flat, ratios []float64
	for round := 1; round <= o.rounds; round++ {
		steps := []func() error{
			func() error {
				l, err := newQueueLab(fmt.Sprintf("%s-r%d-mq", o.prefix, round), o.queues, bigDev)
				if err != nil {
					return err
				}
				defer l.close()
				ctx := situation(o.prefix)
				s, c, err := startShaperd(o, l.name, "mq", flatPlan(bigDev, o.users, o.queues, o.classifier))
				if err != nil {
					return fmt.Errorf("(e) round %d: %w", round, err)
				}
				s.close()
				mq = append(mq, secs(c.total.wall))
				fmt.Printf("round %d  (e) shaperd %d queues (%s) %6.2f s  (start %.3f, Once %.2f: kernel Apply %.2f s; %d writes; cpu user %.2f sys %.2f)  [%s]\n",
					round, o.queues, classifierName(o.classifier), secs(c.total.wall), secs(c.start.wall), secs(c.once.wall), secs(c.rec.kernel),
					c.rec.writes, secs(c.total.user), secs(c.total.sys), ctx)
				return nil
			},
			func() error {
				c, err := peerRound(o, round, "e", "qflat", flatFile, single, false)
				flat = append(flat, secs(c.wall))
				return err
			},
		}
		for i := range steps {
			if err := steps[(round-1+i)%len(steps)](); err != nil {
				return err
			}
		}
		ratios = append(ratios, mq[len(mq)-1]/flat[len(flat)-1])
	}
	ratio := median(ratios)
	fmt.Printf("TARGET (e) cold apply of %d users on %d queues (classifier %s) / tc -batch single tree: median %.2f s / %.2f s = %.2f <= 0.5: %s\n",
		o.users, o.queues, classifierName(o.classifier), median(mq), median(flat), ratio, verdict(ratio <= 0.5))
	if o.queueBig > 0 {
		if err := queueBig(o); err != nil {
			return err
		}
	}
	if o.queueTPRuns > 0 {
		if err := queueThroughput(o); err != nil {
			return err
		}
	}
	return nil
}

// Addresses of (f)'s run-time user: its own, and the one it gains and
// loses.
const (
	rtAddr    = "198.19.255.253"
	rtAddrTwo = "198.19.255.254"
)

// addressChanges adds a run-time user "rt" to the running daemon s and
// then gives it rtAddrTwo and takes it away again, n times in all, as
// `shaperctl user add-address/remove-address` do (Daemon.ChangeUser). It
// returns each change's time and its kernel Apply's in seconds. Each must
// write, with mapUpdate exactly once (the bpf classifier's map update).
func addressChanges(s *shaperd, n int, mapUpdate bool) (calls, kernels []float64, err error) {
	add := control.UserRequest{Op: control.UserAdd, Name: "rt", Tier: "bench", Addresses: []string{rtAddr}}
	if _, _, err := s.call(func(ctx context.Context) error { _, err := s.Daemon.ChangeUser(ctx, add); return err }); err != nil {
		return nil, nil, fmt.Errorf("user add rt: %w", err)
	}
	for j := range n + n%2 {
		req := control.UserRequest{Op: control.UserAddAddress, Name: "rt", Addresses: []string{rtAddrTwo}}
		if j%2 == 1 {
			req.Op = control.UserRemoveAddress
		}
		d, rec, err := s.call(func(ctx context.Context) error { _, err := s.Daemon.ChangeUser(ctx, req); return err })
		if err == nil && (rec.writes == 0 || mapUpdate && rec.writes != 1) {
			err = fmt.Errorf("it wrote %d objects, want 1", rec.writes)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("user %s rt %s: %w", req.Op, rtAddrTwo, err)
		}
		calls = append(calls, secs(d))
		kernels = append(kernels, secs(rec.kernel))
	}
	return calls, kernels, nil
}

// queueBig is (f).
func queueBig(o options) error {
	l, err := newQueueLab(o.prefix+"-big", o.queues, bigDev)
	if err != nil {
		return err
	}
	defer l.close()
	runtime.GC()
	_, base := peakRSS()
	s, c, err := startShaperd(o, l.name, "big", flatPlan(bigDev, o.queueBig, o.queues, o.classifier))
	if err != nil {
		return fmt.Errorf("(f) %d users: %w", o.queueBig, err)
	}
	defer s.close()
	peak, _ := peakRSS()
	runtime.GC()
	_, after := peakRSS()
	fmt.Printf("(f) %d users on %d queues (%s): cold apply %.2f s (start %.2f, Once %.2f: kernel Apply %.2f s, %d writes); RSS before %.0f MiB, peak %.0f MiB, after GC %.0f MiB  [%s]\n",
		o.queueBig, o.queues, classifierName(o.classifier), secs(c.total.wall), secs(c.start.wall), secs(c.once.wall), secs(c.rec.kernel), c.rec.writes,
		base, peak, after, situation(o.prefix))
	re, rec, err := s.reapply()
	if err != nil {
		return fmt.Errorf("(f) re-apply: %w", err)
	}
	s.Run()
	var calls, kernels []float64
	if err := rateChanges(400, []*shaperd{s}, []*[]float64{&calls}, []*[]float64{&kernels}); err != nil {
		return fmt.Errorf("(f) %w", err)
	}
	p99 := ms(quantile(kernels, 0.99))
	fmt.Printf("(f) one user's rate change (Daemon.SetRate): p50 %.3f ms p99 %.3f ms; its kernel Apply p50 %.3f ms p99 %.3f ms (%d)\n",
		ms(median(calls)), ms(quantile(calls, 0.99)), ms(median(kernels)), p99, len(calls))
	bpf := o.classifier == kernel.ClassifierBPF || o.classifier == "" && kernel.BPFClassifierAvailable() == nil
	acalls, akernels, err := addressChanges(s, 400, bpf)
	if err != nil {
		return fmt.Errorf("(f) %w", err)
	}
	fmt.Printf("(f) one run-time user's address added/removed (Daemon.ChangeUser; %s): p50 %.3f ms p99 %.3f ms; its kernel Apply p50 %.3f ms p99 %.3f ms (%d)\n",
		map[bool]string{true: "map updates", false: "u32 filter writes"}[bpf],
		ms(median(acalls)), ms(quantile(acalls, 0.99)), ms(median(akernels)), ms(quantile(akernels, 0.99)), len(acalls))
	fmt.Printf("TARGET (f) %d users, %d queues: cold %.2f s, peak RSS %.0f MiB; change p99 (kernel Apply) %.3f ms < 5 ms: %s; unchanged re-apply %d writes (%d changes, Once %.2f s): %s\n",
		o.queueBig, o.queues, secs(c.total.wall), peak, p99, verdict(p99 < 5), rec.writes, rec.changes, secs(re), verdict(rec.writes == 0))
	return nil
}

// Addresses of (g): two users behind the peer.
var qtpUsers = []netip.Addr{netip.MustParseAddr("198.18.0.10"), netip.MustParseAddr("198.18.0.11")}

// queueTPLab is a shaper namespace whose N-queue veth carries two users'
// traffic to a peer namespace, shaped by the daemon with trees trees (1:
// one tree).
type queueTPLab struct {
	shaper, peer *lab
	d            *shaperd
}

// queueTPPlan is (g)'s plan: the two users of qtpUsers with 10 gbit
// guaranteed on a device of queues x 40 gbit (the even split leaves every
// queue, and the one tree, more than veth can carry, so neither side is
// capped by its share and the difference is the qdisc lock alone), with
// trees per-queue trees.
func queueTPPlan(queues, trees int, classifier string) daemonPlan {
	var m, u strings.Builder
	bw := fmt.Sprintf("%dgbit", queues*40)
	iface{dev: bigDev, bandwidth: bw, defaultRate: "1mbit", classifier: classifier, queues: trees}.header(&m)
	tier(&m, "tp", "10gbit", bw)
	for i, a := range qtpUsers {
		user(&u, fmt.Sprintf("t%d", i), "tp", "", a)
	}
	return daemonPlan{dev: bigDev, users: len(qtpUsers), main: m.String(), files: u.String()}
}

func newQueueTPLab(o options, name string, trees int) (*queueTPLab, error) {
	s, err := newLab(name + "-s")
	if err != nil {
		return nil, err
	}
	p, err := newLab(name + "-p")
	if err != nil {
		_ = s.close()
		return nil, err
	}
	l := &queueTPLab{shaper: s, peer: p}
	fail := func(err error) (*queueTPLab, error) { l.close(); return nil, err }
	n := strconv.Itoa(o.queues)
	cmds := [][]string{
		{"ip", "-n", s.name, "link", "add", bigDev, "numtxqueues", n, "numrxqueues", n, "type", "veth", "peer", "name", "pe0",
			"numtxqueues", n, "numrxqueues", n, "netns", p.name},
		{"ip", "-n", s.name, "addr", "add", tpShaperAddr + "/30", "dev", bigDev},
		{"ip", "-n", s.name, "link", "set", bigDev, "up"},
		{"ip", "-n", p.name, "addr", "add", tpPeerAddr + "/30", "dev", "pe0"},
		{"ip", "-n", p.name, "link", "set", "pe0", "up"},
		{"ip", "-n", s.name, "route", "add", "198.18.0.0/15", "via", tpPeerAddr},
	}
	for _, a := range qtpUsers {
		cmds = append(cmds, []string{"ip", "-n", p.name, "addr", "add", a.String() + "/32", "dev", "pe0"})
	}
	for _, argv := range cmds {
		if _, err := command(argv...); err != nil {
			return fail(err)
		}
	}
	s.devs = []string{bigDev}
	d, c, err := startShaperd(o, s.name, fmt.Sprintf("g%d", trees), queueTPPlan(o.queues, trees, o.classifier))
	if err != nil {
		return fail(err)
	}
	l.d = d
	if trees > 1 {
		h0, ok0 := userClass(c.tree, "t0")
		h1, ok1 := userClass(c.tree, "t1")
		if !ok0 || !ok1 {
			return fail(fmt.Errorf("the daemon made no class for t0 or t1"))
		}
		if h0.Major() == h1.Major() {
			return fail(fmt.Errorf("both users in the tree of qdisc %x", h0.Major()))
		}
	}
	return l, nil
}

func (l *queueTPLab) close() {
	if l.d != nil {
		l.d.close()
	}
	_ = l.shaper.close()
	_ = l.peer.close()
}

// iperf runs one iperf3 flow per user at once for seconds and returns the
// total throughput in bits per second.
func (l *queueTPLab) iperf(seconds, port int) (float64, error) {
	var wg sync.WaitGroup
	rates := make([]float64, len(qtpUsers))
	errs := make([]error, len(qtpUsers))
	for i, a := range qtpUsers {
		p := strconv.Itoa(port + i)
		srv := exec.Command("ip", "netns", "exec", l.peer.name, "iperf3", "-s", "-1", "-B", a.String(), "-p", p)
		var out bytes.Buffer
		srv.Stdout, srv.Stderr = &out, &out
		if err := srv.Start(); err != nil {
			return 0, err
		}
		defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
		for j := 0; ; j++ {
			o, err := l.peer.run("ss", "-Hltn", "sport", "=", ":"+p)
			if err == nil && strings.Contains(o, ":"+p) {
				break
			}
			if j == 100 {
				return 0, fmt.Errorf("iperf3 server %s:%s not listening: %s", a, p, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i, a := range qtpUsers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := l.shaper.run("iperf3", "-J", "-c", a.String(), "-p", strconv.Itoa(port+i), "-B", tpShaperAddr,
				"-O", "1", "-t", strconv.Itoa(seconds))
			rates[i], errs[i] = netnslab.ParseIperf3(out)
			if errs[i] != nil && err != nil {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	total := 0.0
	for i := range rates {
		if errs[i] != nil {
			return 0, errs[i]
		}
		total += rates[i]
	}
	return total, nil
}

// queueThroughput is (g).
func queueThroughput(o options) error {
	one, err := newQueueTPLab(o, o.prefix+"-g1", 1)
	if err != nil {
		return err
	}
	defer one.close()
	mq, err := newQueueTPLab(o, o.prefix+"-gq", o.queues)
	if err != nil {
		return err
	}
	defer mq.close()
	var ones, mqs []float64
	port := 6201 + int(time.Now().UnixNano()%1000)
	for i := 0; i < o.queueTPRuns; i++ {
		order := []struct {
			l    *queueTPLab
			acc  *[]float64
			what string
		}{{one, &ones, "one tree"}, {mq, &mqs, fmt.Sprintf("%d queues", o.queues)}}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, x := range order {
			port += 2
			bps, err := x.l.iperf(o.tpSeconds, port)
			if err != nil {
				return fmt.Errorf("(g) %s: %w", x.what, err)
			}
			*x.acc = append(*x.acc, bps)
			fmt.Printf("(g) run %d  %-10s 2 users total %5.2f Gbit/s  [%s]\n", i+1, x.what, bps/1e9, situation(o.prefix))
		}
	}
	r := median(mqs) / median(ones)
	fmt.Printf("TARGET (g) 2 saturating users on different queues / in one tree: median %.2f / %.2f Gbit/s = %.2f (goal: > 1, shaping no longer one lock)\n",
		median(mqs)/1e9, median(ones)/1e9, r)
	return nil
}
