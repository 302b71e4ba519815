package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// options are benchapply's flags.
type options struct {
	users, small, rounds, changes int
	hashed                        bool
	prefix, dir                   string
	// classifier is the daemon's classifier key in every plan ("": its
	// default).
	classifier string
	// throughput (d): iperf3 runs per lab and seconds per run; 0 runs skips it.
	tpRuns, tpSeconds int
	// per-queue trees (e)-(g), see queues.go.
	queues, queueBig, queueTPRuns int
	queuesOnly                    bool
	// the network hierarchy (h), see hierarchy.go: run only it, its
	// shape, and the changes of each kind.
	hierarchy   bool
	hier        Hierarchy
	hierChanges int
}

// Devices in every lab namespace: the big tree's and the small tree's.
const (
	bigDev   = "sd0"
	smallDev = "sm0"
)

// results collects the measurements of all rounds.
type results struct {
	shaperd, flat, hashed []float64 // (a) wall seconds per round
	ratios                []float64 // (a) shaperd / tc flat of each round
	start, once, kernel   []float64 // (a) the daemon's parts
	userCPU, sysCPU       []float64
	flatSys               []float64
	writes, changes       int
	// (b) seconds per Daemon.SetRate, end to end and its kernel Apply.
	bigCall, smallCall     []float64
	bigKernel, smallKernel []float64
	unchanged              []reapplied // (c)
}

// reapplied is one re-apply of an unchanged tree (c).
type reapplied struct {
	wall time.Duration
	rec  recorded
}

// situation returns the load average and the number of other namespaces.
func situation(prefix string) string {
	load, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(load))
	others := 0
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			others++
		}
	}
	if len(f) >= 3 {
		return fmt.Sprintf("load %s %s %s, other netns %d", f[0], f[1], f[2], others)
	}
	return fmt.Sprintf("other netns %d", others)
}

// peerFiles writes the tc -batch files of tree: the flat u32 list and,
// with hashed, shaperd's hashed u32 layout ("" without). remove deletes
// them.
func peerFiles(o options, what string, tree model.Tree, hashed bool) (flat, hashedFile string, remove func(), err error) {
	body, err := flatBatch(tree)
	if err != nil {
		return "", "", nil, err
	}
	if flat, err = writeBatch(o.dir, o.prefix+"-"+what+"-flat.batch", body); err != nil {
		return "", "", nil, err
	}
	remove = func() { os.Remove(flat) }
	if hashed {
		if body, err = hashedBatch(tree); err != nil {
			remove()
			return "", "", nil, err
		}
		if hashedFile, err = writeBatch(o.dir, o.prefix+"-"+what+"-hashed.batch", body); err != nil {
			remove()
			return "", "", nil, err
		}
		remove = func() { os.Remove(flat); os.Remove(hashedFile) }
	}
	return flat, hashedFile, remove, nil
}

func run(o options) error {
	if o.hierarchy {
		return runHierarchy(o)
	}
	if o.queuesOnly {
		return runQueues(o)
	}
	big, err := planTree(o, flatPlan(bigDev, o.users, 0, o.classifier))
	if err != nil {
		return fmt.Errorf("the daemon's plan: %w", err)
	}
	flatFile, hashedFile, remove, err := peerFiles(o, "a", big, o.hashed)
	if err != nil {
		return err
	}
	defer remove()
	fmt.Printf("plan: %d users (%d classes, %d /32 dst filters), 1mbit/10mbit each, 10gbit interface; small tree %d users; classifier %s\n",
		o.users, len(big.Classes), len(big.Filters), o.small, classifierName(o.classifier))
	fmt.Printf("shaperd is the daemon (internal/daemon via daemonlab): Start + Once, Once again, Daemon.SetRate; tc peers build the tree the daemon plans (Daemon.DiffPlan)\n")
	var r results
	perRound := (o.changes + o.rounds - 1) / o.rounds
	steps := []func(round int) error{
		func(round int) error { return shaperdRound(o, round, perRound, &r) },
		func(round int) error {
			c, err := peerRound(o, round, "a", "flat", flatFile, big, false)
			r.flat = append(r.flat, secs(c.wall))
			r.flatSys = append(r.flatSys, secs(c.sys))
			return err
		},
	}
	if o.hashed {
		steps = append(steps, func(round int) error {
			c, err := peerRound(o, round, "a", "hashed", hashedFile, big, true)
			r.hashed = append(r.hashed, secs(c.wall))
			return err
		})
	}
	for round := 1; round <= o.rounds; round++ {
		// Rotate who goes first, so that no side always follows the
		// teardown of the same predecessor.
		for i := range steps {
			if err := steps[(round-1+i)%len(steps)](round); err != nil {
				return err
			}
		}
		r.ratios = append(r.ratios, r.shaperd[len(r.shaperd)-1]/r.flat[len(r.flat)-1])
	}
	report(o, &r)
	if o.tpRuns > 0 {
		tp, err := measureThroughput(o)
		if err != nil {
			return err
		}
		one, many := median(tp.one), median(tp.many)
		fmt.Printf("TARGET (d) throughput to the user whose filter is the last of %d / 1 user: median %.2f / %.2f Gbit/s = %.3f >= 0.95: %s\n",
			o.users, many/1e9, one/1e9, many/one, verdict(many/one >= 0.95))
	}
	return runQueues(o)
}

