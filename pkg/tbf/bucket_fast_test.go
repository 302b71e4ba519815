package tbf_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// allowUntilRefused calls Allow from g goroutines at once, each until it is
// refused, and returns the number of grants. With the clock standing still
// the bucket only empties, so the total is the same however the calls
// interleave: the number of whole tokens in the bucket.
func allowUntilRefused(g int, b *tbf.Bucket) int64 {
	var granted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range g {
		wg.Go(func() {
			<-start
			for b.Allow() {
				granted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return granted.Load()
}

// TestBucketModeTransitionsConcurrentAllow runs one schedule of rate
// changes, ramps (locked mode), ramp ends (back to lock-free mode), drains
// and clock steps on two fake-clock buckets; after each step it empties the
// first with concurrent Allow calls and the second with sequential ones.
// Both must grant exactly the same number of tokens at every step.
func TestBucketModeTransitionsConcurrentAllow(t *testing.T) {
	conc, cc := newFakeBucket(10, 20)
	seq, sc := newFakeBucket(10, 20)
	// want: whole tokens in the bucket after each step, worked out by hand
	// (rate 10 tokens/s and capacity 20 at the start; each step starts with
	// what the previous one left, below one token).
	steps := []struct {
		name string
		want int64
		do   func(b *tbf.Bucket, c *bucketFakeClock)
	}{
		{"start (full)", 20, func(*tbf.Bucket, *bucketFakeClock) {}},
		{"advance 1.3 s", 13, func(_ *tbf.Bucket, c *bucketFakeClock) { c.Advance(1300 * time.Millisecond) }},
		// 5 tokens scaled by 40/10, capped.
		{"SetRate(40) after 0.5 s", 20, func(b *tbf.Bucket, c *bucketFakeClock) { c.Advance(500 * time.Millisecond); b.SetRate(40) }},
		// 40 -> 4 over 2 s (rate 40-18t): (40+31)/2*0.5 = 17.75.
		{"Ramp(4, 2s), 0.5 s in", 17, func(b *tbf.Bucket, c *bucketFakeClock) { b.Ramp(4, 2*time.Second); c.Advance(500 * time.Millisecond) }},
		// 0.75 + (31+20.2)/2*0.6 = 16.11.
		{"ramp, 1.1 s in", 16, func(_ *tbf.Bucket, c *bucketFakeClock) { c.Advance(600 * time.Millisecond) }},
		// 0.11 + (20.2+4)/2*0.9 + 4*0.7 = 13.8.
		{"ramp ended 0.7 s ago", 13, func(_ *tbf.Bucket, c *bucketFakeClock) { c.Advance(1600 * time.Millisecond) }},
		{"constant 4/s after the ramp", 12, func(_ *tbf.Bucket, c *bucketFakeClock) { c.Advance(3 * time.Second) }},
		{"idle 10 s at 4/s: capped", 20, func(_ *tbf.Bucket, c *bucketFakeClock) { c.Advance(10 * time.Second) }},
		{"Ramp(30, 0) jump, 0.25 s", 7, func(b *tbf.Bucket, c *bucketFakeClock) { b.Ramp(30, 0); c.Advance(250 * time.Millisecond) }},
		// Full (20) scaled by 3/30, under the cap of 3 tokens.
		{"SetRateSmooth(3, 1s) after 2 s", 2, func(b *tbf.Bucket, c *bucketFakeClock) { c.Advance(2 * time.Second); b.SetRateSmooth(3, time.Second) }},
		{"SetRate(0), an hour", 0, func(b *tbf.Bucket, c *bucketFakeClock) { b.SetRate(0); c.Advance(time.Hour) }},
		{"SetRate(7), 1 s", 7, func(b *tbf.Bucket, c *bucketFakeClock) { b.SetRate(7); c.Advance(time.Second) }},
		// 7 -> 50 over 1 s (rate 7+43t): (24.2+37.1)/2*0.3 = 9.195.
		{"Ramp(50, 1s), Drain at 0.4 s, 0.3 s more", 9, func(b *tbf.Bucket, c *bucketFakeClock) {
			b.Ramp(50, time.Second)
			c.Advance(400 * time.Millisecond)
			b.Drain()
			c.Advance(300 * time.Millisecond)
		}},
		{"past the ramp end: capped", 20, func(_ *tbf.Bucket, c *bucketFakeClock) { c.Advance(time.Second) }},
		{"SetRate(2e9), 7 ns", 14, func(b *tbf.Bucket, c *bucketFakeClock) { b.SetRate(2e9); b.Drain(); c.Advance(7) }},
		{"3 s idle (beyond the lock-free span at 2e9/s)", 20, func(_ *tbf.Bucket, c *bucketFakeClock) { c.Advance(3 * time.Second) }},
		{"SetRate(2.5), Drain, 1.3 s", 3, func(b *tbf.Bucket, c *bucketFakeClock) { b.SetRate(2.5); b.Drain(); c.Advance(1300 * time.Millisecond) }},
	}
	for _, s := range steps {
		s.do(conc, cc)
		s.do(seq, sc)
		var want int64
		for seq.Allow() {
			want++
		}
		if want != s.want {
			t.Fatalf("%s: sequential Allow granted %d, want %d", s.name, want, s.want)
		}
		if got := allowUntilRefused(8, conc); got != want {
			t.Fatalf("%s: concurrent Allow granted %d, sequential %d", s.name, got, want)
		}
	}
}

// TestBucketConcurrentTransitionsExactAccounting hammers a fake-clock bucket
// with Allow and AllowN from several goroutines while the test goroutine
// moves the clock and switches between a constant rate (lock-free mode) and
// ramps (locked mode). Ramps and jumps (Ramp with over 0) never rescale the
// tokens, and after every step the test goroutine itself takes tokens until
// refused, so the bucket never fills up and no refill is lost to the cap:
// everything taken out must then be the initial capacity plus the integral
// of the rate over the fake time, no more (over-grant) and no less (refill
// lost in a mode change), which a reference bucket of practically unlimited
// capacity, given the same schedule, accumulates.
func TestBucketConcurrentTransitionsExactAccounting(t *testing.T) {
	const capacity = 25.0
	b, c := newFakeBucket(100, capacity)
	ref, rc := newFakeBucket(100, 1e12)
	ref.Drain()
	rng := rand.New(rand.NewPCG(1, 2))

	var stop atomic.Bool
	var granted atomic.Int64 // in quarter tokens
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for !stop.Load() {
				if i%2 == 0 && b.Allow() {
					granted.Add(4)
				} else if i%2 == 1 && b.AllowN(0.75) {
					granted.Add(3)
				}
			}
		})
	}
	drained := 0.0
	for i := range 1000 {
		for b.Allow() { // the bucket holds < 1 token now
			granted.Add(4)
		}
		dt := time.Duration(rng.IntN(20)+1) * time.Millisecond
		c.Advance(dt)
		rc.Advance(dt)
		switch to := float64(10 * (rng.IntN(20) + 1)); rng.IntN(6) {
		case 0:
			b.Ramp(to, 0)
			ref.Ramp(to, 0)
		case 1:
			over := time.Duration(rng.IntN(50)+1) * time.Millisecond
			b.Ramp(to, over)
			ref.Ramp(to, over)
		case 2:
			if i%10 == 0 {
				drained += b.Drain()
			}
		}
	}
	stop.Store(true)
	wg.Wait()

	got := float64(granted.Load()) / 4
	left := b.Tokens()
	out, want := got+drained+left, capacity+ref.Tokens()
	if math.Abs(out-want) > 1e-6*want {
		t.Fatalf("granted %v + drained %v + left %v = %v tokens, want capacity + refill = %v", got, drained, left, out, want)
	}
	t.Logf("granted %v, drained %v, left %v; capacity + refill %v", got, drained, left, want)

	// The bucket still works: full after a long pause at a known rate.
	b.Ramp(10, 0)
	c.Advance(time.Hour)
	if !b.AllowN(capacity) || b.AllowN(0.001) {
		t.Fatalf("after the stress: want exactly a full bucket of %v tokens", capacity)
	}
}

// TestBucketNoOverGrantWithRateChanges is TestBucketNoOverGrantUnderContention
// with a goroutine that keeps switching between lock-free mode (jumps) and
// locked mode (short ramps) on the real clock; run it with -race. Rates stay
// within [1000, 4000] tokens/s and are never rescaled, so the grants are at
// most capacity + 4000*elapsed (+1 for rounding).
func TestBucketNoOverGrantWithRateChanges(t *testing.T) {
	const (
		goroutines = 8
		calls      = 5000
		capacity   = 50.0
		maxRate    = 4000.0
	)
	start := time.Now()
	b := tbf.NewBucket(2000, capacity)
	var granted atomic.Int64
	var stop atomic.Bool
	var wg, changer sync.WaitGroup
	changer.Go(func() {
		rates := []float64{1000, maxRate, 2500, 1500}
		for i := 0; !stop.Load(); i++ {
			if i%2 == 0 {
				b.Ramp(rates[i%len(rates)], 0)
			} else {
				b.Ramp(rates[i%len(rates)], time.Duration(i%5)*100*time.Microsecond)
			}
			runtime.Gosched()
		}
	})
	for range goroutines {
		wg.Go(func() {
			for range calls {
				if b.Allow() {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	changer.Wait()
	elapsed := time.Since(start)
	limit := capacity + maxRate*elapsed.Seconds() + 1
	if got := float64(granted.Load()); got > limit || got < capacity/2 {
		t.Fatalf("granted %v tokens in %v, want between %v and capacity + %v*elapsed + 1 = %.1f", got, elapsed, capacity/2, maxRate, limit)
	}
	if r := b.Rate(); r < 1000 || r > maxRate || math.IsNaN(r) {
		t.Fatalf("Rate after the changes = %v, want within [1000, %v]", r, maxRate)
	}
}
