package tbf_test

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

func bucketNear(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func newFakeBucket(rate, capacity float64) (*tbf.Bucket, *bucketFakeClock) {
	c := newBucketFakeClock()
	return tbf.NewBucket(rate, capacity, tbf.WithClock(c)), c
}

func TestBucketStartsFullAndRefills(t *testing.T) {
	b, c := newFakeBucket(10, 20)
	bucketNear(t, "Tokens", b.Tokens(), 20)
	bucketNear(t, "Capacity", b.Capacity(), 20)
	bucketNear(t, "Rate", b.Rate(), 10)
	if got := b.Drain(); got != 20 {
		t.Fatalf("Drain = %v, want 20", got)
	}
	c.Advance(300 * time.Millisecond)
	bucketNear(t, "Tokens after 0.3 s", b.Tokens(), 3)
	c.Advance(time.Hour)
	bucketNear(t, "Tokens after an hour (capped)", b.Tokens(), 20)
}

func TestBucketSetRateScalesTokens(t *testing.T) {
	b, c := newFakeBucket(10, 20)
	if !b.AllowN(5) {
		t.Fatal("AllowN(5) on a full bucket failed")
	}
	bucketNear(t, "Tokens after AllowN(5)", b.Tokens(), 15)
	b.SetRate(2)
	bucketNear(t, "Tokens after SetRate(2)", b.Tokens(), 3)
	for i := range 3 {
		if !b.Allow() {
			t.Fatalf("Allow #%d failed with %v tokens", i+1, b.Tokens())
		}
	}
	if b.Allow() {
		t.Fatal("fourth Allow succeeded on an empty bucket")
	}
	c.Advance(500 * time.Millisecond)
	if !b.Allow() {
		t.Fatal("Allow after 0.5 s at 2 tokens/s failed")
	}
	if b.Allow() {
		t.Fatal("second Allow after 0.5 s at 2 tokens/s succeeded")
	}
}

func TestBucketSetRateSmooth(t *testing.T) {
	b, _ := newFakeBucket(100, 200)
	b.SetRateSmooth(1, time.Second) // scaled to 2, capped at 1 token/s * 1 s
	bucketNear(t, "Tokens after a smooth decrease", b.Tokens(), 1)
	bucketNear(t, "Rate", b.Rate(), 1)

	b, _ = newFakeBucket(2, 20)
	if !b.AllowN(17) {
		t.Fatal("AllowN(17) on a full bucket failed")
	}
	b.SetRateSmooth(10, time.Second) // increase: 3 * 10/2, no cap
	bucketNear(t, "Tokens after a smooth increase", b.Tokens(), 15)

	b, _ = newFakeBucket(100, 200)
	b.SetRateSmooth(50, 0) // a zero window empties on a decrease
	bucketNear(t, "Tokens after a decrease with window 0", b.Tokens(), 0)
}

func TestBucketSetRateEdges(t *testing.T) {
	// From rate 0 nothing to scale by: tokens stay.
	b, c := newFakeBucket(0, 20)
	b.AllowN(15)
	c.Advance(time.Hour)
	bucketNear(t, "Tokens at rate 0 after an hour", b.Tokens(), 5)
	b.SetRate(10)
	bucketNear(t, "Tokens after SetRate from 0", b.Tokens(), 5)

	// From an infinite rate: the bucket was kept full and stays full.
	b, _ = newFakeBucket(math.Inf(1), 20)
	b.AllowN(15)
	b.SetRate(10)
	bucketNear(t, "Tokens after SetRate from Inf", b.Tokens(), 20)

	// To rate 0: scaled by 0, the bucket empties and never refills.
	b, c = newFakeBucket(10, 20)
	b.SetRate(0)
	c.Advance(time.Hour)
	bucketNear(t, "Tokens after SetRate(0) and an hour", b.Tokens(), 0)

	// To an infinite rate: full at once.
	b, _ = newFakeBucket(10, 20)
	b.Drain()
	b.SetRate(math.Inf(1))
	bucketNear(t, "Tokens after SetRate(Inf)", b.Tokens(), 20)

	// Scaling up is clamped to capacity.
	b, _ = newFakeBucket(1, 20)
	b.SetRate(100)
	bucketNear(t, "Tokens after a 100x increase", b.Tokens(), 20)
}

func TestBucketRateAndCapacityEdges(t *testing.T) {
	b, c := newFakeBucket(0, 3)
	if !b.AllowN(3) || b.Allow() {
		t.Fatal("rate 0: want the initial 3 tokens and then nothing")
	}
	c.Advance(24 * time.Hour)
	if b.Allow() {
		t.Fatal("rate 0 refilled")
	}

	b, _ = newFakeBucket(math.Inf(1), 3)
	for i := range 100 {
		if !b.AllowN(1000) {
			t.Fatalf("infinite rate refused AllowN(1000) #%d", i)
		}
	}
	bucketNear(t, "Tokens at infinite rate", b.Tokens(), 3)
	bucketNear(t, "Drain at infinite rate", b.Drain(), 3)
	bucketNear(t, "Tokens after Drain at infinite rate", b.Tokens(), 3)

	b, c = newFakeBucket(1000, 0)
	c.Advance(time.Hour)
	if b.Allow() || b.AllowN(0.001) {
		t.Fatal("capacity 0 allowed a token")
	}
	if !b.AllowN(0) || !b.AllowN(-1) {
		t.Fatal("AllowN(n <= 0) must succeed")
	}
	b, _ = newFakeBucket(math.Inf(1), 0)
	if !b.Allow() {
		t.Fatal("capacity 0 with an infinite rate must allow")
	}

	b, _ = newFakeBucket(1, 5)
	if !b.AllowN(-3) || !b.AllowN(0) {
		t.Fatal("AllowN(n <= 0) must succeed")
	}
	bucketNear(t, "Tokens after AllowN(<=0)", b.Tokens(), 5)
	if b.AllowN(6) {
		t.Fatal("AllowN above capacity succeeded")
	}
	bucketNear(t, "Tokens after a failed AllowN", b.Tokens(), 5)
	if b.AllowN(math.NaN()) {
		t.Fatal("AllowN(NaN) succeeded")
	}

	b, _ = newFakeBucket(1, math.Inf(1))
	if !b.AllowN(1e12) {
		t.Fatal("infinite capacity refused a large request")
	}
	if b.AllowN(math.Inf(1)) {
		t.Fatal("AllowN(+Inf) succeeded at a finite rate")
	}
	if got := b.Tokens(); !math.IsInf(got, 1) {
		t.Fatalf("Tokens with infinite capacity = %v, want +Inf", got)
	}
}

func TestBucketRamp(t *testing.T) {
	b, c := newFakeBucket(10, 100)
	b.Drain()
	b.Ramp(2, time.Second)
	bucketNear(t, "Tokens right after Ramp", b.Tokens(), 0)
	c.Advance(500 * time.Millisecond)
	bucketNear(t, "Rate at half ramp", b.Rate(), 6)
	bucketNear(t, "Tokens at half ramp", b.Tokens(), (10+6)/2*0.5)
	c.Advance(500 * time.Millisecond)
	bucketNear(t, "Tokens at ramp end", b.Tokens(), 6)
	bucketNear(t, "Rate at ramp end", b.Rate(), 2)
	c.Advance(time.Second)
	bucketNear(t, "Tokens 1 s after the ramp", b.Tokens(), 8)

	// Checking in between does not change the integral.
	b1, c1 := newFakeBucket(10, 200)
	b2, c2 := newFakeBucket(10, 200)
	b1.Drain()
	b2.Drain()
	b1.Ramp(40, 3*time.Second)
	b2.Ramp(40, 3*time.Second)
	for range 37 {
		c1.Advance(100 * time.Millisecond)
		b1.Tokens()
	}
	c2.Advance(3700 * time.Millisecond)
	bucketNear(t, "Tokens polled vs unpolled", b1.Tokens(), b2.Tokens())
	bucketNear(t, "Tokens after ramp 10->40 over 3 s + 0.7 s", b2.Tokens(), 25*3+40*0.7)

	// Tokens are not rescaled and are clamped to capacity.
	b, c = newFakeBucket(10, 20)
	b.AllowN(5)
	b.Ramp(1000, time.Second)
	bucketNear(t, "Tokens right after a ramp up", b.Tokens(), 15)
	c.Advance(time.Second)
	bucketNear(t, "Tokens after a ramp up (capped)", b.Tokens(), 20)
}

func TestBucketRampReplacedFromInstantaneousRate(t *testing.T) {
	b, c := newFakeBucket(10, 100)
	b.Drain()
	b.Ramp(2, time.Second)
	c.Advance(500 * time.Millisecond) // rate 6, 4 tokens
	b.SetRate(3)                      // 4 * 3/6
	bucketNear(t, "Tokens after SetRate mid-ramp", b.Tokens(), 2)
	c.Advance(time.Second)
	bucketNear(t, "Rate after SetRate mid-ramp", b.Rate(), 3)
	bucketNear(t, "Tokens 1 s after SetRate mid-ramp", b.Tokens(), 5)

	b, c = newFakeBucket(10, 100)
	b.Drain()
	b.Ramp(20, time.Second)
	c.Advance(500 * time.Millisecond) // rate 15, 6.25 tokens
	b.Ramp(5, time.Second)            // from 15 to 5
	bucketNear(t, "Tokens after a second Ramp", b.Tokens(), 6.25)
	c.Advance(time.Second)
	bucketNear(t, "Rate after the second ramp", b.Rate(), 5)
	bucketNear(t, "Tokens after the second ramp", b.Tokens(), 6.25+10)

	b, c = newFakeBucket(10, 100)
	b.Drain()
	b.Ramp(20, time.Second)
	c.Advance(500 * time.Millisecond) // rate 15, 6.25 tokens
	b.SetRateSmooth(1, 2*time.Second) // 6.25 * 1/15, under the cap of 2
	bucketNear(t, "Tokens after SetRateSmooth mid-ramp", b.Tokens(), 6.25/15)

	// Ramp with over <= 0 or infinite ends jumps without rescaling.
	b, c = newFakeBucket(10, 100)
	b.AllowN(50)
	b.Ramp(20, 0)
	bucketNear(t, "Tokens after Ramp(20, 0)", b.Tokens(), 50)
	bucketNear(t, "Rate after Ramp(20, 0)", b.Rate(), 20)
	b.Ramp(math.Inf(1), time.Second)
	if !b.AllowN(1000) {
		t.Fatal("Ramp to Inf did not make the rate infinite at once")
	}
	b.Ramp(1, time.Second)
	bucketNear(t, "Rate after Ramp from Inf", b.Rate(), 1)
	bucketNear(t, "Tokens after Ramp from Inf", b.Tokens(), 100)
	c.Advance(time.Second)
	bucketNear(t, "Tokens 1s after Ramp from Inf", b.Tokens(), 100)
}

func TestBucketPanicsOnInvalidArguments(t *testing.T) {
	cases := map[string]struct {
		f    func()
		want string
	}{
		"negative rate":     {func() { tbf.NewBucket(-1, 1) }, "rate"},
		"NaN rate":          {func() { tbf.NewBucket(math.NaN(), 1) }, "rate"},
		"negative capacity": {func() { tbf.NewBucket(1, -1) }, "capacity"},
		"NaN capacity":      {func() { tbf.NewBucket(1, math.NaN()) }, "capacity"},
		"SetRate(-1)":       {func() { tbf.NewBucket(1, 1).SetRate(-1) }, "SetRate"},
		"SetRateSmooth NaN": {func() { tbf.NewBucket(1, 1).SetRateSmooth(math.NaN(), time.Second) }, "SetRateSmooth"},
		"Ramp(-inf)":        {func() { tbf.NewBucket(1, 1).Ramp(math.Inf(-1), time.Second) }, "Ramp"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if r == nil || !strings.Contains(msg, tc.want) {
					t.Fatalf("panic = %v, want a message mentioning %q", r, tc.want)
				}
			}()
			tc.f()
		})
	}
}

