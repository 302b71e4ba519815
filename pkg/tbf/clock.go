package tbf

import "time"

// Clock is the time source of a [Bucket].
//
// Now returns monotonic time elapsed since a fixed, arbitrary origin; it must
// never go backwards. A misbehaving clock still never grants extra tokens: a
// reading earlier than a previous one is never worth more tokens than that
// one (in locked mode it counts as equal to it; in lock-free mode it counts
// as itself on the same refill line, which is fewer or as many). Now may be
// called concurrently and, in lock-free mode, outside the Bucket's lock.
//
// A Clock may also implement optional methods that [Bucket.Wait] uses:
//
//	After(d time.Duration) <-chan time.Time // sleep d on this clock
//	Until(t time.Time) time.Duration        // wall-clock deadline -> time left on this clock
//
// Without After, Wait sleeps on a real timer; without Until, Wait does not
// fail early when a context deadline comes before the tokens would and just
// waits for the context to end. The default clock (the process's monotonic
// clock, used when no WithClock is given) sleeps on a real timer and
// compares deadlines with time.Until.
type Clock interface {
	Now() time.Duration
}

// clockAfter is the optional sleeping half of a Clock.
type clockAfter interface {
	After(d time.Duration) <-chan time.Time
}

// clockUntil is the optional deadline half of a Clock.
type clockUntil interface {
	Until(t time.Time) time.Duration
}

// clockOrigin is the origin of the default clock. It carries a monotonic
// reading, so time.Since(clockOrigin) reads only the runtime's monotonic
// clock (runtime.nanotime), not the wall clock as time.Now does. The Go
// runtime documents this as "equally fast" as a go:linkname'd
// runtime.nanotime (in runtime/time_nofake.go), and it is
// what we measured on the project machine (kvm-clock): ~31 ns for
// time.Since vs ~30 ns for runtime.nanotime vs ~58 ns for time.Now
// (BenchmarkClock). So no linkname: it would buy ~1 ns and break
// testing/synctest, whose fake time time.Since honours.
var clockOrigin = time.Now()

// clockNow reads the default clock: monotonic time since clockOrigin.
// Bucket calls it directly (not through the Clock interface) so that it is
// inlined on the hot path.
func clockNow() time.Duration { return time.Since(clockOrigin) }

// clockDefaultUntil is Until for the default clock: the time left until the
// wall-clock instant t (negative once passed).
func clockDefaultUntil(t time.Time) time.Duration { return time.Until(t) }