// setRate is the request shaperctl set-rate USER RATE --ceil 10mbit
// --ramp 0s sends: user's guaranteed rate to 2 mbit (up) or back to the
// plan's 1 mbit.
func setRate(user string, up bool) control.SetRateRequest {
	r, c := tbf.Mbit, 10*tbf.Mbit
	if up {
		r = 2 * tbf.Mbit
	}
	return control.SetRateRequest{Target: user, Rate: r, Ceil: &c, Ramp: control.DurationPtr(0)}
}

// rateChanges times n of the daemon's one-user rate changes (setRate,
// alternately up and back) on each of daemons, interleaved, and appends
// each call's time and its kernel Apply to calls and kernels. Each must
// write one class.
func rateChanges(n int, daemons []*shaperd, calls, kernels []*[]float64) error {
	for i := range n + n%2 {
		for j, s := range daemons {
			req := setRate(userName(s.plan.users/2), i%2 == 0)
			d, rec, err := s.call(func(ctx context.Context) error { _, err := s.Daemon.SetRate(ctx, req); return err })
			if err != nil {
				return fmt.Errorf("set-rate %s %v: %w", req.Target, req.Rate, err)
			}
			if rec.writes != 1 {
				return fmt.Errorf("set-rate %s %v wrote %d objects in %d Applies, want 1", req.Target, req.Rate, rec.writes, rec.applies)
			}
			*calls[j] = append(*calls[j], secs(d))
			*kernels[j] = append(*kernels[j], secs(rec.kernel))
		}
	}
	return nil
}

// shaperdRound has the daemon apply the big tree (a) and re-apply it (c),
// then measures one user's rate change in it and in a small tree (b), in
// one namespace.
func shaperdRound(o options, round, changes int, r *results) error {
	l, err := newLab(fmt.Sprintf("%s-r%d-shaperd", o.prefix, round), bigDev, smallDev)
	if err != nil {
		return err
	}
	defer l.close()
	ctx := situation(o.prefix)
	big, c, err := startShaperd(o, l.name, "big", flatPlan(bigDev, o.users, 0, o.classifier))
	if err != nil {
		return fmt.Errorf("round %d: %w", round, err)
	}
	defer big.close()
	r.shaperd = append(r.shaperd, secs(c.total.wall))
	r.start = append(r.start, secs(c.start.wall))
	r.once = append(r.once, secs(c.once.wall))
	r.kernel = append(r.kernel, secs(c.rec.kernel))
	r.userCPU = append(r.userCPU, secs(c.total.user))
	r.sysCPU = append(r.sysCPU, secs(c.total.sys))
	r.writes, r.changes = c.rec.writes, c.rec.changes
	fmt.Printf("round %d  (a) shaperd    %6.2f s  (start %.3f, Once %.2f: kernel Apply %.2f s in %d calls; %d changes, %d writes; cpu user %.2f sys %.2f)  [%s]\n",
		round, secs(c.total.wall), secs(c.start.wall), secs(c.once.wall), secs(c.rec.kernel), c.rec.applies,
		c.rec.changes, c.rec.writes, secs(c.total.user), secs(c.total.sys), ctx)

	d, rec, err := big.reapply()
	if err != nil {
		return fmt.Errorf("round %d: re-apply: %w", round, err)
	}
	r.unchanged = append(r.unchanged, reapplied{d, rec})
	fmt.Printf("round %d  (c) unchanged  %6.3f s  (Once again: %d changes, %d writes)\n", round, secs(d), rec.changes, rec.writes)

	small, _, err := startShaperd(o, l.name, "small", flatPlan(smallDev, o.small, 0, o.classifier))
	if err != nil {
		return fmt.Errorf("round %d: small tree: %w", round, err)
	}
	defer small.close()
	big.Run()
	small.Run()
	if err := rateChanges(changes, []*shaperd{big, small}, []*[]float64{&r.bigCall, &r.smallCall},
		[]*[]float64{&r.bigKernel, &r.smallKernel}); err != nil {
		return fmt.Errorf("round %d: %w", round, err)
	}
	fmt.Printf("round %d  (b) %d rate changes per tree (Daemon.SetRate, ramp 0), interleaved\n", round, changes+changes%2)
	return nil
}

