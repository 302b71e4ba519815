package tbf

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// fastTestClock is a hand-driven Clock for the white-box tests.
type fastTestClock struct{ now atomic.Int64 }

func (c *fastTestClock) Now() time.Duration      { return time.Duration(c.now.Load()) }
func (c *fastTestClock) advance(d time.Duration) { c.now.Add(int64(d)) }
func newFastTestBucket(rate, capacity float64) (*Bucket, *fastTestClock) {
	c := &fastTestClock{}
	c.now.Store(int64(time.Hour))
	return NewBucket(rate, capacity, WithClock(c)), c
}

func wantFast(t *testing.T, b *Bucket, step string, want bool) *bucketFast {
	t.Helper()
	p := b.fast.Load()
	if (p != nil) != want {
		t.Fatalf("%s: lock-free mode = %v, want %v", step, p != nil, want)
	}
	return p
}

func TestBucketFastModeFollowsTheRate(t *testing.T) {
	b, c := newFastTestBucket(10, 20)
	p := wantFast(t, b, "NewBucket at a constant rate", true)
	b.Ramp(2, time.Second)
	wantFast(t, b, "during a ramp", false)
	if p.z.Load() != bucketClosed {
		t.Fatal("the old bucketFast was not closed by Ramp")
	}
	c.advance(500 * time.Millisecond)
	b.Allow()
	wantFast(t, b, "half-way through the ramp", false)
	c.advance(time.Second)
	b.Allow() // ends the ramp
	wantFast(t, b, "after the ramp", true)
	b.SetRate(0)
	wantFast(t, b, "rate 0", false)
	b.SetRate(math.Inf(1))
	wantFast(t, b, "infinite rate", false)
	b.SetRate(5)
	wantFast(t, b, "back to a finite rate", true)
	b.Ramp(6, 0)
	wantFast(t, b, "after a jump", true)

	for _, tc := range []struct {
		rate, capacity float64
	}{
		{1, math.Inf(1)}, // infinite capacity
		{1, 2e18},        // more than 2^60 tokens: no unit fits
		{1e20, 1e6},      // span 2^61/1e11 ns in whole tokens: shorter than 2^26 ns
	} {
		b, _ := newFastTestBucket(tc.rate, tc.capacity)
		wantFast(t, b, "an ineligible bucket", false)
		if !b.Allow() {
			t.Fatalf("rate %v capacity %v: Allow on a full bucket failed", tc.rate, tc.capacity)
		}
	}
}

func TestBucketFastSpanFollowsTheRate(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		span time.Duration // 0: not eligible
	}{
		{1e9, 2_305_843_009}, // 2^61/1e9 ns: 2.3 s
		{1 << 35, 1 << 26},   // the largest rate
		{1<<35 + 1, 0},
		{0.5, 1 << 61}, // capped: no overflow of the reading's offset
		{1e-300, 1 << 61},
	} {
		span, ok := bucketFastSpan(1e9, tc.rate)
		if ok != (tc.span != 0) || span != tc.span {
			t.Fatalf("rate %v: span %v (eligible %v), want %v", tc.rate, span, ok, tc.span)
		}
		if ok && float64(span)*tc.rate > bucketFastMaxR {
			t.Fatalf("rate %v: R over the span %v overflows 2^61", tc.rate, span)
		}
	}
	if _, ok := bucketFastSpan(bucketFastMaxCapN+1e6, 1); ok {
		t.Fatal("a capacity above 2^60 nanotokens is eligible")
	}
}

func TestBucketFastStaleStateRetriesLocked(t *testing.T) {
	b, c := newFastTestBucket(10, 20)
	stale := b.fast.Load()
	b.SetRate(1) // closes stale; 20 tokens scale to 2
	if short := stale.take(0, stale.cost1); short != -1 {
		t.Fatalf("take on a closed bucketFast = %d, want -1", short)
	}
	if !b.AllowN(2) || b.Allow() {
		t.Fatal("after SetRate(1) a full bucket of 20 must hold exactly 2 tokens")
	}
	c.advance(time.Second)
	if !b.Allow() || b.Allow() {
		t.Fatal("1 s at 1 token/s must give exactly 1 token")
	}
}

