package tbf

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// bucketNano is the number of internal nanotokens per token. The bucket keeps
// its level in nanotokens so that a refill is rate (tokens/s) times elapsed
// nanoseconds, one multiplication and no division, and stays exact for whole
// rates and times (2 tokens/s for 0.5 s is exactly 1 token).
const bucketNano = 1e9

// Bucket is a goroutine-safe token bucket: it holds up to Capacity tokens and
// refills at Rate tokens per second; AllowN and Wait take tokens out.
// What a token is (a byte, a packet, a request) is up to the caller; amounts
// may be fractional.
//
// Edge cases: a rate of 0 never refills; a rate of math.Inf(1) always allows
// and keeps the bucket full; a capacity of 0 allows nothing unless the rate
// is infinite; an infinite capacity never runs out once full. Capacities
// above ~1.8e299 tokens behave as infinite.
//
// At a constant, finite rate > 0 (no ramp), Allow and AllowN take no lock:
// they read the clock and update one atomic word (see bucket_fast.go, which
// proves that a stale reading cannot over-grant). During a ramp, at a rate
// of 0 or +Inf, above 2^35*1e9 (~3.4e19) tokens/s, and with a capacity
// above 2^60 (~1.15e18) tokens, everything runs under a mutex with the
// clock read inside the critical section. Either way concurrent callers are
// never granted more than capacity + rate*elapsed tokens (the over-grant of
// golang.org/x/time/rate, golang/go#65508, cannot happen here), and a clock
// reading earlier than a previous one is never worth more tokens than it.
// Lock-free mode counts in whole nanotokens up to a capacity of 2^60
// nanotokens (~1.15e9 tokens) and a rate of 2^35 (~3.4e10) tokens/s, and
// beyond them in the smallest power of ten of nanotokens that fits
// (microtokens at 1e12 tokens and 1e12 tokens/s): whole token amounts, and
// amounts with as many decimals as the unit has, and refill at whole rates
// in units are exact; other amounts round by less than one unit (against
// the caller, except a capacity that is not a whole number of units, which
// rounds up).
//
// The zero Bucket is not usable; create one with NewBucket.
type Bucket struct {
	// fast is the lock-free state at a constant rate (bucket_fast.go), nil
	// in locked mode. In lock-free mode tokens and last below are stale,
	// rate equals fast's rate, and inf and ramp are false.
	fast atomic.Pointer[bucketFast]

	mu       sync.Mutex
	clock    Clock   // nil: the default monotonic clock, read via clockNow
	capacity float64 // tokens
	capN     float64 // capacity in nanotokens
	tokens   float64 // level in nanotokens at last, in [0, capN]
	last     time.Duration
	rate     float64 // tokens/s at last (instantaneous during a ramp)
	inf      bool    // rate is +Inf: always allow, always full

	ramp      bool          // a linear ramp is in progress
	rampFrom  float64       // tokens/s at rampStart
	rampTo    float64       // tokens/s at and after rampEnd
	rampSlope float64       // (rampTo-rampFrom)/(rampEnd-rampStart), tokens/s per ns
	rampStart time.Duration // clock time the ramp began
	rampEnd   time.Duration // clock time the ramp ends

	// changed is closed and cleared when the rate changes, so waiters wake
	// and recompute; Wait creates it when it needs one.
	changed chan struct{}
}

// Option configures a Bucket in NewBucket.
type Option func(*Bucket)

// WithClock makes the bucket read time from c instead of the process's
// monotonic clock. A nil c keeps the default clock.
func WithClock(c Clock) Option {
	return func(b *Bucket) { b.clock = c }
}

// NewBucket returns a full bucket holding capacity tokens that refills at
// rate tokens per second.
//
// rate may be 0 (never refills) or math.Inf(1) (unlimited); capacity may be
// 0 (allows nothing unless the rate is infinite) or math.Inf(1). A negative
// or NaN rate or capacity is a programming error and panics.
func NewBucket(rate, capacity float64, opts ...Option) *Bucket {
	bucketCheckRate("NewBucket", rate)
	if capacity < 0 || math.IsNaN(capacity) {
		panic(fmt.Sprintf("tbf.NewBucket: capacity must be >= 0 tokens, got %v", capacity))
	}
	b := &Bucket{capacity: capacity, capN: capacity * bucketNano}
	for _, o := range opts {
		o(b)
	}
	b.tokens = b.capN
	b.last = b.now()
	b.rate = rate
	b.inf = math.IsInf(rate, 1)
	b.openFastLocked()
	return b
}

