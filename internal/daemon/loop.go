package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel"
)

// loop is the goroutine that owns the daemon's state.
func (d *Daemon) loop(ctx context.Context, links <-chan kernel.LinkEvent, tc <-chan kernel.TCEvent) {
	d.looping.Store(true)
	defer d.looping.Store(false)
	d.events = eventState{links: links, tc: tc, dirty: map[*reconciler]bool{}}
	d.tcLive = tc != nil
	err := d.policyStep(d.clock.Now())
	d.saveAssignments()
	d.afterReconcile(err)

	policyEvery, reconcileEvery := d.policyTickEvery(), d.plan.Daemon.ReconcileInterval
	policyT, reconcileT := d.clock.NewTicker(policyEvery), d.clock.NewTicker(reconcileEvery)
	defer func() { policyT.Stop(); reconcileT.Stop() }()
	var watchdog <-chan time.Time
	if d.opts.Watchdog > 0 {
		wt := d.clock.NewTicker(d.opts.Watchdog / 2)
		defer wt.Stop()
		watchdog = wt.C()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-policyT.C():
			now := d.clock.Now()
			d.readQuotaCounters(now)
			evals := d.work.evaluations
			err := d.policyTick(now)
			if err != nil {
				d.afterReconcile(err)
			}
			if d.work.evaluations != evals {
				d.returnMemory(memEvaluation, 0)
			}
			d.reportFleetUsage(now) // the fleet's quota ledger
			if d.usage.FlushDue(now) && !d.writeFailing(UsageFile) {
				d.saveUsage(now) // while writes fail, retryState retries
			}
		case <-reconcileT.C():
			d.afterReconcile(d.tick())
			d.retryState(d.clock.Now())
			if d.counterReads > 0 { // dumps leave garbage; an idle tick none
				d.counterReads = 0
				d.returnMemory(memTick, 0)
			}
			d.pingWatchdog(true)
		case <-watchdog:
			d.pingWatchdog(true)
		case ev, ok := <-d.events.links:
			d.linkEvent(ev, ok)
		case ev, ok := <-d.events.tc:
			d.tcEvent(ev, ok)
		case <-d.events.settle:
			d.afterReconcile(d.settled())
		case fn := <-d.reqs:
			fn()
		case fn := <-d.reads:
			fn()
		}
		// Ramps step every rampEvery while any is in progress; a reload may
		// change both intervals.
		if e := d.policyTickEvery(); e != policyEvery {
			policyT.Stop()
			policyEvery = e
			policyT = d.clock.NewTicker(e)
		}
		if e := d.plan.Daemon.ReconcileInterval; e != reconcileEvery {
			reconcileT.Stop()
			reconcileEvery = e
			reconcileT = d.clock.NewTicker(e)
		}
	}
}

// afterReconcile logs err (missing interfaces are warned about once, by
// reconcile), sends READY=1 after the first pass over the interfaces and
// keeps STATUS= saying what is shaped and what is not. READY=1 does not
// wait for every interface to be ok: one refused object, a missing or a
// failed interface must not keep the service "starting" until systemd
// kills it and restarts it in a loop while the rest could be shaped; the
// problems are in STATUS=, `shaperctl status` (non-ok states), the log and
// shaperd_errors_total.
func (d *Daemon) afterReconcile(err error) {
	if err != nil && !onlyMissing(err) {
		d.log.Error("reconcile failed", "err", err)
	}
	if status := d.serviceStatus(); status != d.lastStatus || !d.ready {
		d.lastStatus = status
		if !d.ready {
			d.ready = true
			d.notify.Notify("READY=1")
			d.log.Info("ready", "status", status)
			defer d.returnMemory(memFirstApply, 0)
		}
		d.notify.Notify("STATUS=" + status)
	}
}

// onlyMissing reports whether every error joined in err wraps ErrMissing.
func onlyMissing(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyMissing(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, ErrMissing)
}

// tick is the reconcile ticker's work on every interface. While
// traffic-control events report other programs' changes (they reconcile
// the interface at once), an interface that is in sync is left alone
// until its last full reconcile is full_reconcile_interval old; then it is
// dumped, diffed and repaired. Its counters are read when something needs
// them (status, top, a /metrics scrape, quotas: see refreshCounters and
// readQuotaCounters), not by the tick: with 10,000 classes a class dump
// costs the kernel ~0.1 s (it walks the classes again for each datagram
// of the answer). Without events, or for an interface that is not in sync
// (missing, pending, degraded, failed: retried every tick), every tick
// reconciles.
func (d *Daemon) tick() error {
	now := d.clock.Now()
	var errs []error
	for _, st := range d.ifaces {
		if d.tcLive && st.state == stateOK && now.Sub(st.lastFull) < d.plan.Daemon.FullReconcileInterval {
			continue
		}
		if err := d.reconcile(st, "tick"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
