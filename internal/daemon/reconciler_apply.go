package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// ErrMissing is wrapped by reconcile errors of an interface that does not
// exist (yet). The daemon waits for it; Once fails.
var ErrMissing = errors.New("interface does not exist")

// request says what Daemon.apply is to bring to the kernel.
type request struct {
	// why says what asked for it, for the log ("tick", "policy", "link",
	// "ramp", ...).
	why string
	// incremental: delta takes the kernel from the tree it holds (the
	// reconciler was ok) to the desired tree, so no dump is needed.
	incremental bool
	delta       []model.Change
}

// fullPass asks for a dump, a diff against the desired tree, an apply
// and a verify: what repairs drift.
func fullPass(why string) request { return request{why: why} }

// deltaPass asks for changes to be applied without a dump when synced
// (the kernel held the tree they start from), else for a full pass.
func deltaPass(why string, changes []model.Change, synced bool) request {
	return request{why: why, incremental: synced, delta: changes}
}

// apply is the one way changes reach the kernel for st: a delta without a
// dump when the request allows it, else (or when the kernel refuses the
// delta) a full pass. Its end moves st's state: ok, degraded (refusals),
// missing, or failed (an error, or a panic, which is recovered so that the
// other interfaces go on). It returns nil when the kernel holds st's
// desired tree afterwards.
func (d *Daemon) apply(st *reconciler, req request) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = d.recovered(st, r)
		}
		d.pingWatchdog(false)
		switch {
		case err == nil:
			st.setState(stateOK, nil)
		case errors.Is(err, ErrMissing):
			st.setState(stateMissing, nil)
		case errors.Is(err, ErrDegraded):
			st.setState(stateDegraded, nil)
		default:
			st.setState(stateFailed, err)
		}
	}()
	if req.incremental && st.state != stateMissing {
		if len(req.delta) == 0 {
			return nil
		}
		start := d.clock.Now()
		res, err := d.k.Apply(req.delta)
		if err == nil {
			return d.afterApply(st, req.why, req.delta, res, nil, false, start)
		}
		if len(res.Refused) == 0 {
			d.stats.errors.WithLabelValues("kernel").Inc()
		} // else the full pass below counts and reports each refusal
		d.log.Warn("incremental apply refused; reconciling", "interface", st.key, "why", req.why,
			"writes", res.Writes, "err", err)
		d.stats.writes.Add(float64(res.Writes))
		st.setState(statePending, nil) // what the kernel holds is not known now
	}
	return d.fullPass(st, req.why)
}

// fullPass dumps st's device, diffs it against the desired tree and
// applies the difference (see apply).
func (d *Daemon) fullPass(st *reconciler, why string) (err error) {
	start := d.clock.Now()
	st.lastFull = start
	defer func() { d.stats.reconcileDone(d.clock.Now().Sub(start), err) }()
	if !st.built() {
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
	d.drainEvents(st)
	actual, err := d.k.Actual(*st.tree())
	if errors.Is(err, kernel.ErrNoDevice) {
		return d.markMissing(st)
	}
	if err != nil {
		d.stats.errors.WithLabelValues("kernel").Inc()
		return fmt.Errorf("interface %s: dump %s: %w", st.key, st.tree().Device, err)
	}
	if st.state == stateMissing {
		d.log.Info("interface is present; shaping it", "interface", st.key)
	}
	if !slices.Equal(st.foreign, actual.Foreign) && len(actual.Foreign) > 0 {
		d.log.Warn("objects of other tools on a managed interface; left alone", "interface", st.key,
			"device", st.tree().Device, "foreign", strings.Join(actual.Foreign, "; "))
	}
	st.foreign = actual.Foreign
	d.sample(st, actual, d.clock.Now())
	changes := model.Diff(actual, *st.tree())
	if len(changes) == 0 {
		return nil
	}
	if st.state == stateOK {
		d.stats.drift.Inc()
		d.log.Warn("drift: the kernel differs from the plan; repairing", "interface", st.key,
			"changes", len(changes), "first", changes[0].String())
	}
	res, err := d.k.Apply(changes)
	return d.afterApply(st, why, changes, res, err, true, start)
}

// afterApply is the one post-apply hook: it counts the writes, logs the
// foreign root qdiscs replaced, reports a failure or the refusals, starts
// the quota usage of new user classes, verifies a full pass (verify) and
// returns freed memory after a big apply. Its error is apply's.
func (d *Daemon) afterApply(st *reconciler, why string, changes []model.Change, res kernel.Result, err error, verify bool, start time.Time) error {
	d.stats.writes.Add(float64(res.Writes))
	d.noteReplaced(st, res.Replaced)
	refusedOnly := err != nil && len(res.Refused) > 0 && !res.Stopped
	if err != nil && !refusedOnly {
		d.stats.errors.WithLabelValues("kernel").Inc()
		d.log.Error("kernel refused a change", "interface", st.key, "why", why,
			"writes", res.Writes, "err", err)
		return fmt.Errorf("interface %s: %w", st.key, err)
	}
	d.observeNewClasses(st, changes, res.Refused)
	if refusedOnly {
		// The kernel holds the plan but for the refused objects: no
		// verify (it would list just those).
		return d.noteRefusals(st, why, res.Refused)
	}
	if verify {
		d.drainEvents(st)
		mism, err := d.k.Verify(*st.tree())
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
	}
	d.returnMemory(memApply, len(changes))
	level := d.log.Info
	if why == "ramp" {
		level = d.log.Debug
	}
	level("applied", "interface", st.key, "why", why, "changes", len(changes), "writes", res.Writes,
		"took", d.clock.Now().Sub(start))
	return nil
}

// observeNewClasses starts the quota usage of the user classes changes
// added: new user classes count from zero (policy.Usage's baseline rule),
// so that their first bytes count towards quotas; a class the kernel did
// not create (refused) is not counted yet.
func (d *Daemon) observeNewClasses(st *reconciler, changes []model.Change, refused []*kernel.Error) {
	notCreated := map[string]bool{}
	for _, r := range refused {
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
}

// noteReplaced logs the foreign root qdiscs an apply replaced and counts
// the takeovers among them.
func (d *Daemon) noteReplaced(st *reconciler, replaced []string) {
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
// logs a warning. It returns an error wrapping ErrMissing (apply moves the
// state).
func (d *Daemon) markMissing(st *reconciler) error {
	if st.state != stateMissing {
		d.log.Warn("interface does not exist; waiting for it to appear", "interface", st.key, "device", st.cfg.Name)
	}
	return fmt.Errorf("interface %s: %w", st.cfg.Name, ErrMissing)
}

// reconcile is a full pass of apply over st.
func (d *Daemon) reconcile(st *reconciler, why string) error { return d.apply(st, fullPass(why)) }
