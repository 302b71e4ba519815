package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/shaperd/shaperd/internal/lab/daemonlab"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// The shaperd side of every measurement is the daemon itself
// (internal/daemon, what cmd/shaperd runs), made by daemonlab in the lab's
// namespace with a kernel that records each Apply: a cold apply is
// daemonlab.Start (the configuration read, daemon.New) and Daemon.Once (the
// policy, the desired tree, Dump, Diff, Apply, Verify); a change is the
// control API method shaperctl calls over the socket (Daemon.SetRate,
// Daemon.ChangeUser), run by the daemon's loop; the recorded Applies give
// the kernel's part of each.

// callTimeout bounds one control call or Once.
const callTimeout = 10 * time.Minute

// cpu returns this process's user and system CPU time so far.
func cpu() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// timed runs fn and returns its wall and CPU time (the whole process's
// CPU: the daemon's goroutines are in it).
func timed(fn func() error) (cost, error) {
	u0, s0 := cpu()
	start := time.Now()
	err := fn()
	c := cost{wall: time.Since(start)}
	u1, s1 := cpu()
	c.user, c.sys = u1-u0, s1-s0
	return c, err
}

func (c cost) plus(d cost) cost { return cost{c.wall + d.wall, c.user + d.user, c.sys + d.sys} }

// recorded sums the daemon's kernel writes of one measurement: Apply
// calls, the changes they carried, the kernel's writes, and the time spent
// in Apply.
type recorded struct {
	applies, changes, writes int
	kernel                   time.Duration
}

// summarize sums ws; a failed Apply is an error.
func summarize(ws []daemonlab.Write) (recorded, error) {
	var r recorded
	for _, w := range ws {
		r.applies++
		r.changes += len(w.Changes)
		r.writes += w.Result.Writes
		r.kernel += w.End.Sub(w.Start)
		if w.Err != nil {
			return r, fmt.Errorf("the daemon's kernel Apply of %d changes failed: %w", len(w.Changes), w.Err)
		}
	}
	return r, nil
}

// shaperd is the daemon under test in a lab namespace.
type shaperd struct {
	*daemonlab.Lab
	plan daemonPlan
	log  *os.File
}

// coldApply is the daemon's first apply of its plan on an empty device.
type coldApply struct {
	// total is start + once: Start reads the configuration and makes
	// the daemon, Once applies and verifies the plan.
	total, start, once cost
	rec                recorded
	// tree holds the objects the daemon created on the plan's device.
	tree model.Tree
}

// startShaperd makes the daemon for p in network namespace netns and times
// its first apply (Start + Once). Its log goes to a file in o.dir named
// after netns and what.
func startShaperd(o options, netns, what string, p daemonPlan) (*shaperd, coldApply, error) {
	var c coldApply
	logf, err := os.Create(filepath.Join(o.dir, fmt.Sprintf("%s-%s.log", netns, what)))
	if err != nil {
		return nil, c, err
	}
	var l *daemonlab.Lab
	c.start, err = timed(func() (e error) {
		l, e = daemonlab.Start(o.dir, daemonlab.Options{NetNS: netns, Main: p.main, Users: p.files, Log: logf})
		return e
	})
	if err != nil {
		logf.Close()
		return nil, c, fmt.Errorf("%s: %w", what, err)
	}
	s := &shaperd{Lab: l, plan: p, log: logf}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c.once, err = timed(func() error { return l.Once(ctx) })
	c.total = c.start.plus(c.once)
	ws := l.Kernel.Writes()
	l.Kernel.Reset()
	if err == nil {
		c.rec, err = summarize(ws)
	}
	if err != nil {
		s.close()
		return nil, c, fmt.Errorf("%s: the daemon's first apply (log %s): %w", what, logf.Name(), err)
	}
	var changes []model.Change
	for _, w := range ws {
		changes = append(changes, w.Changes...)
	}
	c.tree = treeOf(p.dev, changes)
	return s, c, nil
}

