package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// options are benchapply's flags.
type options struct {
	users, small, rounds, changes, reconciles int
	kernelChanges                             int
	hashed                                    bool
	prefix, dir                               string
	// throughput (d): iperf3 runs per lab and seconds per run; 0 runs skips it.
	tpRuns, tpSeconds int
	// per-queue trees (e)-(g), see queues.go.
	queues, queueBig, queueTPRuns int
	queuesOnly                    bool
	// queueClassifier is the classifier of (e)-(g)'s trees.
	queueClassifier string
}

// Devices in every lab namespace: the big tree's and the small tree's.
const (
	bigDev   = "sd0"
	smallDev = "sm0"
)

// results collects the measurements of all rounds.
type results struct {
	shaperd, flat, hashed  []float64 // (a) wall seconds per round
	ratios                 []float64 // (a) shaperd / tc flat of each round
	applyOnly, userCPU     []float64
	sysCPU, flatSys        []float64
	writes                 int
	bigApply, smallApply   []float64 // (b) seconds per Apply of a precomputed change
	bigFull, smallFull     []float64 // (b) seconds per Build+Diff+Apply
	bigInFull, smallInFull []float64 // (b) the Apply part of those
	bigRec, smallRec       []float64
	unchanged              []unchanged // (c)
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

func run(o options) error {
	if o.queuesOnly {
		return runQueues(o)
	}
	big, err := model.Build(plan(bigDev, o.users), nil)
	if err != nil {
		return err
	}
	flatFile, err := writeBatch(o.dir, o.prefix+"-flat.batch", flatBatch(big))
	if err != nil {
		return err
	}
	defer os.Remove(flatFile)
	hashedFile := ""
	if o.hashed {
		body := hashedBatch(big)
		if body == "" {
			return fmt.Errorf("the plan has filters the hashed tc peer does not cover")
		}
		if hashedFile, err = writeBatch(o.dir, o.prefix+"-hashed.batch", body); err != nil {
			return err
		}
		defer os.Remove(hashedFile)
	}
	fmt.Printf("plan: %d users (%d classes, %d /32 dst filters), 1mbit/10mbit each; small tree %d users\n",
		o.users, len(big.Classes), len(big.Filters), o.small)
	var r results
	perRound := (o.changes + o.rounds - 1) / o.rounds
	kernelPerRound := (o.kernelChanges + o.rounds - 1) / o.rounds
	steps := []func(round int) error{
		func(round int) error { return shaperdRound(o, round, kernelPerRound, perRound, &r) },
		func(round int) error {
			c, err := peerRound(o, round, "flat", flatFile, big, false)
			r.flat = append(r.flat, secs(c.wall))
			r.flatSys = append(r.flatSys, secs(c.sys))
			return err
		},
	}
	if o.hashed {
		steps = append(steps, func(round int) error {
			c, err := peerRound(o, round, "hashed", hashedFile, big, true)
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

// shaperdRound builds the big tree with shaperd, then measures (c) and (b)
// on it, in one namespace.
func shaperdRound(o options, round, kernelChanges, changes int, r *results) error {
	l, err := newLab(fmt.Sprintf("%s-r%d-shaperd", o.prefix, round), bigDev, smallDev)
	if err != nil {
		return err
	}
	defer l.close()
	k, err := kernel.Open(kernel.Options{NetNS: l.name})
	if err != nil {
		return err
	}
	defer k.Close()
	ctx := situation(o.prefix)
	b, _, err := applyPlan(k, plan(bigDev, o.users), nil)
	if err != nil {
		return fmt.Errorf("round %d: shaperd apply: %w", round, err)
	}
	r.shaperd = append(r.shaperd, secs(b.total.wall))
	r.applyOnly = append(r.applyOnly, secs(b.apply.wall))
	r.userCPU = append(r.userCPU, secs(b.total.user))
	r.sysCPU = append(r.sysCPU, secs(b.total.sys))
	r.writes = b.writes
	fmt.Printf("round %d  (a) shaperd    %6.2f s  (dump %.3f, build %.3f, diff %.3f, apply %.2f s; %d changes, %d writes; cpu user %.2f sys %.2f)  [%s]\n",
		round, secs(b.total.wall), secs(b.dump.wall), secs(b.build.wall), secs(b.diff.wall), secs(b.apply.wall),
		b.changes, b.writes, secs(b.total.user), secs(b.total.sys), ctx)

	u, err := reapply(k, plan(bigDev, o.users))
	if err != nil {
		return fmt.Errorf("round %d: re-apply: %w", round, err)
	}
	r.unchanged = append(r.unchanged, u)
	fmt.Printf("round %d  (c) unchanged  %6.3f s  (dump %.3f, diff %.3f, apply %.3f; %d changes, %d writes; build %.3f s not counted)\n",
		round, secs(u.total()), secs(u.dump), secs(u.diff), secs(u.apply), u.changes, u.writes, secs(u.build))

	bigRC, err := newRateChanger(k, plan(bigDev, o.users))
	if err != nil {
		return fmt.Errorf("round %d: big tree: %w", round, err)
	}
	smallRC, err := newRateChanger(k, plan(smallDev, o.small))
	if err != nil {
		return fmt.Errorf("round %d: small tree: %w", round, err)
	}
	trees := []struct {
		rc                  *rateChanger
		apply, full, inFull *[]float64
	}{{bigRC, &r.bigApply, &r.bigFull, &r.bigInFull}, {smallRC, &r.smallApply, &r.smallFull, &r.smallInFull}}
	// The kernel write path: precomputed changes, even count (the trees end
	// at their built rates), interleaved big, small, big, ...
	for i := 0; i < kernelChanges+kernelChanges%2; i++ {
		for _, x := range trees {
			d, err := x.rc.applyOnly(i%2 == 0)
			if err != nil {
				return fmt.Errorf("round %d: rate change: %w", round, err)
			}
			*x.apply = append(*x.apply, secs(d))
		}
	}
	// The daemon's work per change: Build + Diff + Apply.
	for i := 0; i < changes; i++ {
		for _, x := range trees {
			c, err := x.rc.step()
			if err != nil {
				return fmt.Errorf("round %d: rate change: %w", round, err)
			}
			if c.writes != 1 {
				return fmt.Errorf("round %d: a rate change took %d writes, want 1", round, c.writes)
			}
			*x.full = append(*x.full, secs(c.full))
			*x.inFull = append(*x.inFull, secs(c.apply))
		}
	}
	for i := 0; i < o.reconciles; i++ {
		d, err := bigRC.reconcile()
		if err != nil {
			return fmt.Errorf("round %d: reconcile: %w", round, err)
		}
		r.bigRec = append(r.bigRec, secs(d))
		if d, err = smallRC.reconcile(); err != nil {
			return fmt.Errorf("round %d: reconcile: %w", round, err)
		}
		r.smallRec = append(r.smallRec, secs(d))
	}
	fmt.Printf("round %d  (b) %d kernel Applies + %d Build+Diff+Apply per tree, interleaved; %d full reconciles per tree\n", round, kernelChanges+kernelChanges%2, changes, o.reconciles)
	return nil
}

// peerRound times tc -batch building the same tree in a fresh namespace
// and checks what it built.
func peerRound(o options, round int, what, file string, desired model.Tree, hashed bool) (cost, error) {
	l, err := newLab(fmt.Sprintf("%s-r%d-%s", o.prefix, round, what), bigDev)
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
	fmt.Printf("round %d  (a) tc %-7s %6.2f s  (cpu user %.2f sys %.2f)  [%s]\n",
		round, what, secs(c.wall), secs(c.user), secs(c.sys), ctx)
	return c, nil
}

func ms(s float64) float64 { return s * 1000 }

// report prints medians, ratios and the targets.
func report(o options, r *results) {
	fmt.Printf("\n== summary (%d rounds, medians) ==\n", o.rounds)
	sh, fl := median(r.shaperd), median(r.flat)
	ratio := sh / fl
	fmt.Printf("(a) shaperd %d users: %.2f s (apply alone %.2f s; cpu user %.2f sys %.2f; %d writes)\n",
		o.users, sh, median(r.applyOnly), median(r.userCPU), median(r.sysCPU), r.writes)
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

	bm, bp := ms(median(r.bigApply)), ms(quantile(r.bigApply, 0.9))
	sm, sp := ms(median(r.smallApply)), ms(quantile(r.smallApply, 0.9))
	fmt.Printf("(b) one rate change, kernel Apply: %d users median %.3f ms p90 %.3f ms; %d users median %.3f ms p90 %.3f ms (%d each)\n",
		o.users, bm, bp, o.small, sm, sp, len(r.bigApply))
	fmt.Printf("    Build+Diff+Apply: %d users median %.2f ms p90 %.2f ms; %d users median %.3f ms p90 %.3f ms (ratio %.1f)\n",
		o.users, ms(median(r.bigFull)), ms(quantile(r.bigFull, 0.9)), o.small, ms(median(r.smallFull)), ms(quantile(r.smallFull, 0.9)),
		median(r.bigFull)/median(r.smallFull))
	fmt.Printf("    (the Apply inside Build+Diff+Apply: %d users median %.3f ms p90 %.3f ms; %d users median %.3f ms)\n",
		o.users, ms(median(r.bigInFull)), ms(quantile(r.bigInFull, 0.9)), o.small, ms(median(r.smallInFull)))
	fmt.Printf("    daemon reconcile (Build+Dump+Diff+Apply+Verify): %d users median %.1f ms; %d users %.2f ms (%d each)\n",
		o.users, ms(median(r.bigRec)), o.small, ms(median(r.smallRec)), len(r.bigRec))
	fmt.Printf("TARGET (b) kernel Apply latency %.3f ms <= 1 ms: %s; ratio %d/%d users %.2f <= 1.2: %s (targets apply to the kernel write path)\n",
		bm, verdict(bm <= 1), o.users, o.small, bm/sm, verdict(bm/sm <= 1.2))

	var tot []float64
	writes, changes := 0, 0
	for _, u := range r.unchanged {
		tot = append(tot, secs(u.total()))
		writes += u.writes
		changes += u.changes
	}
	fmt.Printf("TARGET (c) unchanged %d-user tree: Dump+Diff+Apply median %.3f s < 1 s, %d writes (%d changes) in %d rounds: %s\n",
		o.users, median(tot), writes, changes, len(tot), verdict(median(tot) < 1 && writes == 0 && changes == 0))
}
