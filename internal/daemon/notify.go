package daemon

import (
	"time"

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