// reapply is the daemon's re-apply of the plan the kernel holds (Once
// again: the policy finds the same targets, a full pass dumps, diffs and
// finds nothing to write).
func (s *shaperd) reapply() (time.Duration, recorded, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	start := time.Now()
	err := s.Once(ctx)
	d := time.Since(start)
	rec, rerr := summarize(s.Kernel.Writes())
	s.Kernel.Reset()
	if err == nil {
		err = rerr
	}
	return d, rec, err
}

// call times fn, one control request to the running daemon, and sums the
// kernel writes the daemon made meanwhile.
func (s *shaperd) call(fn func(ctx context.Context) error) (time.Duration, recorded, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	s.Kernel.Reset()
	start := time.Now()
	err := fn(ctx)
	d := time.Since(start)
	rec, rerr := summarize(s.Kernel.Writes())
	if err == nil {
		err = rerr
	}
	return d, rec, err
}

// close stops the daemon's loop, removes its shaping (Daemon.Teardown:
// the root qdisc and, with bpf, the pinned maps), closes it and removes
// its directory.
func (s *shaperd) close() {
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "benchapply: the daemon's loop (log %s): %v\n", s.log.Name(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := s.Daemon.Teardown(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "benchapply: teardown of %s: %v\n", s.plan.dev, err)
	}
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "benchapply: closing the daemon: %v\n", err)
	}
	_ = os.RemoveAll(s.Dir)
	_ = s.log.Close()
}

// treeOf is the tree the changes create on dev: their root qdisc, queue
// qdiscs, classes and filters (additions only), sorted.
func treeOf(dev string, changes []model.Change) model.Tree {
	t := model.Tree{Device: dev}
	for _, c := range changes {
		if c.Op != model.OpAdd || c.Device != dev {
			continue
		}
		switch {
		case c.Qdisc != nil && c.Qdisc.Parent == 0:
			q := *c.Qdisc
			t.Root = &q
		case c.Qdisc != nil:
			t.Queues = append(t.Queues, *c.Qdisc)
		case c.Class != nil:
			t.Classes = append(t.Classes, *c.Class)
		case c.Filter != nil:
			t.Filters = append(t.Filters, *c.Filter)
		}
	}
	t.Sort()
	return t
}

// planTree is the tree the daemon would build for p on an empty device
// (Daemon.DiffPlan: the policy and the desired tree, no write), for the tc
// -batch peers to build the same objects. It makes its own namespace.
func planTree(o options, p daemonPlan) (model.Tree, error) {
	l, err := newLab(o.prefix+"-plan", p.dev)
	if err != nil {
		return model.Tree{}, err
	}
	defer l.close()
	logf, err := os.Create(filepath.Join(o.dir, l.name+".log"))
	if err != nil {
		return model.Tree{}, err
	}
	defer logf.Close()
	dl, err := daemonlab.Start(o.dir, daemonlab.Options{NetNS: l.name, Main: p.main, Users: p.files, Log: logf})
	if err != nil {
		return model.Tree{}, err
	}
	defer os.RemoveAll(dl.Dir)
	defer dl.Close()
	diffs := dl.Daemon.DiffPlan(time.Now())
	if len(diffs) != 1 {
		return model.Tree{}, fmt.Errorf("the plan has %d interfaces, want 1", len(diffs))
	}
	d := diffs[0]
	if d.Missing || d.Err != nil {
		return model.Tree{}, fmt.Errorf("the daemon's plan for %s: missing %v, %v", d.Device, d.Missing, d.Err)
	}
	t := treeOf(p.dev, d.Changes)
	if t.Root == nil {
		return t, fmt.Errorf("the daemon's plan for %s has no root qdisc", p.dev)
	}
	return t, nil
}

// classifierName is the classifier the daemon uses for kind ("": its
// default, bpf where the kernel allows it).
func classifierName(kind string) string {
	if kind != "" {
		return kind
	}
	if kernel.BPFClassifierAvailable() == nil {
		return kernel.ClassifierBPF + " (default)"
	}
	return kernel.ClassifierU32 + " (default; bpf unavailable)"
}
