package tbf

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Lock-free mode.
//
// While a Bucket's rate is constant, finite and > 0 (no ramp), its state is
// a bucketFast: one atomic int64 z, in whole units. A unit is a nanotoken
// (1e-9 token) unless the capacity or the rate is too large to count in
// nanotokens within 64 bits; then it is the smallest power of ten of
// nanotokens that fits (bucketFastScale: 1e-6 token at a capacity of 1e12
// tokens and 1e12 tokens/s), so extreme buckets stay lock-free and exact
// for whole tokens. Let
//
//	R(t) = floor(rate * (t - base))   units, t a clock reading in ns
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
// 2^60 tokens or a rate above 2^35*1e9 tokens/s (~3.4e19), which no unit
// fits, run under b.mu as before. So a caller holding a stale
// *bucketFast either CASes before the close (its grant is ordered before
// the change) or fails and retries under b.mu.
//
// Readings are usable within base ± span, span = 2^61/rate ns with rate in
// units/ns (at most 2^61 ns; 2.3 s at 1e9 tokens/s, never less than 2^26
// ns), so |R| <= 2^61, z stays within ±2^62 and no sum overflows; a reading
// past the span rebases (a new bucketFast, one small allocation) under
// b.mu, exactly at a whole rate in units (rebase). Rounding never grants
// extra beyond float noise: costs round up to whole units once lowered by
// 2^-50 of themselves (see cost; amounts with up to 9 decimals are exact
// in nanotokens, up to 6 in microtokens), R rounds down, levels moved into z round down; only a
// capacity that is not a whole number of units is rounded up, by less than
// one unit.

// bucketClosed is the value of a closed bucketFast's z: never a valid z.
const bucketClosed = math.MinInt64

const (
	bucketFastMaxR    = 1 << 61 // |R| within a span
	bucketFastMaxCapN = 1 << 60 // capacity in nanotokens at most
	bucketFastMinSpan = 1 << 26 // ns (67 ms): rebase at most ~15 times a second
)

