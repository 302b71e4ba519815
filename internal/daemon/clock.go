package daemon

import "time"

// Clock is the daemon's source of time. The real one (RealClock) is used by
// cmd/shaperd; tests inject a fake that moves only when told.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// After delivers the time once d has passed.
	After(d time.Duration) <-chan time.Time
	// NewTicker delivers the time every d (d > 0) until stopped.
	NewTicker(d time.Duration) Ticker
}

// Ticker is a running ticker of a Clock.
type Ticker interface {
	// C delivers the ticks; like time.Ticker it drops ticks a slow receiver
	// misses.
	C() <-chan time.Time
	// Stop ends the ticks.
	Stop()
}

// RealClock is the wall clock (package time).
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After is time.After.
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTicker wraps time.NewTicker.
func (RealClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }
