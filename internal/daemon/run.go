package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/kernel"
)

// Run runs the daemon until ctx ends: it serves the control socket and
// /metrics, shapes every managed interface and keeps the kernel in step
// with the plan. When ctx ends it saves its state and returns nil, leaving
// the shaping in place. It returns an error only when it cannot start (the
// control socket or metrics address is taken, ...).
func (d *Daemon) Run(ctx context.Context) error {
	// Requests fail with ErrUnavailable as soon as the loop is gone, so
	// that the servers' shutdown does not wait for them.
	var once sync.Once
	stop := func() { once.Do(func() { close(d.stopped) }) }
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	access, err := control.NewAccess(d.plan.Daemon.SocketGroup, d.plan.Daemon.AdminGroup)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	l := d.opts.ControlListener
	if l == nil {
		if l, err = control.Listen(d.plan.Daemon.Socket, access.FileGroup()); err != nil {
			return fmt.Errorf("control socket: %w", err)
		}
		if gid, ok := access.ExtraGroup(); ok {
			if err := control.AllowGroup(d.plan.Daemon.Socket, gid); err != nil {
				d.log.Warn("admin_group members must also be in socket_group to reach the control socket", "err", err)
			}
		}
	}
	srv := control.NewServer(d, d.log.With("component", "control"))
	srv.Access = access
	go func() {
		if err := srv.Serve(l); err != nil {
			d.log.Error("control socket stopped", "err", err)
		}
	}()
	defer shutdown(srv.Shutdown)
	d.log.Info("control socket listening", "socket", l.Addr().String())

	ml := d.opts.MetricsListener
	if ml == nil && d.plan.Daemon.Metrics != "" {
		var err error
		if ml, err = net.Listen("tcp", d.plan.Daemon.Metrics); err != nil {
			return fmt.Errorf("metrics on %s: %w", d.plan.Daemon.Metrics, err)
		}
	}
	if ml != nil {
		ms := &http.Server{Handler: d.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := ms.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("metrics server stopped", "err", err)
			}
		}()
		defer shutdown(ms.Shutdown)
		d.log.Info("metrics listening", "addr", ml.Addr().String())
	}

	links, err := d.k.WatchLinks(ctx)
	if err != nil {
		d.log.Warn("link events unavailable; interfaces are found by the reconcile tick only", "err", err)
	}
	tc, err := d.k.WatchTC(ctx)
	if err != nil {
		d.log.Warn("traffic-control events unavailable; changes made by others are found by the reconcile tick only", "err", err)
	}
	fleetDone := d.startFleet(ctx)
	d.loop(ctx, links, tc)
	stop()
	cancel()
	<-fleetDone // the registration lease is revoked
	d.notify.Notify("STOPPING=1")
	d.saveUsage(d.clock.Now())
	d.saveAssignments()
	d.closeUsers()
	d.log.Info("stopped; shaping left in place")
	return nil
}

// shutdown stops a server, waiting at most 5 s for requests in flight.
func shutdown(f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = f(ctx)
}

