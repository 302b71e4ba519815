package tbf

import (
	"math"
	"sync/atomic"
	"time"
)

// Lock-free mode.
//
// While a Bucket's rate is constant, finite and > 0 (no ramp), its state is
// a bucketFast: one atomic int64 z, in whole nanotokens. Let
//
//	R(t) = floor(rate * (t - base))   nanotokens, t a clock reading in ns
//
// be the refill since base, a non-decreasing function of the reading, exact
// for whole rates. The level at reading t is min(R(t) - z, capacity), and 0
// when R(t) <= z: z is the refill mark at which the bucket was (or will be)
// empty. Taking c nanotokens at reading t sets z to max(z, R(t)-tau) + c if
// that is <= R(t) (else the tokens are short), with tau the capacity; this
// is GCRA's "theoretical arrival time" minus tau, counted in refill rather
// than time so that token amounts and whole rates stay exact. Allow reads
// the clock, then CAS-es z: no lock.
//
// Why a reading taken before the CAS can never over-grant, however stale it
// is by the time of the CAS and however the readings and CASes of
// concurrent callers interleave: z only grows (a take raises it by at least
// its cost c, a drain raises it or leaves it), and a take succeeds only if
// the z it writes is <= R(s), s its own reading. Take any set S of
// successful takes whose readings lie in a window [a, b]; let j be the first
// of them to CAS and k the last. j wrote z >= R(s_j) - tau + c_j, every
// later CAS raised z by at least its own cost, so k wrote
// z >= R(s_j) - tau + (sum of c over S), and that z was <= R(s_k). Hence
// sum of c over S <= tau + R(s_k) - R(s_j) <= tau + R(b) - R(a): the tokens
// granted to readings in any window never exceed the capacity plus the
// refill over the window, however the calls interleave. A stale reading
// only makes R(t) smaller, which is fewer tokens and a harder condition; it
// never moves z backwards, which is what over-grants in
// golang.org/x/time/rate (golang/go#65508: the limiter's time moves back, so
// refill is counted twice). A reading earlier than another caller's is just
// worth fewer tokens. The same holds across mode changes: closing converts z
// into the level at one reading (b.tokens at b.last) on the same refill
// line, and the locked mode counts refill only after b.last.
//
// A bucketFast never changes its rate, capacity or base: anything that
// would (SetRate, SetRateSmooth, Ramp, a reading too far after base) closes
// it under b.mu by swapping z to bucketClosed, after which no CAS on it can
// succeed (every caller checks for bucketClosed before its CAS and the value
// never changes again), converts z into the locked fields, and publishes a
// new bucketFast, or none: a ramp, a rate of 0 or +Inf, a capacity above
// 2^60 nanotokens (~1.15e9 tokens) or a rate above 2^35 tokens/s
// (~3.4e10) run under b.mu as before. So a caller holding a stale
// *bucketFast either CASes before the close (its grant is ordered before
// the change) or fails and retries under b.mu.
//
// Readings are usable within base ± span, span = 2^61/rate ns (at most 2^61
// ns; 2.3 s at 1e9 tokens/s, never less than 2^26 ns), so |R| <= 2^61, z
// stays within ±2^62 and no sum overflows; a reading past the span rebases
// (a new bucketFast, one small allocation) under b.mu. Rounding never
// grants extra: costs round up to whole nanotokens (amounts with up to 9
// decimals are exact), R rounds down, levels moved into z round down; only
// a capacity that is not a whole number of nanotokens is rounded up, by
// less than 1e-9 token.

// bucketClosed is the value of a closed bucketFast's z: never a valid z.
const bucketClosed = math.MinInt64

const (
	bucketFastMaxR    = 1 << 61 // |R| within a span
	bucketFastMaxCapN = 1 << 60 // capacity in nanotokens at most
	bucketFastMinSpan = 1 << 26 // ns (67 ms): rebase at most ~15 times a second
)

// bucketFast is the lock-free state of a Bucket at a constant rate; see the
// comment above. All fields but z are immutable.
type bucketFast struct {
	base    time.Duration // clock reading where R is 0
	span    time.Duration // readings must lie within base ± span
	rateInt int64         // rate when it is a whole number (exact R), else 0
	rate    float64       // tokens/s, i.e. nanotokens/ns; finite and > 0
	tau     int64         // capacity in nanotokens, rounded up
	cost1   int64         // one token in nanotokens; tau+1 (never) if above the capacity
	capN    float64       // capacity in nanotokens; finite

	// z is alone on its cache line (64 bytes on amd64 and arm64), with
	// 64 bytes on either side whatever the allocation's alignment: every
	// take writes it, and when it shared a line with the fields above each
	// concurrent caller's read of them missed too (false sharing). Measured
	// with scripts/bench-limiter.sh on the project's 2-core VM, parallel
	// shaperd/xrate 0.52 -> 0.47 (median of 7 paired rounds); serial
	// unchanged (0.41).
	_ [64]byte
	z atomic.Int64 // refill mark of the empty bucket, nanotokens; bucketClosed once closed
	_ [56]byte
}

// bucketFastSpan returns the span for rate tokens/s, or false when the
// bucket cannot run lock-free (see the comment above).
func bucketFastSpan(capN, rate float64) (time.Duration, bool) {
	span := min(bucketFastMaxR/rate, bucketFastMaxR) // rate > 0: never NaN
	if !(capN <= bucketFastMaxCapN) || span < bucketFastMinSpan {
		return 0, false
	}
	return time.Duration(span), true
}