// bucketCheckRate panics when rate (tokens/s) is negative or NaN.
func bucketCheckRate(where string, rate float64) {
	if rate < 0 || math.IsNaN(rate) {
		panic(fmt.Sprintf("tbf.Bucket.%s: rate must be >= 0 tokens/s (math.Inf(1) for unlimited), got %v", where, rate))
	}
}

// now reads the bucket's clock.
func (b *Bucket) now() time.Duration {
	if b.clock == nil {
		return clockNow()
	}
	return b.clock.Now()
}

// advance refills the bucket up to now. A now earlier than the last reading
// is ignored. Call with b.mu held, in locked mode.
func (b *Bucket) advance(now time.Duration) {
	if now <= b.last {
		return
	}
	if b.ramp {
		b.advanceRamp(now)
		return
	}
	if b.tokens < b.capN { // a full bucket skips the math
		b.tokens = min(b.tokens+b.rate*float64(now-b.last), b.capN)
	}
	b.last = now
}

// Allow reports whether one token is available and takes it if so.
// It is AllowN(1).
func (b *Bucket) Allow() bool {
	if p := b.fast.Load(); p != nil {
		var now time.Duration // b.now(), by hand: it is too big to inline
		if b.clock == nil {
			now = clockNow()
		} else {
			now = b.clock.Now()
		}
		if t, ok := p.refill(now); ok {
			if short := p.take(t, p.cost1); short >= 0 {
				return short == 0
			}
		}
	}
	return b.allowLocked(1, bucketNano)
}

// AllowN takes n tokens and reports true when at least n are in the bucket;
// otherwise it takes nothing and reports false. n <= 0 always succeeds and
// takes nothing; n > Capacity, n = +Inf and n = NaN always fail unless the
// rate is infinite. It never blocks.
func (b *Bucket) AllowN(n float64) bool {
	if n <= 0 {
		return true
	}
	need := n * bucketNano
	if p := b.fast.Load(); p != nil {
		c, ok := p.cost(n, need)
		if !ok {
			return false // the rate was finite when p was loaded
		}
		var now time.Duration // b.now(), by hand
		if b.clock == nil {
			now = clockNow()
		} else {
			now = b.clock.Now()
		}
		if t, ok := p.refill(now); ok {
			if short := p.take(t, c); short >= 0 {
				return short == 0
			}
		}
	}
	return b.allowLocked(n, need)
}

// allowLocked is AllowN's path under b.mu (n tokens, need = n*bucketNano
// nanotokens): in locked mode, when the bucketFast was closed meanwhile, or
// when the reading is outside its span.
func (b *Bucket) allowLocked(n, need float64) bool {
	b.mu.Lock()
	now := b.now()
	if p, t := b.fastLocked(now); p != nil {
		c, ok := p.cost(n, need)
		ok = ok && p.take(t, c) == 0 // never closed: we hold b.mu
		b.mu.Unlock()
		return ok
	}
	b.advance(now)
	ok := b.inf || b.tokens >= need && need <= math.MaxFloat64 // not Inf - Inf
	if ok && !b.inf {
		b.tokens -= need
	}
	b.openFastLocked() // when a ramp has ended
	b.mu.Unlock()
	return ok
}

// Capacity returns the most tokens the bucket can hold.
func (b *Bucket) Capacity() float64 {
	return b.capacity // immutable after NewBucket
}

// Tokens returns the number of tokens in the bucket now, in [0, Capacity].
// With an infinite rate it is always Capacity.
func (b *Bucket) Tokens() float64 {
	b.mu.Lock()
	now := b.now()
	var t float64
	if p, u := b.fastLocked(now); p != nil {
		t = p.level(u, p.z.Load())
	} else {
		b.advance(now)
		t = b.tokens
		b.openFastLocked()
	}
	b.mu.Unlock()
	return t / bucketNano
}

// Drain empties the bucket and returns the number of tokens it removed.
// With an infinite rate the bucket refills at once: Drain returns Capacity
// and the bucket stays full.
func (b *Bucket) Drain() float64 {
	b.mu.Lock()
	now := b.now()
	var t float64
	if p, u := b.fastLocked(now); p != nil {
		t = p.drain(u)
	} else {
		b.advance(now)
		t = b.tokens
		if !b.inf {
			b.tokens = 0
		}
		b.openFastLocked()
	}
	b.mu.Unlock()
	return t / bucketNano
}
