package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Per-queue trees under mq (one HTB tree per transmit queue, to shape on
// more than one core and hold more than 65,535 users), with -queues N:
//
//	(e) cold apply of USERS users on an N-queue veth (shaperd: Dump, Build,
//	    Diff, Apply) vs tc -batch building the single tree (flat u32),
//	    interleaved: goal <= 0.5;
//	(f) with -queue-big M: M users on one N-queue interface: cold apply,
//	    peak RSS, one user's rate change (kernel Apply p99, goal < 5 ms;
//	    Build+Diff+Apply p50), one user's address added and removed (kernel
//	    Apply p50/p99), re-apply of the unchanged tree (0 writes);
//	(g) with -queue-tp-runs R: two saturating users on different queues vs
//	    the same two users in one tree (total throughput ratio).
//
// shaperd's trees classify with -queue-classifier (default bpf: a cls_bpf
// classifier with its own maps per queue's HTB, as the daemon's default).

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

// openQueueKernel opens a Kernel in network namespace netns whose device
// dev classifies with kind (kernel.ClassifierBPF: one cls_bpf classifier
// per queue's HTB, pinned under /sys/fs/bpf/shaperd; kernel.ClassifierU32).
// done tears dev down (which removes the pins) and closes the Kernel.
func openQueueKernel(netns, dev, kind string) (k *kernel.Kernel, done func(), err error) {
	if k, err = kernel.Open(kernel.Options{NetNS: netns}); err != nil {
		return nil, nil, err
	}
	k.SetClassifier(dev, kind)
	return k, func() {
		if err := k.Teardown(dev, ""); err != nil {
			fmt.Fprintf(os.Stderr, "teardown %s in %s: %v\n", dev, netns, err)
		}
		_ = k.Close()
	}, nil
}

// queuePlan is plan with per-queue trees.
func queuePlan(dev string, users, queues int) model.Targets {
	tg := plan(dev, users)
	tg.Interface.Queues = queues
	return tg
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
	single, err := model.Build(plan(bigDev, o.users), nil)
	if err != nil {
		return err
	}
	flatFile, err := writeBatch(o.dir, o.prefix+"-qflat.batch", flatBatch(single))
	if err != nil {
		return err
	}
	defer os.Remove(flatFile)
	var mq, flat, ratios []float64
	for round := 1; round <= o.rounds; round++ {
		steps := []func() error{
			func() error {
				l, err := newQueueLab(fmt.Sprintf("%s-r%d-mq", o.prefix, round), o.queues, bigDev)
				if err != nil {
					return err
				}
				defer l.close()
				k, done, err := openQueueKernel(l.name, bigDev, o.queueClassifier)
				if err != nil {
					return err
				}
				defer done()
				ctx := situation(o.prefix)
				b, _, err := applyPlan(k, queuePlan(bigDev, o.users, o.queues), nil)
				if err != nil {
					return fmt.Errorf("(e) round %d: %w", round, err)
				}
				mq = append(mq, secs(b.total.wall))
				fmt.Printf("round %d  (e) shaperd %d queues (%s) %6.2f s  (%d writes; apply %.2f s, cpu user %.2f sys %.2f)  [%s]\n",
					round, o.queues, o.queueClassifier, secs(b.total.wall), b.writes, secs(b.apply.wall), secs(b.total.user), secs(b.total.sys), ctx)
				return nil
			},
			func() error {
				c, err := peerRound(o, round, "qflat", flatFile, single, false)
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
		o.users, o.queues, o.queueClassifier, median(mq), median(flat), ratio, verdict(ratio <= 0.5))
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

// queueBig is (f).
func queueBig(o options) error {
	l, err := newQueueLab(o.prefix+"-big", o.queues, bigDev)
	if err != nil {
		return err
	}
	defer l.close()
	k, done, err := openQueueKernel(l.name, bigDev, o.queueClassifier)
	if err != nil {
		return err
	}
	defer done()
	tg := queuePlan(bigDev, o.queueBig, o.queues)
	runtime.GC()
	_, base := peakRSS()
	start := time.Now()
	rc, err := newRateChanger(k, tg)
	if err != nil {
		return fmt.Errorf("(f) %d users: %w", o.queueBig, err)
	}
	cold := time.Since(start)
	peak, _ := peakRSS()
	runtime.GC()
	_, after := peakRSS()
	fmt.Printf("(f) %d users on %d queues (%s): cold apply %.2f s; RSS before %.0f MiB, peak %.0f MiB, after GC %.0f MiB  [%s]\n",
		o.queueBig, o.queues, o.queueClassifier, cold.Seconds(), base, peak, after, situation(o.prefix))
	var applies, fulls []float64
	for i := 0; i < 400; i++ {
		d, err := rc.applyOnly(i%2 == 0)
		if err != nil {
			return fmt.Errorf("(f) rate change: %w", err)
		}
		applies = append(applies, ms(secs(d)))
	}
	for i := 0; i < 10; i++ {
		c, err := rc.step()
		if err != nil {
			return fmt.Errorf("(f) Build+Diff+Apply: %w", err)
		}
		fulls = append(fulls, ms(secs(c.full)))
	}
	p99 := quantile(applies, 0.99)
	fmt.Printf("(f) one user's rate change: kernel Apply p50 %.3f ms p99 %.3f ms (400); Build+Diff+Apply p50 %.0f ms (10)\n",
		median(applies), p99, median(fulls))
	addr, err := addressChanges(k, rc.tg, rc.ids, rc.actual, rc.user, 400, o.queueClassifier == kernel.ClassifierBPF)
	if err != nil {
		return fmt.Errorf("(f) address change: %w", err)
	}
	fmt.Printf("(f) one user's address added/removed (%s: %s): kernel Apply p50 %.3f ms p99 %.3f ms (400)\n",
		o.queueClassifier, map[bool]string{true: "map updates", false: "u32 filter writes"}[o.queueClassifier == kernel.ClassifierBPF],
		median(addr), quantile(addr, 0.99))
	tg.Users[rc.user].Rate = rc.tg.Users[rc.user].Rate // the tree as the kernel holds it now
	u, err := reapplyWith(k, tg, rc.ids)
	if err != nil {
		return fmt.Errorf("(f) re-apply: %w", err)
	}
	fmt.Printf("TARGET (f) %d users, %d queues: cold %.2f s, peak RSS %.0f MiB; change p99 %.3f ms < 5 ms: %s; unchanged re-apply %d writes (%d changes, Dump+Diff+Apply %.2f s): %s\n",
		o.queueBig, o.queues, cold.Seconds(), peak, p99, verdict(p99 < 5), u.writes, u.changes, u.total().Seconds(), verdict(u.writes == 0))
	return nil
}

// Addresses of (g): two users behind the peer.
var qtpUsers = []netip.Addr{netip.MustParseAddr("198.18.0.10"), netip.MustParseAddr("198.18.0.11")}

// queueTPLab is a shaper namespace whose N-queue veth carries two users'
// traffic to a peer namespace, shaped with queues trees (1: one tree).
type queueTPLab struct {
	shaper, peer *lab
	k            *kernel.Kernel
	done         func()
}

func newQueueTPLab(name string, queues, trees int, kind string) (*queueTPLab, error) {
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
	n := strconv.Itoa(queues)
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
	if l.k, l.done, err = openQueueKernel(s.name, bigDev, kind); err != nil {
		return fail(err)
	}
	// 40 gbit per queue: the even split leaves every queue (and the one
	// tree) more than veth can carry, so neither side is capped by its
	// share and the difference is the qdisc lock alone.
	tg := model.Targets{Interface: model.InterfaceSpec{Name: bigDev, Bandwidth: tbf.Rate(queues) * 40 * tbf.Gbit, Queues: trees}}
	for i, a := range qtpUsers {
		tg.Users = append(tg.Users, model.UserTarget{Name: fmt.Sprintf("t%d", i), Rate: 10 * tbf.Gbit, Ceil: tg.Interface.Bandwidth,
			Prefixes: []netip.Prefix{netip.PrefixFrom(a, 32)}})
	}
	ids := model.NewAssignment()
	if _, _, err := applyPlan(l.k, tg, ids); err != nil {
		return fail(err)
	}
	if trees > 1 {
		q0, _ := ids.Queue("t0")
		q1, _ := ids.Queue("t1")
		if q0 == q1 {
			return fail(fmt.Errorf("both users on queue %d", q0))
		}
	}
	return l, nil
}

func (l *queueTPLab) close() {
	if l.done != nil {
		l.done()
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
	one, err := newQueueTPLab(o.prefix+"-g1", o.queues, 1, o.queueClassifier)
	if err != nil {
		return err
	}
	defer one.close()
	mq, err := newQueueTPLab(o.prefix+"-gq", o.queues, o.queues, o.queueClassifier)
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

// addressChanges gives user i of tg (applied as tree) an extra /32 and
// takes it away again, n times in all, and returns each kernel Apply's
// time in ms. Each must write (u32 filter nodes), with mapUpdate exactly
// once (the bpf classifier's map update; the steering map update is not
// counted).
func addressChanges(k *kernel.Kernel, tg model.Targets, ids *model.Assignment, tree model.Tree, i, n int, mapUpdate bool) ([]float64, error) {
	tg.Users = append([]model.UserTarget(nil), tg.Users...)
	u := tg.Users[i]
	u.Prefixes = append(append([]netip.Prefix(nil), u.Prefixes...), netip.MustParsePrefix("198.19.255.254/32"))
	tg.Users[i] = u
	more, err := model.Build(tg, ids)
	if err != nil {
		return nil, err
	}
	add, del := model.Diff(tree, more), model.Diff(more, tree)
	if len(add) != 1 || add[0].Filter == nil || len(del) != 1 || del[0].Filter == nil {
		return nil, fmt.Errorf("an extra address of user %d gave %d and %d changes, want one filter each", i, len(add), len(del))
	}
	out := make([]float64, 0, n)
	for j := range n {
		cs := add
		if j%2 == 1 {
			cs = del
		}
		start := time.Now()
		res, err := k.Apply(cs)
		out = append(out, ms(secs(time.Since(start))))
		if err == nil && (res.Writes == 0 || mapUpdate && res.Writes != 1) {
			err = fmt.Errorf("an address change took %d writes, want 1", res.Writes)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
