package tbf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Errors returned by Bucket.Wait (wrapped with the amounts involved).
var (
	// ErrBucketCapacity means more tokens were asked for than the bucket can
	// hold (or +Inf or NaN tokens), so they can never be there at once.
	ErrBucketCapacity = errors.New("more tokens than the bucket's capacity")
	// ErrBucketNoRefill means the tokens are short and the rate is 0 (or
	// ramps to 0 before enough come), so they never would.
	ErrBucketNoRefill = errors.New("bucket does not refill enough (rate 0)")
	// ErrBucketDeadline means the context's deadline comes before the tokens
	// would; Wait returns it at once instead of sleeping in vain.
	ErrBucketDeadline = errors.New("tokens would not come before the context deadline")
)

// Wait blocks until n tokens are in the bucket and takes them, or fails.
// n <= 0 returns nil at once (unless ctx is already done).
//
// It returns an error at once when ctx is already done (ctx.Err()), when
// n > Capacity, n = +Inf or n is NaN and the rate is finite
// (ErrBucketCapacity), when the tokens are
// short and the rate is 0, or ramps to 0 before enough have come
// (ErrBucketNoRefill), or when ctx's deadline comes before the tokens would
// (ErrBucketDeadline; only when the Clock has Until, as the default one does).
// It returns ctx.Err() when ctx ends while waiting.
//
// The time to sleep is exact: at a constant rate r it is deficit/r; during a
// ramp it solves the ramp's integral r*t + k*t²/2 = deficit for t (k the
// ramp's slope), or, when the ramp ends first, adds the rest at the final
// rate. Wait sleeps on the Clock's After when it has one (else a real timer),
// wakes early when SetRate, SetRateSmooth or Ramp changes the rate, and then
// re-checks the bucket under its lock, so it never takes tokens that are not
// there. Waiters hold no reservation: Allow, AllowN or other waiters may take
// the tokens first (no FIFO order), and the waiter then sleeps again.
// Wait starts no goroutine.
func (b *Bucket) Wait(ctx context.Context, n float64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n <= 0 {
		return nil
	}
	need := n * bucketNano
	var timer *time.Timer // real timer, made on first use
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.mu.Lock()
		d, err := b.waitStepLocked(n, need)
		if d == 0 || err != nil {
			b.mu.Unlock()
			return err
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed, clock := b.changed, b.clock
		b.mu.Unlock()

		if deadline, ok := ctx.Deadline(); ok {
			var left time.Duration
			switch c := clock.(type) {
			case nil:
				left = clockDefaultUntil(deadline)
			case clockUntil:
				left = c.Until(deadline)
			default:
				ok = false
			}
			if ok && left < d {
				return fmt.Errorf("tbf: wait for %g tokens takes %v, context deadline in %v: %w", n, d, left, ErrBucketDeadline)
			}
		}

		var wake <-chan time.Time
		if a, ok := clock.(clockAfter); ok {
			wake = a.After(d)
		} else {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d) // Go >= 1.23: no stale value after Stop/Reset
			}
			wake = timer.C
		}
		select {
		case <-wake:
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitStepLocked takes need nanotokens (n tokens) if they are there and
// returns 0, or returns how long to sleep before trying again, or an error
// when they will never come. Call with b.mu held.
func (b *Bucket) waitStepLocked(n, need float64) (time.Duration, error) {
	now := b.now()
	if p, t := b.fastLocked(now); p != nil {
		c, ok := p.cost(n, need)
		if !ok {
			return 0, fmt.Errorf("tbf: wait for %g tokens: %w (capacity %g tokens)", n, ErrBucketCapacity, b.capacity)
		}
		short := p.take(t, c) // never closed: we hold b.mu
		if short == 0 {
			return 0, nil
		}
		return bucketCeilDuration(float64(short) / p.rate), nil
	}
	b.advance(now)
	defer b.openFastLocked() // when a ramp has ended
	if b.inf {
		return 0, nil
	}
	if !(need <= b.capN) || math.IsInf(need, 1) { // also NaN
		return 0, fmt.Errorf("tbf: wait for %g tokens: %w (capacity %g tokens)", n, ErrBucketCapacity, b.capacity)
	}
	if b.tokens >= need {
		b.tokens -= need
		return 0, nil
	}
	d, ok := b.waitTimeLocked(need - b.tokens)
	if !ok {
		return 0, fmt.Errorf("tbf: wait for %g tokens: %w (have %g tokens, rate %g tokens/s)", n, ErrBucketNoRefill, b.tokens/bucketNano, b.rate)
	}
	return d, nil
}

// waitTimeLocked returns how long after b.last the bucket will have gained
// deficit nanotokens (> 0), rounded up to a whole nanosecond, or false when
// that never happens. Call with b.mu held, after advance.
func (b *Bucket) waitTimeLocked(deficit float64) (time.Duration, bool) {
	if !b.ramp {
		if b.rate <= 0 {
			return 0, false
		}
		return bucketCeilDuration(deficit / b.rate), true
	}
	// Rate r + k*t during the ramp's remaining span R (ns); it gains
	// r*t + k*t²/2 nanotokens by time t.
	r, k := b.rate, b.rampSlope
	span := float64(b.rampEnd - b.last)
	gain := (r + b.rampTo) / 2 * span
	if gain >= deficit {
		// The positive root of k/2*t² + r*t - deficit = 0 in the form
		// 2*deficit / (r + sqrt(r² + 2k*deficit)), which is stable for k of
		// either sign and for k -> 0. The rate stays >= 0 over the ramp, so
		// the root lies in [0, span] and the discriminant is >= 0 (up to
		// rounding, hence the clamp).
		den := r + math.Sqrt(max(r*r+2*k*deficit, 0))
		if den <= 0 {
			return 0, false
		}
		return bucketCeilDuration(min(2*deficit/den, span)), true
	}
	if b.rampTo <= 0 {
		return 0, false
	}
	return bucketCeilDuration(span + (deficit-gain)/b.rampTo), true
}

// bucketCeilDuration rounds ns (> 0) up to a Duration of at least 1 ns,
// saturating at the largest Duration.
func bucketCeilDuration(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(time.Duration(math.Ceil(ns)), 1)
}
