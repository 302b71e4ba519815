package main

import (
	"context"
	"fmt"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// The network hierarchy (h), with -hierarchy: users behind access points
// in buildings at sites ([nodes.NAME] with parents; by default 10,000
// users, 500 APs, 50 buildings, 5 sites; hierarchyPlan), downloads on one
// interface, each round in its own namespaces, interleaved with the peer:
//
//   - cold apply by the daemon (Start + Once) vs tc -batch building the
//     same tree (the node and user classes the daemon plans, parents
//     first, then a flat u32 list): ratio;
//   - re-apply of the unchanged tree (Once again): 0 writes;
//   - one run-time user moved to another AP (Daemon.ChangeUser move, as
//     `shaperctl user move NAME NODE`): p50/p99, and its kernel Apply;
//   - one AP's capacity change (Daemon.SetRate node:ap-17, its ceil 80
//     mbit and back to 100 mbit, ramp 0, as `shaperctl set-rate
//     node:ap-17 ...`): p50/p99, and its kernel Apply;
//   - a run-time node added under ap-17 and removed again
//     (Daemon.ChangeNode, as `shaperctl node add|remove`): p50/p99 each;
//   - the simulator on the whole plan (Daemon.Simulate, as `shaperctl
//     simulate`): the empty request (each user's measured rate, none in
//     the lab) and every user backlogged (--demand '*=max').

// hierResults collects (h)'s measurements of all rounds.
type hierResults struct {
	shaperd, flat, ratios []float64 // cold apply, wall seconds
	start, once, kernel   []float64
	flatSys               []float64
	writes, changes       int
	unchanged             []reapplied
	// seconds per call, end to end and its kernel Apply; writes per call.
	moveCall, moveKernel []float64
	moveWrites           []int
	nodeCall, nodeKernel []float64
	nodeWrites           []int
	// a run-time node added, then removed (Daemon.ChangeNode)
	nodeAddCall, nodeRemoveCall []float64
	nodeAddWrites               []int
	simMeasured, simMax         []float64
}

// Addresses of the run-time user the moves take.
const moverAddr = "198.19.255.250"

func runHierarchy(o options) error {
	h := o.hier
	if err := h.check(); err != nil {
		return err
	}
	p := hierarchyPlan(bigDev, h, o.classifier)
	tree, err := planTree(o, p)
	if err != nil {
		return fmt.Errorf("(h) the daemon's plan: %w", err)
	}
	flatFile, _, remove, err := peerFiles(o, "h", tree, false)
	if err != nil {
		return fmt.Errorf("(h) %w", err)
	}
	defer remove()
	nodes := 0
	for _, c := range tree.Classes {
		if c.Labels.Kind == "node" {
			nodes++
		}
	}
	_, _, ap, ur := h.rates()
	fmt.Printf("plan (h): %d users behind %d APs in %d buildings at %d sites (%d node classes, %d classes, %d /32 dst filters); 10gbit egress; "+
		"ceils 2gbit/400mbit/100mbit, rates shared evenly (AP %dkbit, user %dkbit, ceils 2/5/10mbit); classifier %s\n",
		h.Users, h.APs, h.Buildings, h.Sites, nodes, len(tree.Classes), len(tree.Filters), ap, ur, classifierName(o.classifier))
	var r hierResults
	perRound := (o.hierChanges + o.rounds - 1) / o.rounds
	steps := []func(round int) error{
		func(round int) error { return hierRound(o, p, round, perRound, &r) },
		func(round int) error {
			c, err := peerRound(o, round, "h", "flat", flatFile, tree, false)
			r.flat = append(r.flat, secs(c.wall))
			r.flatSys = append(r.flatSys, secs(c.sys))
			return err
		},
	}
	for round := 1; round <= o.rounds; round++ {
		for i := range steps {
			if err := steps[(round-1+i)%len(steps)](round); err != nil {
				return err
			}
		}
		r.ratios = append(r.ratios, r.shaperd[len(r.shaperd)-1]/r.flat[len(r.flat)-1])
	}
	hierReport(o, &r)
	return nil
}

// moveTarget is the AP the i-th move takes the user to from AP cur: they
// go round the APs in steps of 37 (another building most times).
func (h Hierarchy) moveTarget(cur, i int) int {
	next := (cur + 37 + i) % h.APs
	if next == cur {
		next = (next + 1) % h.APs
	}
	return next
}

// nodeTarget is the AP whose capacity (h) changes: ap-17, or the last one
// of fewer.
func (h Hierarchy) nodeTarget() string { return apName(min(17, h.APs-1)) }

// hierRound has the daemon apply the hierarchy and re-apply it, then runs
// its loop and measures n moves, n node changes and two simulations.
func hierRound(o options, p daemonPlan, round, n int, r *hierResults) error {
	h := o.hier
	l, err := newLab(fmt.Sprintf("%s-r%d-h", o.prefix, round), bigDev)
	if err != nil {
		return err
	}
	defer l.close()
	ctx := situation(o.prefix)
	s, c, err := startShaperd(o, l.name, "h", p)
	if err != nil {
		return fmt.Errorf("(h) round %d: %w", round, err)
	}
	defer s.close()
	r.shaperd = append(r.shaperd, secs(c.total.wall))
	r.start = append(r.start, secs(c.start.wall))
	r.once = append(r.once, secs(c.once.wall))
	r.kernel = append(r.kernel, secs(c.rec.kernel))
	r.writes, r.changes = c.rec.writes, c.rec.changes
	fmt.Printf("round %d  (h) shaperd    %6.2f s  (start %.3f, Once %.2f: kernel Apply %.2f s in %d calls; %d changes, %d writes; cpu user %.2f sys %.2f)  [%s]\n",
		round, secs(c.total.wall), secs(c.start.wall), secs(c.once.wall), secs(c.rec.kernel), c.rec.applies,
		c.rec.changes, c.rec.writes, secs(c.total.user), secs(c.total.sys), ctx)
	d, rec, err := s.reapply()
	if err != nil {
		return fmt.Errorf("(h) round %d: re-apply: %w", round, err)
	}
	r.unchanged = append(r.unchanged, reapplied{d, rec})
	fmt.Printf("round %d  (h) unchanged  %6.3f s  (Once again: %d changes, %d writes)\n", round, secs(d), rec.changes, rec.writes)

	s.Run()
	cur := 0
	add := control.UserRequest{Op: control.UserAdd, Name: "mover", Tier: "m", Node: apName(cur), Addresses: []string{moverAddr}}
	addTime, addRec, err := s.call(func(ctx context.Context) error { _, err := s.Daemon.ChangeUser(ctx, add); return err })
	if err != nil {
		return fmt.Errorf("(h) round %d: user add mover: %w", round, err)
	}
	for i := range n {
		next := h.moveTarget(cur, i)
		req := control.UserRequest{Op: control.UserMove, Name: "mover", Node: apName(next)}
		d, rec, err := s.call(func(ctx context.Context) error { _, err := s.Daemon.ChangeUser(ctx, req); return err })
		if err == nil && rec.writes == 0 {
			err = fmt.Errorf("no kernel write")
		}
		if err != nil {
			return fmt.Errorf("(h) round %d: user move mover %s: %w", round, req.Node, err)
		}
		cur = next
		r.moveCall = append(r.moveCall, secs(d))
		r.moveKernel = append(r.moveKernel, secs(rec.kernel))
		r.moveWrites = append(r.moveWrites, rec.writes)
	}
	_, _, apRate, _ := h.rates()
	node := h.nodeTarget()
	for i := range n + n%2 {
		ceil := tbf.Rate(apCeil) * tbf.Kbit
		if i%2 == 0 {
			ceil = 80 * tbf.Mbit
		}
		req := control.SetRateRequest{Target: "node:" + node, Rate: tbf.Rate(apRate) * tbf.Kbit, Ceil: &ceil, Ramp: control.DurationPtr(0)}
		d, rec, err := s.call(func(ctx context.Context) error { _, err := s.Daemon.SetRate(ctx, req); return err })
		if err == nil && rec.writes == 0 {
			err = fmt.Errorf("no kernel write")
		}
		if err != nil {
			return fmt.Errorf("(h) round %d: set-rate %s ceil %v: %w", round, req.Target, ceil, err)
		}
		r.nodeCall = append(r.nodeCall, secs(d))
		r.nodeKernel = append(r.nodeKernel, secs(rec.kernel))
		r.nodeWrites = append(r.nodeWrites, rec.writes)
	}
	one := tbf.Mbit
	for range n {
		for _, req := range []control.NodeRequest{
			{Op: control.NodeAdd, Name: "bench-node", Parent: node, Rate: &one},
			{Op: control.NodeRemove, Name: "bench-node"},
		} {
			d, rec, err := s.call(func(ctx context.Context) error { _, err := s.Daemon.ChangeNode(ctx, req); return err })
			if err == nil && rec.writes == 0 {
				err = fmt.Errorf("no kernel write")
			}
			if err != nil {
				return fmt.Errorf("(h) round %d: node %s %s: %w", round, req.Op, req.Name, err)
			}
			if req.Op == control.NodeAdd {
				r.nodeAddCall = append(r.nodeAddCall, secs(d))
				r.nodeAddWrites = append(r.nodeAddWrites, rec.writes)
			} else {
				r.nodeRemoveCall = append(r.nodeRemoveCall, secs(d))
			}
		}
	}
	for _, x := range []struct {
		req control.SimulateRequest
		acc *[]float64
	}{{control.SimulateRequest{}, &r.simMeasured}, {control.SimulateRequest{Demand: "*=max"}, &r.simMax}} {
		var users int
		d, _, err := s.call(func(ctx context.Context) error {
			resp, err := s.Daemon.Simulate(ctx, x.req)
			if err == nil {
				users = len(resp.Users)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("(h) round %d: simulate %q: %w", round, x.req.Demand, err)
		}
		if users < h.Users {
			return fmt.Errorf("(h) round %d: simulate %q predicted %d users, want %d", round, x.req.Demand, users, h.Users+1)
		}
		*x.acc = append(*x.acc, secs(d))
	}
	fmt.Printf("round %d  (h) user add mover %.3f ms (%d writes); %d moves, %d changes of %s, 2 simulations\n",
		round, ms(secs(addTime)), addRec.writes, n, n+n%2, node)
	return nil
}

// span is "min-max" of xs.
func span(xs []int) string {
	if len(xs) == 0 {
		return "-"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// hierReport prints (h)'s medians and figures.
func hierReport(o options, r *hierResults) {
	h := o.hier
	fmt.Printf("\n== hierarchy summary (%d rounds, medians) ==\n", o.rounds)
	sh, fl := median(r.shaperd), median(r.flat)
	ratio := sh / fl
	fmt.Printf("(h) cold apply of %d users, %d nodes by the daemon: %.2f s (start %.3f s, Once %.2f s, of it kernel Apply %.2f s; %d changes, %d writes)\n",
		h.Users, h.Sites+h.Buildings+h.APs, sh, median(r.start), median(r.once), median(r.kernel), r.changes, r.writes)
	fmt.Printf("    tc -batch, the same classes (parents first) and a flat u32 list: %.2f s (sys %.2f)\n", fl, median(r.flatSys))
	fmt.Printf("TARGET (h) cold apply ratio shaperd / tc flat %.2f <= 1.0: %s (median of per-round ratios %.2f)\n",
		ratio, verdict(ratio <= 1.0), median(r.ratios))
	var tot []float64
	writes, changes := 0, 0
	for _, u := range r.unchanged {
		tot = append(tot, secs(u.wall))
		writes += u.rec.writes
		changes += u.rec.changes
	}
	fmt.Printf("TARGET (h) re-apply of the unchanged hierarchy: Once median %.3f s < 1 s, %d writes (%d changes) in %d rounds: %s\n",
		median(tot), writes, changes, len(tot), verdict(median(tot) < 1 && writes == 0 && changes == 0))
	fmt.Printf("(h) one run-time user moved to another AP (Daemon.ChangeUser move): p50 %.3f ms p99 %.3f ms; its kernel Apply p50 %.3f ms p99 %.3f ms; %s writes each (%d moves)\n",
		ms(median(r.moveCall)), ms(quantile(r.moveCall, 0.99)), ms(median(r.moveKernel)), ms(quantile(r.moveKernel, 0.99)), span(r.moveWrites), len(r.moveCall))
	fmt.Printf("(h) one AP's capacity change (Daemon.SetRate node:%s, ceil 80mbit <-> 100mbit, ramp 0): p50 %.3f ms p99 %.3f ms; its kernel Apply p50 %.3f ms p99 %.3f ms; %s writes each (%d changes)\n",
		h.nodeTarget(), ms(median(r.nodeCall)), ms(quantile(r.nodeCall, 0.99)), ms(median(r.nodeKernel)), ms(quantile(r.nodeKernel, 0.99)), span(r.nodeWrites), len(r.nodeCall))
	fmt.Printf("(h) one run-time node added under %s (Daemon.ChangeNode add, rate 1mbit): p50 %.3f ms p99 %.3f ms, %s writes each; removed again: p50 %.3f ms p99 %.3f ms (%d each)\n",
		h.nodeTarget(), ms(median(r.nodeAddCall)), ms(quantile(r.nodeAddCall, 0.99)), span(r.nodeAddWrites), ms(median(r.nodeRemoveCall)), ms(quantile(r.nodeRemoveCall, 0.99)), len(r.nodeAddCall))
	fmt.Printf("(h) simulate the whole plan (Daemon.Simulate): empty request (measured demand) median %.3f s; every user backlogged (--demand '*=max') median %.3f s (%d each)\n",
		median(r.simMeasured), median(r.simMax), len(r.simMax))
}
