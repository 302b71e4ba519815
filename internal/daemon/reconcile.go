package daemon

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// freeAfterChanges is the number of changes in one apply after which the
// daemon returns freed memory to the OS at once.
const freeAfterChanges = 1000

// ErrMissing is wrapped by reconcile errors of an interface that does not
// exist (yet). The daemon waits for it; Once fails.
var ErrMissing = errors.New("interface does not exist")

// reconcile makes the kernel hold st.desired: dump, diff, apply, verify.
// why says what asked for it, for the log ("tick", "policy", "link", ...).
// It returns nil when the kernel holds desired afterwards.
func (d *Daemon) reconcile(st *iface, why string) (err error) {
	start := d.clock.Now()
	st.lastFull = start
	defer func() {
		if r := recover(); r != nil {
			err = d.recovered(st, r)
		}
		d.pingWatchdog(false)
		d.stats.reconcileDone(d.clock.Now().Sub(start), err)
		switch {
		case errors.Is(err, ErrDegraded):
			st.lastErr = nil // st.refused says what is missing
		case err != nil && !errors.Is(err, ErrMissing):
			st.lastErr = err
			st.refused = nil
		case err == nil:
			st.lastErr = nil
			st.refused = nil
		}
	}()
	if !st.built {
		return fmt.Errorf("interface %s: no tree to apply: %w", st.key, st.buildErr)
	}
	ok, err := d.k.LinkExists(st.cfg.Name)
	if err != nil {
		d.stats.errors.WithLabelValues("kernel").Inc()
		return fmt.Errorf("interface %s: %w", st.key, err)
	}
	if !ok {
		return d.markMissing(st)
	}
	actual, err := d.k.Actual(st.desired)
	if errors.Is(err, kernel.ErrNoDevice) {
		return d.markMissing(st)
	}
	if err != nil {
		d.stats.errors.WithLabelValues("kernel").Inc()
		return fmt.Errorf("interface %s: dump %s: %w", st.key, st.desired.Device, err)
	}
	if st.missing {
		st.missing = false
		d.log.Info("interface is present; shaping it", "interface", st.key)
	}
	if !slices.Equal(st.foreign, actual.Foreign) && len(actual.Foreign) > 0 {
		d.log.Warn("objects of other tools on a managed interface; left alone", "interface", st.key,
			"device", st.desired.Device, "foreign", strings.Join(actual.Foreign, "; "))
	}
	st.foreign = actual.Foreign
	d.sample(st, actual, d.clock.Now())
	changes := model.Diff(actual, st.desired)
	if len(changes) == 0 {
		st.inSync = true
		return nil
	}
	if st.inSync {
		d.stats.drift.Inc()
		d.log.Warn("drift: the kernel differs from the plan; repairing", "interface", st.key,
			"changes", len(changes), "first", changes[0].String())
	}
	st.inSync = false
	res, err := d.k.Apply(changes)
	d.stats.writes.Add(float64(res.Writes))
	d.noteReplaced(st, res.Replaced)
	refusedOnly := err != nil && len(res.Refused) > 0 && !res.Stopped
	if err != nil && !refusedOnly {
		d.stats.errors.WithLabelValues("kernel").Inc()
		d.log.Error("kernel refused a change", "interface", st.key, "why", why,
			"writes", res.Writes, "err", err)
		return fmt.Errorf("interface %s: %w", st.key, err)
	}
	// New user classes count from zero (policy.Usage's baseline rule), so
	// that their first bytes count towards quotas; a class the kernel did
	// not create is not counted yet.
	notCreated := map[string]bool{}
	for _, r := range res.Refused {
		if r.Op == model.OpAdd && strings.HasPrefix(r.Object, "class ") {
			notCreated[r.Labels.User] = true
		}
	}
	now := d.clock.Now()
	for _, c := range changes {
		if c.Op == model.OpAdd && c.Class != nil && c.Class.Labels.Kind == "user" && !notCreated[c.Class.Labels.User] {
			d.usage.Observe(c.Class.Labels.User, counterKey(st, c.Class.Handle), 0, now)
		}
	}
	if refusedOnly {
		// The kernel holds the plan but for the refused objects: no
		// verify (it would list just those).
		return d.noteRefusals(st, why, res.Refused)
	}
	mism, err := d.k.Verify(st.desired)
	if err != nil {
		d.stats.errors.WithLabelValues("kernel").Inc()
		return fmt.Errorf("interface %s: verify: %w", st.key, err)
	}
	if len(mism) > 0 {
		d.stats.errors.WithLabelValues("verify").Inc()
		err := fmt.Errorf("interface %s: the kernel does not hold the plan after %d changes: %s",
			st.key, len(changes), describe(mism, 5))
		d.log.Error("verify failed", "interface", st.key, "err", err)
		return err
	}
	st.inSync = true
	if len(changes) >= freeAfterChanges && d.ready {
		// A big apply (a reload with many new users) leaves a heap far
		// above what the daemon keeps; give it back to the OS now rather
		// than over the next minutes. (The first apply is followed by
		// returnMemory.)
		debug.FreeOSMemory()
	}
	d.log.Info("applied", "interface", st.key, "why", why, "changes", len(changes), "writes", res.Writes)
	return nil
}

// noteReplaced logs the foreign root qdiscs an apply replaced and counts
// the takeovers among them.
func (d *Daemon) noteReplaced(st *iface, replaced []string) {
	for _, r := range replaced {
		if strings.Contains(r, "took over") {
			d.stats.takeovers.Inc()
			d.log.Warn("took over a root qdisc of another tool", "interface", st.key, "replaced", r)
			continue
		}
		d.log.Warn("replaced a foreign root qdisc", "interface", st.key, "replaced", r)
	}
}

// markMissing notes that st's interface does not exist; the first time it
// logs a warning. It returns an error wrapping ErrMissing.
func (d *Daemon) markMissing(st *iface) error {
	if !st.missing {
		d.log.Warn("interface does not exist; waiting for it to appear", "interface", st.key, "device", st.cfg.Name)
	}
	st.missing = true
	st.inSync = false
	return fmt.Errorf("interface %s: %w", st.cfg.Name, ErrMissing)
}

// reconcileAll reconciles every interface and returns the errors joined
// (missing interfaces included, wrapping ErrMissing).
// tick is the reconcile ticker's work on every interface. While
// traffic-control events report other programs' changes (they reconcile
// the interface at once), an interface that is in sync only has its
// counters read (kernel.Counters: no filter dump), and is dumped, diffed
// and repaired when its last full reconcile is full_reconcile_interval
// old. Without events, or for an interface that is not in sync (missing,
// pending, degraded, failed: retried every tick), every tick reconciles.
func (d *Daemon) tick() error {
	now := d.clock.Now()
	var errs []error
	for _, st := range d.ifaces {
		if d.tcLive && st.inSync && st.lastErr == nil && len(st.refused) == 0 && !st.missing &&
			now.Sub(st.lastFull) < d.plan.Daemon.FullReconcileInterval && d.readCounters(st, now) {
			continue
		}
		if err := d.reconcile(st, "tick"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readCounters samples st's counters with kernel.Counters; it reports
// false (the caller reconciles instead) when they cannot be read or the
// root is gone.
func (d *Daemon) readCounters(st *iface, now time.Time) bool {
	actual, err := d.k.Counters(st.desired.Device)
	if err != nil || actual.Root == nil {
		return false
	}
	d.sample(st, actual, now)
	return true
}

func (d *Daemon) reconcileAll(why string) error {
	var errs []error
	for _, st := range d.ifaces {
		if err := d.reconcile(st, why); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
