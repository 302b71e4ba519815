package main

import (
	"fmt"
	"syscall"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// cpu returns this process's user and system CPU time so far.
func cpu() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// build is shaperd's first apply of a plan on an empty device, the
// daemon's path: Dump, Build, Diff, Apply.
type build struct {
	total, dump, build, diff, apply cost
	writes, changes                 int
}

// timed runs fn and returns its wall and CPU time.
func timed(fn func() error) (cost, error) {
	u0, s0 := cpu()
	start := time.Now()
	err := fn()
	c := cost{wall: time.Since(start)}
	u1, s1 := cpu()
	c.user, c.sys = u1-u0, s1-s0
	return c, err
}

// applyPlan makes the kernel hold Build(tg) on tg's device the way the
// daemon does and times each step. ids may be nil.
func applyPlan(k *kernel.Kernel, tg model.Targets, ids *model.Assignment) (build, model.Tree, error) {
	var b build
	var actual, desired model.Tree
	var changes []model.Change
	var res kernel.Result
	var err error
	b.total, err = timed(func() error {
		if b.dump, err = timed(func() (e error) { actual, e = k.Dump(tg.Interface.Name); return e }); err != nil {
			return fmt.Errorf("dump %s: %w", tg.Interface.Name, err)
		}
		if b.build, err = timed(func() (e error) { desired, e = model.Build(tg, ids); return e }); err != nil {
			return fmt.Errorf("build %d users: %w", len(tg.Users), err)
		}
		b.diff, _ = timed(func() error { changes = model.Diff(actual, desired); return nil })
		b.apply, err = timed(func() (e error) { res, e = k.Apply(changes); return e })
		return err
	})
	b.writes, b.changes = res.Writes, len(changes)
	return b, desired, err
}

// change is one measured rate change: the kernel Apply alone, Build +
// Diff + Apply (the daemon's work when it already trusts its picture of
// the kernel), and writes.
type change struct {
	apply, full time.Duration
	writes      int
}

// rateChanger changes one user's guaranteed rate back and forth in an
// applied tree.
type rateChanger struct {
	k      *kernel.Kernel
	tg     model.Targets
	ids    *model.Assignment
	actual model.Tree
	user   int
	flip   bool
	// up and down are the precomputed single class changes 1 -> 2 mbit and
	// back, for timing the kernel write path alone.
	up, down []model.Change
}

// newRateChanger applies tg (users get their minors from a fresh
// Assignment) and returns a changer for the user in the middle.
func newRateChanger(k *kernel.Kernel, tg model.Targets) (*rateChanger, error) {
	rc := &rateChanger{k: k, tg: tg, ids: model.NewAssignment(), user: len(tg.Users) / 2}
	_, desired, err := applyPlan(k, tg, rc.ids)
	if err != nil {
		return nil, err
	}
	rc.actual = desired
	tg2 := tg
	tg2.Users = append([]model.UserTarget(nil), tg.Users...)
	tg2.Users[rc.user].Rate = 2 * tbf.Mbit
	faster, err := model.Build(tg2, rc.ids)
	if err != nil {
		return nil, err
	}
	rc.up, rc.down = model.Diff(desired, faster), model.Diff(faster, desired)
	if len(rc.up) != 1 || rc.up[0].Op != model.OpChange || rc.up[0].Class == nil {
		return nil, fmt.Errorf("rate change of user %d gave %d changes (%v), want one class change", rc.user, len(rc.up), rc.up)
	}
	return rc, nil
}

// applyOnly applies the precomputed change (alternately up and down) and
// returns how long Apply took; it must make exactly one write.
func (rc *rateChanger) applyOnly(up bool) (time.Duration, error) {
	cs := rc.down
	if up {
		cs = rc.up
	}
	start := time.Now()
	res, err := rc.k.Apply(cs)
	d := time.Since(start)
	if err == nil && res.Writes != 1 {
		err = fmt.Errorf("a rate change took %d writes, want 1", res.Writes)
	}
	return d, err
}

// flipRate moves the user's rate to the other of 1 mbit and 2 mbit.
func (rc *rateChanger) flipRate() {
	rc.flip = !rc.flip
	rc.tg.Users[rc.user].Rate = tbf.Mbit
	if rc.flip {
		rc.tg.Users[rc.user].Rate = 2 * tbf.Mbit
	}
}

// step changes the user's rate (1 mbit <-> 2 mbit): Build, Diff against
// the last applied tree, Apply.
func (rc *rateChanger) step() (change, error) {
	rc.flipRate()
	start := time.Now()
	next, err := model.Build(rc.tg, rc.ids)
	if err != nil {
		return change{}, err
	}
	changes := model.Diff(rc.actual, next)
	applyStart := time.Now()
	res, err := rc.k.Apply(changes)
	end := time.Now()
	if err != nil {
		return change{}, err
	}
	if len(changes) != 1 || changes[0].Op != model.OpChange || changes[0].Class == nil {
		return change{}, fmt.Errorf("rate change of user %d gave %d changes (%v), want one class change", rc.user, len(changes), changes)
	}
	rc.actual = next
	return change{apply: end.Sub(applyStart), full: end.Sub(start), writes: res.Writes}, nil
}

// reconcile is step through the daemon's whole reconcile: Build, Dump,
// Diff, Apply and Verify (a second Dump).
func (rc *rateChanger) reconcile() (time.Duration, error) {
	rc.flipRate()
	start := time.Now()
	next, err := model.Build(rc.tg, rc.ids)
	if err != nil {
		return 0, err
	}
	actual, err := rc.k.Dump(next.Device)
	if err != nil {
		return 0, err
	}
	if _, err := rc.k.Apply(model.Diff(actual, next)); err != nil {
		return 0, err
	}
	mism, err := rc.k.Verify(next)
	if err != nil || len(mism) > 0 {
		return 0, fmt.Errorf("verify after a rate change: %v %v", mism, err)
	}
	rc.actual = next
	return time.Since(start), nil
}

// unchanged is the reconcile of a tree the kernel already holds (c):
// Dump, Diff, Apply; Build timed separately (the daemon skips it when the
// targets did not change).
type unchanged struct {
	dump, build, diff, apply time.Duration
	changes, writes          int
}

func (u unchanged) total() time.Duration { return u.dump + u.diff + u.apply }

func reapply(k *kernel.Kernel, tg model.Targets) (unchanged, error) {
	return reapplyWith(k, tg, nil)
}

// reapplyWith is reapply with the assignment the tree was built with (nil:
// a fresh one).
func reapplyWith(k *kernel.Kernel, tg model.Targets, ids *model.Assignment) (unchanged, error) {
	var u unchanged
	start := time.Now()
	desired, err := model.Build(tg, ids)
	if err != nil {
		return u, err
	}
	t1 := time.Now()
	actual, err := k.Dump(tg.Interface.Name)
	if err != nil {
		return u, err
	}
	t2 := time.Now()
	changes := model.Diff(actual, desired)
	t3 := time.Now()
	res, err := k.Apply(changes)
	t4 := time.Now()
	u = unchanged{dump: t2.Sub(t1), build: t1.Sub(start), diff: t3.Sub(t2), apply: t4.Sub(t3), changes: len(changes), writes: res.Writes}
	return u, err
}