// bucketFast is the lock-free state of a Bucket at a constant rate; see the
// comment above. All fields but z are immutable; z, tau, cost1, R and the
// rate count units of scale nanotokens.
type bucketFast struct {
	base     time.Duration // clock reading where R is 0
	span     time.Duration // readings must lie within base ± span
	scale    int64         // nanotokens per unit: a power of ten, 1 to 1e9
	perToken int64         // units per token: bucketNano/scale
	rateInt  int64         // rate when it is a whole number (exact R), else 0
	rate     float64       // units/ns (tokens/s when scale is 1); finite and > 0
	tau      int64         // capacity in units, rounded up
	cost1    int64         // one token in units; tau+1 (never) if above the capacity
	capN     float64       // capacity in nanotokens; finite

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

// bucketFastSpan returns the span for a capacity of capU units at rate
// units/ns, or false when they do not fit (see the comment above).
func bucketFastSpan(capU, rate float64) (time.Duration, bool) {
	span := min(bucketFastMaxR/rate, bucketFastMaxR) // rate > 0: never NaN
	if !(capU <= bucketFastMaxCapN) || span < bucketFastMinSpan {
		return 0, false
	}
	return time.Duration(span), true
}

// bucketFastScale returns the unit (nanotokens per unit: the smallest power
// of ten from 1 to 1e9 that fits) and the span for a capacity of capN
// nanotokens at rate nanotokens/ns (tokens/s), or false when even whole
// tokens do not fit and the bucket cannot run lock-free.
func bucketFastScale(capN, rate float64) (scale int64, span time.Duration, ok bool) {
	for scale = 1; scale <= bucketNano; scale *= 10 {
		if span, ok = bucketFastSpan(capN/float64(scale), rate/float64(scale)); ok {
			return scale, span, true
		}
	}
	return 0, 0, false
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

// cost returns n tokens (need = n*bucketNano nanotokens) in units,
// rounded up, or false when need is more than the capacity, +Inf or NaN
// (never available at a finite rate). Whole numbers of tokens are counted
// in integers, exact at any size; others as x = n*perToken rounded up. A
// decimal amount (0.001 token) is not exact in binary, and x can come out
// a few ulps above the whole number of units it stands for, which rounding
// up would charge one unit too many; below 2^50 units x is first lowered
// by 2^-50 of itself (less than one unit), so amounts with as many
// decimals as the unit has cost exactly their units.
func (p *bucketFast) cost(n, need float64) (int64, bool) {
	if !(need <= p.capN) { // also NaN; +Inf > capN, which is finite
		return 0, false
	}
	if w := int64(n); float64(w) == n && w <= p.tau/p.perToken {
		return w * p.perToken, true
	}
	x := n * float64(p.perToken)
	if x < 0x1p50 {
		x -= x * 0x1p-50
	}
	return min(bucketCeilInt(x), p.tau), true // <= tau but for rounding
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
	return min(float64(r-z)*float64(p.scale), p.capN)
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
	scale, span, ok := bucketFastScale(b.capN, b.rate)
	if !ok {
		return
	}
	s := float64(scale)
	p := &bucketFast{
		base:     b.last,
		span:     span,
		scale:    scale,
		perToken: bucketNano / scale,
		rate:     b.rate / s,
		tau:      bucketCeilInt(b.capN / s),
		capN:     b.capN,
	}
	// A whole capacity in integers: capN can be inexact above 2^53.
	if w := int64(b.capacity); float64(w) == b.capacity && w <= bucketFastMaxCapN/p.perToken {
		p.tau = w * p.perToken
	}
	if r := int64(p.rate); float64(r) == p.rate {
		p.rateInt = r
	}
	p.cost1 = p.tau + 1
	if bucketNano <= b.capN {
		p.cost1 = p.perToken
	}
	if b.tokens >= b.capN {
		p.z.Store(-p.tau) // full is full, whatever the rounding
	} else {
		p.z.Store(-bucketFloorInt(max(b.tokens, 0) / s))
	}
	b.fast.Store(p)
}

// closeFastLocked ends lock-free mode at reading now: it closes p, the
// current bucketFast, so that no Allow can take from it any more, and moves
// its level into b.tokens and b.last. Call with b.mu held.
func (b *Bucket) closeFastLocked(p *bucketFast, now time.Duration) {
	z := p.z.Swap(bucketClosed)
	b.fast.Store(nil)
	var d float64 // R(now) - z, in nanotokens
	if r, ok := p.refill(now); ok {
		d = float64(r-z) * float64(p.scale)
	} else {
		d = (math.Floor(float64(now-p.base)*p.rate) - float64(z)) * float64(p.scale)
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
		if q := p.rebase(now); q != nil {
			b.fast.Store(q)
			p = q
		} else {
			b.closeFastLocked(p, now)
			b.openFastLocked()
			if p = b.fast.Load(); p == nil { // cannot happen: same parameters
				return nil, 0
			}
		}
	}
	r, ok := p.refill(now)
	if !ok {
		r, _ = p.refill(p.base - p.span)
	}
	return p, r
}

// rebase closes p and returns its successor with base now, the same level
// counted exactly in integers: R'(t) = R(t) - R(now) at a whole rate, so
// z' = z - R(now) (at most a full bucket). It returns nil, leaving p open,
// at a rate that is not whole in units (the caller goes through
// closeFastLocked). Call with b.mu held, now after p's span.
func (p *bucketFast) rebase(now time.Duration) *bucketFast {
	if p.rateInt == 0 {
		return nil
	}
	q := &bucketFast{base: now, span: p.span, scale: p.scale, perToken: p.perToken,
		rateInt: p.rateInt, rate: p.rate, tau: p.tau, cost1: p.cost1, capN: p.capN}
	z := p.z.Swap(bucketClosed)
	hi, r := bits.Mul64(uint64(now-p.base), uint64(p.rateInt)) // now > base
	if hi != 0 || r > bucketFastMaxR*2 || z < int64(r)-p.tau {
		q.z.Store(-q.tau) // full
	} else {
		q.z.Store(z - int64(r)) // z <= 2^62, r <= 2^62: no overflow
	}
	return q
}
