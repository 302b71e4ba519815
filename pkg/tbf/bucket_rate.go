package tbf

import (
	"math"
	"time"
)

// SetRate changes the fill rate to rate tokens/s at once. It first refills
// the bucket at the old rate up to now, then scales the tokens by new/old
// rate (so the bucket holds the same time's worth of sending), clamped to
// [0, Capacity], and ends any ramp (the old rate is the ramp's instantaneous
// rate).
//
// Edge cases: from a rate of 0 or an infinite rate there is nothing to scale
// by and the tokens stay; to a rate of 0 (from a finite one) the bucket
// empties; to an infinite rate the bucket is full. A negative or NaN rate
// panics. Waiters in Wait wake and recompute.
func (b *Bucket) SetRate(rate float64) {
	bucketCheckRate("SetRate", rate)
	b.mu.Lock()
	b.syncLocked(b.now())
	b.setRateLocked(rate)
	b.openFastLocked()
	b.mu.Unlock()
}

// SetRateSmooth is SetRate followed, when the rate decreases, by a cap of
// rate*window tokens: after a cut the bucket keeps at most window's worth of
// burst at the new rate (a window <= 0 empties it). An increase is exactly
// SetRate and is not capped.
func (b *Bucket) SetRateSmooth(rate float64, window time.Duration) {
	bucketCheckRate("SetRateSmooth", rate)
	b.mu.Lock()
	b.syncLocked(b.now())
	old := b.rate
	b.setRateLocked(rate)
	if rate < old {
		limit := rate * float64(max(window, 0)) // tokens/s * ns = nanotokens
		if b.tokens > limit {
			b.tokens = limit
		}
	}
	b.openFastLocked()
	b.mu.Unlock()
}

// syncLocked brings the bucket up to now in locked mode: it leaves
// lock-free mode (closing the bucketFast at now) or advances. Call with b.mu
// held; the caller reopens lock-free mode with openFastLocked if it can.
func (b *Bucket) syncLocked(now time.Duration) {
	if p := b.fast.Load(); p != nil {
		b.closeFastLocked(p, now)
		return
	}
	b.advance(now)
}

// setRateLocked rescales the tokens and sets rate (tokens/s). The bucket must
// have been synced to now. Call with b.mu held.
func (b *Bucket) setRateLocked(rate float64) {
	old := b.rate
	if old > 0 && !math.IsInf(old, 1) {
		switch {
		case math.IsInf(rate, 1):
			b.tokens = b.capN
		case rate == 0:
			b.tokens = 0 // also when tokens is +Inf, where Inf*0 is NaN
		default:
			b.tokens *= rate / old
		}
	}
	b.tokens = min(max(b.tokens, 0), b.capN)
	b.jumpLocked(rate)
}

// jumpLocked sets the rate without touching the tokens (except that an
// infinite rate fills the bucket), ends any ramp and wakes waiters.
// Call with b.mu held, in locked mode.
func (b *Bucket) jumpLocked(rate float64) {
	b.rate = rate
	b.inf = math.IsInf(rate, 1)
	if b.inf {
		b.tokens = b.capN
	}
	b.ramp = false
	b.notifyLocked()
}

// notifyLocked wakes the goroutines blocked in Wait. Call with b.mu held.
func (b *Bucket) notifyLocked() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// Ramp moves the fill rate linearly from the current (instantaneous) rate
// to `to` tokens/s over the duration `over`; afterwards the rate stays at
// `to`. Tokens accrue at the instantaneous rate, i.e. by the integral of the
// ramp; the current tokens are not rescaled. The ramp is pure arithmetic on
// clock readings: no goroutine or timer runs. A later SetRate, SetRateSmooth
// or Ramp starts from the instantaneous rate and replaces the ramp.
//
// Edge cases: over <= 0, or an infinite rate at either end, changes the rate
// to `to` at once (still without rescaling the tokens; an infinite rate fills
// the bucket). A negative or NaN `to` panics. Waiters in Wait wake and
// recompute.
func (b *Bucket) Ramp(to float64, over time.Duration) {
	bucketCheckRate("Ramp", to)
	b.mu.Lock()
	b.syncLocked(b.now())
	from := b.rate
	if over <= 0 || from == to || math.IsInf(from, 1) || math.IsInf(to, 1) {
		b.jumpLocked(to)
		b.openFastLocked()
		b.mu.Unlock()
		return
	}
	b.ramp = true
	b.rampFrom, b.rampTo = from, to
	b.rampStart = b.last
	if b.last > math.MaxInt64-over {
		b.rampEnd = math.MaxInt64
	} else {
		b.rampEnd = b.last + over
	}
	b.rampSlope = (to - from) / float64(b.rampEnd-b.rampStart)
	b.notifyLocked()
	b.mu.Unlock()
}

// rampRateAt returns the ramp's rate (tokens/s) at clock time t in
// [rampStart, rampEnd]. Call with b.mu held during a ramp.
func (b *Bucket) rampRateAt(t time.Duration) float64 {
	if t >= b.rampEnd {
		return b.rampTo
	}
	return max(b.rampFrom+b.rampSlope*float64(t-b.rampStart), 0)
}

// advanceRamp refills the bucket up to now (> b.last) during a ramp, by the
// exact integral of the linear rate (the trapezoid rule is exact for a
// linear function), and ends the ramp once now reaches its end. Tokens only
// grow while refilling, so clamping to capacity at the end is exact.
// Call with b.mu held.
func (b *Bucket) advanceRamp(now time.Duration) {
	if m := min(now, b.rampEnd); m > b.last {
		r := b.rampRateAt(m)
		b.tokens += (b.rate + r) / 2 * float64(m-b.last)
		b.rate = r
		b.last = m
	}
	if now >= b.rampEnd {
		b.ramp = false
		b.rate = b.rampTo
		b.tokens += b.rate * float64(now-b.last)
		b.last = now
	}
	if b.tokens > b.capN {
		b.tokens = b.capN
	}
}

// Rate returns the fill rate in tokens/s now: during a ramp, the
// instantaneous rate.
func (b *Bucket) Rate() float64 {
	b.mu.Lock()
	if b.fast.Load() == nil {
		b.advance(b.now())
		b.openFastLocked() // when a ramp has ended
	}
	r := b.rate // in lock-free mode the constant rate
	b.mu.Unlock()
	return r
}
