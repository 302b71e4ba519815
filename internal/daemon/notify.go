package daemon

import (
	"fmt"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/control"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"
)

// Notifier receives the daemon's service-manager notifications:
// "READY=1" after the first successful apply, "WATCHDOG=1" from the loop,
// "RELOADING=1"/"READY=1" around reloads, "STOPPING=1" at the end and
// "STATUS=..." lines.
type Notifier interface {
	Notify(state string)
}

// Systemd sends notifications with sd_notify(3) to $NOTIFY_SOCKET; without
// that variable (not started by systemd) it does nothing.
type Systemd struct{}

// Notify sends state; errors are ignored (systemd is optional).
func (Systemd) Notify(state string) { _, _ = sd.SdNotify(false, state) }

// SystemdWatchdog returns the watchdog interval systemd asks for
// (WatchdogSec=), or 0 when the watchdog is off for this process.
func SystemdWatchdog() time.Duration {
	d, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		return 0
	}
	return d
}

type noNotifier struct{}

func (noNotifier) Notify(string) {}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, as sd_notify's
// MONOTONIC_USEC wants it.
func monotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano() / 1e3
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

// startExtend is how much more start-up time the daemon asks the service
// manager for at a time while its first apply runs (EXTEND_TIMEOUT_USEC).
const startExtend = 30 * time.Second

// applyProgress is called between the pipelined runs of a kernel apply (on
// the goroutine that applies). Before the daemon is ready, a long first
// apply (tens of thousands of classes) asks systemd for more start-up time
// every startExtend/2; it always keeps the watchdog fed. A kernel that
// stops answering makes no progress, so neither is sent then. Once ready,
// a status or top waiting for the loop is answered here (callRead), with
// d.applying set: the kernel's socket is the apply's until it ends, so
// the answer has the counters last read.
func (d *Daemon) applyProgress() {
	d.pingWatchdog(false)
	if d.ready {
		select {
		case fn := <-d.reads:
			d.applying = true
			fn()
			d.applying = false
		default:
		}
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