func TestBucketFastRebasesBeyondTheSpan(t *testing.T) {
	b, c := newFastTestBucket(1e9, 1e9) // span 2.3 s, 1 s of burst
	p := wantFast(t, b, "start", true)
	c.advance(p.span - 250*time.Millisecond)
	b.Drain()
	c.advance(500 * time.Millisecond) // 0.25 s past the span
	bucketFastNear(t, "Tokens 0.25 s past the span", b.Tokens(), 5e8)
	q := wantFast(t, b, "after the span", true)
	if q == p || q.base <= p.base || p.z.Load() != bucketClosed {
		t.Fatal("a reading past the span did not rebase to a new bucketFast")
	}
	if !b.AllowN(5e8) || b.AllowN(1e-3) {
		t.Fatal("want exactly 5e8 tokens after the rebase")
	}
	c.advance(q.span + time.Second)
	if !b.AllowN(1e9) || b.AllowN(1e-3) { // the fast path falls back to the lock and rebases
		t.Fatal("want exactly a full bucket after a second span")
	}
	if r := b.fast.Load(); r == q || r == nil {
		t.Fatal("AllowN past the span did not rebase")
	}
}

func TestBucketFastClockBackwardsNeverGivesMore(t *testing.T) {
	b, c := newFastTestBucket(10, 100)
	b.AllowN(60) // 40 left
	c.advance(time.Second)
	bucketFastNear(t, "Tokens after 1 s", b.Tokens(), 50)
	c.advance(-3 * time.Second) // a misbehaving clock
	if got := b.Tokens(); got > 50 {
		t.Fatalf("Tokens at an earlier reading = %v, more than the 50 at the later one", got)
	}
	if b.AllowN(50.5) {
		t.Fatal("AllowN(50.5) succeeded after the clock went back")
	}
	// Far before the base (beyond the span): still no more tokens.
	c.advance(-2 * b.fast.Load().span)
	if b.AllowN(50.5) || b.Tokens() > 50 {
		t.Fatal("a reading far in the past gave more tokens")
	}
	b.SetRate(10) // closes and reopens at the earlier reading
	c.now.Store(int64(time.Hour + time.Second))
	if got := b.Tokens(); got > 50 {
		t.Fatalf("Tokens back at the latest reading = %v, more than 50", got)
	}
}

func TestBucketFastDrainAtAnEarlierReading(t *testing.T) {
	b, c := newFastTestBucket(10, 100)
	b.Drain()
	c.advance(-time.Second) // a misbehaving clock
	if got := b.Drain(); got != 0 {
		t.Fatalf("Drain at an earlier reading of an empty bucket = %v, want 0", got)
	}
	c.advance(time.Second)
	if got := b.Tokens(); got != 0 {
		t.Fatalf("Tokens back at the latest reading = %v, want 0", got)
	}
}

func TestBucketFastNonWholeRateToTheNanotoken(t *testing.T) {
	b, c := newFastTestBucket(2.5, 10)
	wantFast(t, b, "rate 2.5", true)
	b.Drain()
	c.advance(400 * time.Millisecond) // exactly 1 token
	if !b.Allow() || b.AllowN(1e-9) {
		t.Fatal("0.4 s at 2.5 tokens/s must give exactly one token")
	}
	c.advance(1) // 2.5 nanotokens: 2 whole ones
	if !b.AllowN(2e-9) || b.AllowN(1e-9) {
		t.Fatal("1 ns at 2.5 tokens/s must give 2 whole nanotokens")
	}
}