// peerRound times tc -batch building the same tree in a fresh namespace
// and checks what it built; mode labels its line ("a", "e", "h").
func peerRound(o options, round int, mode, what, file string, desired model.Tree, hashed bool) (cost, error) {
	l, err := newLab(fmt.Sprintf("%s-r%d-%s", o.prefix, round, what), desired.Device)
	if err != nil {
		return cost{}, err
	}
	defer l.close()
	ctx := situation(o.prefix)
	c, err := tcBatch(l, file)
	if err != nil {
		return c, err
	}
	if err := checkPeer(l, desired, hashed); err != nil {
		return c, fmt.Errorf("round %d: tc %s: %w", round, what, err)
	}
	fmt.Printf("round %d  (%s) tc %-7s %6.2f s  (cpu user %.2f sys %.2f)  [%s]\n",
		round, mode, what, secs(c.wall), secs(c.user), secs(c.sys), ctx)
	return c, nil
}

func ms(s float64) float64 { return s * 1000 }

// report prints medians, ratios and the targets.
func report(o options, r *results) {
	fmt.Printf("\n== summary (%d rounds, medians) ==\n", o.rounds)
	sh, fl := median(r.shaperd), median(r.flat)
	ratio := sh / fl
	fmt.Printf("(a) shaperd %d users: %.2f s (start %.3f s, Once %.2f s, of it kernel Apply %.2f s; cpu user %.2f sys %.2f; %d changes, %d writes)\n",
		o.users, sh, median(r.start), median(r.once), median(r.kernel), median(r.userCPU), median(r.sysCPU), r.changes, r.writes)
	fmt.Printf("    tc -batch flat u32 list: %.2f s (sys %.2f)", fl, median(r.flatSys))
	if o.hashed {
		fmt.Printf("; tc -batch shaperd's hashed layout: %.2f s (shaperd / tc hashed = %.2f)", median(r.hashed), sh/median(r.hashed))
	}
	fmt.Println()
	fmt.Printf("    ratio shaperd / tc flat = %.2f (median of per-round ratios %.2f)\n", ratio, median(r.ratios))
	goal := "goal 0.5 not reached"
	if ratio <= 0.5 {
		goal = "goal 0.5 reached"
	}
	fmt.Printf("TARGET (a) build ratio %.2f <= 1.0: %s (%s)\n", ratio, verdict(ratio <= 1.0), goal)

	bk, sk := ms(median(r.bigKernel)), ms(median(r.smallKernel))
	fmt.Printf("(b) one user's rate change, Daemon.SetRate end to end: %d users p50 %.3f ms p99 %.3f ms; %d users p50 %.3f ms p99 %.3f ms (ratio %.2f; %d each)\n",
		o.users, ms(median(r.bigCall)), ms(quantile(r.bigCall, 0.99)), o.small, ms(median(r.smallCall)), ms(quantile(r.smallCall, 0.99)),
		median(r.bigCall)/median(r.smallCall), len(r.bigCall))
	fmt.Printf("    its kernel Apply (one class write): %d users p50 %.3f ms p90 %.3f ms p99 %.3f ms; %d users p50 %.3f ms p90 %.3f ms\n",
		o.users, bk, ms(quantile(r.bigKernel, 0.9)), ms(quantile(r.bigKernel, 0.99)), o.small, sk, ms(quantile(r.smallKernel, 0.9)))
	fmt.Printf("TARGET (b) kernel Apply latency %.3f ms <= 1 ms: %s; ratio %d/%d users %.2f <= 1.2: %s (targets apply to the kernel write inside SetRate)\n",
		bk, verdict(bk <= 1), o.users, o.small, bk/sk, verdict(bk/sk <= 1.2))

	var tot []float64
	writes, changes := 0, 0
	for _, u := range r.unchanged {
		tot = append(tot, secs(u.wall))
		writes += u.rec.writes
		changes += u.rec.changes
	}
	fmt.Printf("TARGET (c) unchanged %d-user tree: Once median %.3f s < 1 s, %d writes (%d changes) in %d rounds: %s\n",
		o.users, median(tot), writes, changes, len(tot), verdict(median(tot) < 1 && writes == 0 && changes == 0))
}