// bucketCeilInt rounds x (|x| < 2^62, not NaN) up to an int64.
func bucketCeilInt(x float64) int64 {
	c := int64(x) // towards 0
	if float64(c) < x {
		c++
	}
	return c
}

// bucketFloorInt rounds x (|x| < 2^62, not NaN) down to an int64.
func bucketFloorInt(x float64) int64 {
	c := int64(x) // towards 0
	if float64(c) > x {
		c--
	}
	return c
}

// cost returns need nanotokens rounded up, or false when need is more than
// the capacity, +Inf or NaN (never available at a finite rate).
func (p *bucketFast) cost(need float64) (int64, bool) {
	if !(need <= p.capN) { // also NaN; +Inf > capN, which is finite
		return 0, false
	}
	return bucketCeilInt(need), true // <= tau
}

// refill returns R(now), or false when now lies outside base ± span.
func (p *bucketFast) refill(now time.Duration) (int64, bool) {
	d := now - p.base
	if d > p.span || d < -p.span {
		return 0, false
	}
	if p.rateInt != 0 {
		return int64(d) * p.rateInt, true
	}
	return bucketFloorInt(float64(d) * p.rate), true
}

// take takes c nanotokens at refill mark r = R(reading). It returns 0 when
// it took them, the number of nanotokens they are short by (> 0) when it
// did not, and -1 when p is closed (the caller must retry under b.mu).
func (p *bucketFast) take(r, c int64) int64 {
	for {
		z := p.z.Load()
		if z == bucketClosed {
			return -1
		}
		z1 := max(z, r-p.tau) + c
		if z1 > r {
			return z1 - r
		}
		if p.z.CompareAndSwap(z, z1) {
			return 0
		}
	}
}

// level returns the nanotokens in the bucket at refill mark r given z.
func (p *bucketFast) level(r, z int64) float64 {
	if r <= z {
		return 0
	}
	return min(float64(r-z), p.capN)
}

// drain empties the bucket at refill mark r and returns the nanotokens it
// removed. Call with b.mu held (p is not closed).
func (p *bucketFast) drain(r int64) float64 {
	for {
		z := p.z.Load()
		if p.z.CompareAndSwap(z, max(z, r)) {
			return p.level(r, z)
		}
	}
}

// openFastLocked switches the bucket to lock-free mode when it is eligible
// (no ramp, a finite rate > 0 and not too large, a capacity that fits),
// starting from b.tokens at b.last. It does nothing in lock-free mode. Call
// with b.mu held; b.tokens and b.last are stale afterwards.
func (b *Bucket) openFastLocked() {
	if b.ramp || b.inf || !(b.rate > 0) || b.fast.Load() != nil {
		return
	}
	span, ok := bucketFastSpan(b.capN, b.rate)
	if !ok {
		return
	}
	p := &bucketFast{
		base: b.last,
		span: span,
		rate: b.rate,
		tau:  bucketCeilInt(b.capN),
		capN: b.capN,
	}
	if r := int64(b.rate); float64(r) == b.rate {
		p.rateInt = r
	}
	p.cost1 = p.tau + 1
	if bucketNano <= b.capN {
		p.cost1 = bucketNano
	}
	if b.tokens >= b.capN {
		p.z.Store(-p.tau) // full is full, whatever the rounding
	} else {
		p.z.Store(-bucketFloorInt(max(b.tokens, 0)))
	}
	b.fast.Store(p)
}

// closeFastLocked ends lock-free mode at reading now: it closes p, the
// current bucketFast, so that no Allow can take from it any more, and moves
// its level into b.tokens and b.last. Call with b.mu held.
func (b *Bucket) closeFastLocked(p *bucketFast, now time.Duration) {
	z := p.z.Swap(bucketClosed)
	b.fast.Store(nil)
	var d float64 // R(now) - z
	if r, ok := p.refill(now); ok {
		d = float64(r - z)
	} else {
		d = math.Floor(float64(now-p.base)*p.rate) - float64(z)
	}
	b.tokens, b.last = max(min(d, b.capN), 0), now
	if d < 0 { // empty until R reaches z (a stale or earlier reading)
		// Refill counts from there, rounded up. z <= the largest R seen, so
		// z/rate ns after base is within the span: no overflow.
		var ns time.Duration
		if p.rateInt != 0 {
			ns = time.Duration(z / p.rateInt) // towards 0
			if ns*time.Duration(p.rateInt) < time.Duration(z) {
				ns++
			}
		} else {
			ns = time.Duration(math.Ceil(float64(z)/p.rate)) + 1 // +1: the division rounds
		}
		b.last = max(now, p.base+ns)
	}
}

// fastLocked returns the current bucketFast and R(now), rebasing it first
// when now is too far after its base, or nil in locked mode. A reading too
// far before the base counts as base - span (fewer tokens than any later
// reading). Call with b.mu held.
func (b *Bucket) fastLocked(now time.Duration) (*bucketFast, int64) {
	p := b.fast.Load()
	if p == nil {
		return nil, 0
	}
	if now-p.base > p.span {
		b.closeFastLocked(p, now)
		b.openFastLocked()
		if p = b.fast.Load(); p == nil { // cannot happen: same parameters
			return nil, 0
		}
	}
	r, ok := p.refill(now)
	if !ok {
		r, _ = p.refill(p.base - p.span)
	}
	return p, r
}