func bucketFastNear(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// TestBucketFastZAlone pins bucketFast's layout: z, which every take
// writes, shares no 64-byte cache line with the fields every Allow reads,
// nor with the next object, wherever the allocation starts.
func TestBucketFastZAlone(t *testing.T) {
	var p bucketFast
	readEnd := unsafe.Offsetof(p.capN) + unsafe.Sizeof(p.capN) // the read-only fields end here
	for name, off := range map[string]uintptr{"base": unsafe.Offsetof(p.base), "span": unsafe.Offsetof(p.span),
		"rateInt": unsafe.Offsetof(p.rateInt), "rate": unsafe.Offsetof(p.rate), "tau": unsafe.Offsetof(p.tau), "cost1": unsafe.Offsetof(p.cost1)} {
		if off >= readEnd {
			t.Errorf("%s at %d is after capN: the layout check assumes capN is the last read-only field", name, off)
		}
	}
	z := unsafe.Offsetof(p.z)
	if z < readEnd+64 {
		t.Errorf("z at byte %d, read-only fields end at %d: less than a cache line apart", z, readEnd)
	}
	if after := unsafe.Sizeof(p) - (z + unsafe.Sizeof(p.z)); after < 56 {
		t.Errorf("%d bytes after z: the next object may share its line", after)
	}
}

// Capacities and rates too large to count in nanotokens count in the
// smallest power of ten of them that fits, and stay exact for whole
// tokens.
func TestBucketFastScale(t *testing.T) {
	for _, tc := range []struct {
		rate, capacity float64
		scale          int64
	}{
		{1e9, 1e6, 1},
		{1, 2e9, 10},            // 2e18 nanotokens: above 2^60
		{1e11, 1e6, 10},         // 1e11 nanotokens/ns: above 2^35
		{1e12, 1e12, 1000},      // both: microtokens
		{1 << 35 * 1e9, 1, 1e9}, // whole tokens
	} {
		b, _ := newFastTestBucket(tc.rate, tc.capacity)
		p := wantFast(t, b, "a large bucket", true)
		if p.scale != tc.scale {
			t.Errorf("rate %g capacity %g: unit %d nanotokens, want %d", tc.rate, tc.capacity, p.scale, tc.scale)
		}
	}

	b, c := newFastTestBucket(1e12, 1e12)
	if !b.AllowN(1e12-1) || !b.Allow() || b.Allow() {
		t.Fatal("a full bucket of 1e12 tokens does not grant exactly 1e12")
	}
	c.advance(time.Nanosecond) // 1000 tokens
	if got := b.Tokens(); got != 1000 {
		t.Fatalf("after 1 ns at 1e12 tokens/s: %v tokens, want 1000", got)
	}
	if !b.AllowN(999.999999) || !b.AllowN(1e-6) || b.AllowN(1e-6) {
		t.Fatal("1000 tokens do not grant 999.999999 + 1e-6 tokens and nothing more")
	}
	c.advance(time.Nanosecond)
	if b.AllowN(1000.0000001) || !b.AllowN(1000) {
		t.Fatal("1000 tokens grant more than 1000 (a cost rounded down) or not 1000")
	}
	wantFast(t, b, "after the takes", true)
}

// A bucket of 1e12 tokens at rates up to 2e12 tokens/s (microtokens)
// grants exactly what a model counting microtokens in integers grants,
// for random whole and fractional (three decimals) amounts and times.
func TestBucketFastScaledMatchesIntegerModel(t *testing.T) {
	const capU = int64(1e18) // 1e12 tokens in microtokens
	rng := rand.New(rand.NewPCG(3, 4))
	for _, rate := range []float64{1e11, 5e11, 1e12, 2e12} {
		b, c := newFastTestBucket(rate, 1e12)
		perNS := int64(rate) / 1000 // microtokens per ns
		level := capU
		for i := range 20000 {
			dt := rng.Int64N(int64(20 * time.Millisecond))
			c.advance(time.Duration(dt))
			level = min(capU, level+perNS*dt)
			var n float64
			var cost int64
			if rng.IntN(2) == 0 {
				w := rng.Int64N(int64(1e12))
				n, cost = float64(w), w*1e6
			} else {
				k := rng.Int64N(1e9) // up to 1e6 tokens, three decimals
				n, cost = float64(k)/1000, k*1000
			}
			want := level >= cost
			if want {
				level -= cost
			}
			if got := b.AllowN(n); got != want {
				t.Fatalf("rate %g step %d: AllowN(%v) = %v with %d microtokens in the model", rate, i, n, got, level)
			}
		}
		wantFast(t, b, "after the steps", true)
		if got, want := b.Tokens(), float64(level)/1e6; math.Abs(got-want) > 1e-15*want {
			t.Fatalf("rate %g: %v tokens left, the model %v", rate, got, want)
		}
	}
}