func TestBucketIgnoresClockGoingBackwards(t *testing.T) {
	b, c := newFakeBucket(10, 100)
	b.Drain()
	start := c.Now()
	c.Advance(time.Second)
	bucketNear(t, "Tokens after 1 s", b.Tokens(), 10)
	b.Drain()
	c.Set(start) // a reading from before the last one
	bucketNear(t, "Tokens after the clock went back", b.Tokens(), 0)
	c.Set(start + time.Second)
	bucketNear(t, "Tokens when the clock is back where it was", b.Tokens(), 0)
	c.Advance(time.Second)
	bucketNear(t, "Tokens 1 s later", b.Tokens(), 10)
}

// TestBucketNoOverGrantUnderContention hammers one bucket on the real clock
// from many goroutines: the grants may never exceed what the bucket can give,
// capacity + rate*elapsed (+1 for rounding), measured around the whole run.
func TestBucketNoOverGrantUnderContention(t *testing.T) {
	const (
		goroutines = 16
		calls      = 5000
		rate       = 2000.0
		capacity   = 50.0
	)
	start := time.Now()
	b := tbf.NewBucket(rate, capacity)
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range calls {
				if b.Allow() {
					granted.Add(1)
				}
				if i%64 == 0 {
					b.Tokens() // mix in other lock holders
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	limit := capacity + rate*elapsed.Seconds() + 1
	got := float64(granted.Load())
	if got > limit {
		t.Fatalf("granted %v tokens in %v, more than capacity + rate*elapsed + 1 = %.1f", got, elapsed, limit)
	}
	if got < capacity {
		t.Fatalf("granted %v tokens, fewer than the initial %v", got, capacity)
	}
	t.Logf("granted %v of at most %.1f in %v (%d calls)", got, limit, elapsed, goroutines*calls)
}
