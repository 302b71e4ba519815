package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/shaperd/shaperd/internal/control"
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