// loop is the goroutine that owns the daemon's state.
func (d *Daemon) loop(ctx context.Context, links <-chan kernel.LinkEvent, tc <-chan kernel.TCEvent) {
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
	dirty := map[string]bool{}
	var settle <-chan time.Time
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
			if d.work.evaluations != evals && d.ready {
				d.returnMemory(false) // a full evaluation and build allocate per user
			}
			d.reportFleetUsage(now) // the fleet's quota ledger
			if d.usage.FlushDue(now) && !d.writeFailing(UsageFile) {
				d.saveUsage(now) // while writes fail, retryState retries
			}
		case <-reconcileT.C():
			d.afterReconcile(d.tick())
			d.retryState(d.clock.Now())
			d.returnMemory(false)
			d.pingWatchdog(true)
		case <-watchdog:
			d.pingWatchdog(true)
		case ev, ok := <-links:
			if !ok {
				links = nil
				d.log.Warn("link events ended; interfaces are found by the reconcile tick only")
				continue
			}
			if d.managed(ev.Name) {
				d.log.Debug("link event", "device", ev.Name, "up", ev.Up, "deleted", ev.Deleted)
				dirty[ev.Name] = true
				if settle == nil {
					settle = d.clock.After(d.opts.LinkSettle)
				}
			}
		case ev, ok := <-tc:
			if !ok {
				tc, d.tcLive = nil, false
				d.log.Warn("traffic-control events ended; changes made by others are found by the reconcile tick only")
				continue
			}
			switch {
			case ev.Overrun:
				d.log.Warn("traffic-control events overran (the kernel dropped some); reconciling every interface")
				for _, st := range d.ifaces {
					dirty[st.cfg.Name] = true
				}
			case d.managed(ev.Device):
				d.log.Debug("traffic-control change by another program", "device", ev.Device)
				dirty[ev.Device] = true
			default:
				continue
			}
			d.stats.tcEvents.Inc()
			if settle == nil {
				settle = d.clock.After(tcSettle)
			}
		case <-settle:
			settle = nil
			var errs []error
			for _, st := range d.ifaces {
				if dirty[st.cfg.Name] || dirty[st.device] {
					if err := d.reconcile(st, "event"); err != nil {
						errs = append(errs, err)
					}
				}
			}
			clear(dirty)
			d.afterReconcile(errors.Join(errs...))
		case fn := <-d.reqs:
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

// pingWatchdog sends WATCHDOG=1: always when force is set (the loop's
// ticks), else when half the watchdog interval has passed since the last
// ping (between the interfaces of a long reconcile pass, so that a first
// apply of many users on several interfaces does not trip the watchdog).
func (d *Daemon) pingWatchdog(force bool) {
	if d.opts.Watchdog <= 0 {
		return
	}
	now := d.clock.Now()
	if force || now.Sub(d.lastPing) >= d.opts.Watchdog/2 {
		d.notify.Notify("WATCHDOG=1")
		d.lastPing = now
	}
}

// tcSettle is how long the daemon waits after a traffic-control change by
// another program for more of them (tc commands come in bursts) before it
// reconciles the device.
const tcSettle = 20 * time.Millisecond

// startExtend is how much more start-up time the daemon asks the service
// manager for at a time while its first apply runs (EXTEND_TIMEOUT_USEC).
const startExtend = 30 * time.Second

// applyProgress is called between the pipelined runs of a kernel apply (on
// the goroutine that applies). Before the daemon is ready, a long first
// apply (tens of thousands of classes) asks systemd for more start-up time
// every startExtend/2; it always keeps the watchdog fed. A kernel that
// stops answering makes no progress, so neither is sent then.
func (d *Daemon) applyProgress() {
	d.pingWatchdog(false)
	if d.ready {
		return
	}
	now := d.clock.Now()
	if d.lastExtend.IsZero() {
		d.lastExtend = now // the first run of an apply: started just now
		return
	}
	if now.Sub(d.lastExtend) >= startExtend/2 {
		d.notify.Notify(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", startExtend.Microseconds()))
		d.lastExtend = now
	}
}

// managed reports whether name is a managed interface or its IFB.
func (d *Daemon) managed(name string) bool {
	for _, st := range d.ifaces {
		if st.cfg.Name == name || st.device == name {
			return true
		}
	}
	return false
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
			defer d.returnMemory(true)
		}
		d.notify.Notify("STATUS=" + status)
	}
}

// serviceStatus is the one-line STATUS= for the service manager: "shaping
// 2 interfaces, 3 users", with the interfaces that are not ok.
func (d *Daemon) serviceStatus() string {
	var bad []string
	for _, st := range d.ifaces {
		if state, _ := st.health(); state != control.StateOK && state != control.StatePending {
			bad = append(bad, st.key+" "+state)
		}
	}
	s := fmt.Sprintf("shaping %d interfaces, %d users", len(d.ifaces), len(d.plan.Users))
	if len(bad) > 0 {
		s += "; not ok: " + strings.Join(bad, ", ") + " (shaperctl status)"
	}
	return s
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
