package smoothness

import "time"

// Clock is the source of real time for a measurement. Run needs real time
// (it measures the kernel), so the caller injects RealClock at the top; the
// interface keeps time.Now out of the logic.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// Sleep pauses the calling goroutine for d (no-op for d <= 0).
	Sleep(d time.Duration)
}

// RealClock is the wall clock (package time).
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// Sleep is time.Sleep.
func (RealClock) Sleep(d time.Duration) { time.Sleep(d) }

// sleepUntil sleeps on c until t.
func sleepUntil(c Clock, t time.Time) { c.Sleep(t.Sub(c.Now())) }
