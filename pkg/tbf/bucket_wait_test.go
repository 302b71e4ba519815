package tbf_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// bucketHang guards against a broken Wait hanging the test run; it is never
// a timing assertion.
const bucketHang = 10 * time.Second

func startWait(ctx context.Context, b *tbf.Bucket, n float64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx, n) }()
	return done
}

// nextAfter returns the duration of the next After call on c.
func nextAfter(t *testing.T, c *bucketFakeClock) time.Duration {
	t.Helper()
	select {
	case d := <-c.called:
		return d
	case <-time.After(bucketHang):
		t.Fatal("Wait did not go to sleep")
		return 0
	}
}

func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(bucketHang):
		t.Fatal("Wait did not return")
		return nil
	}
}

func notDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("Wait returned early: %v", err)
	default:
	}
}

func TestBucketWaitTakesAvailableTokensAtOnce(t *testing.T) {
	b, c := newFakeBucket(1, 10)
	if err := b.Wait(context.Background(), 4); err != nil {
		t.Fatalf("Wait(4) on a full bucket: %v", err)
	}
	bucketNear(t, "Tokens", b.Tokens(), 6)
	if err := b.Wait(context.Background(), 0); err != nil {
		t.Fatalf("Wait(0): %v", err)
	}
	if n := c.AfterCalls(); n != 0 {
		t.Fatalf("Wait slept %d times with the tokens there", n)
	}
	b, _ = newFakeBucket(0, 0)
	b.SetRate(math.Inf(1))
	if err := b.Wait(context.Background(), 1e9); err != nil {
		t.Fatalf("Wait at an infinite rate: %v", err)
	}
}

func TestBucketWaitSleepsUntilTokens(t *testing.T) {
	b, c := newFakeBucket(2, 10)
	b.Drain()
	done := startWait(context.Background(), b, 1)
	if d := nextAfter(t, c); d != 500*time.Millisecond {
		t.Fatalf("Wait(1) at 2 tokens/s sleeps %v, want 500ms", d)
	}
	c.Advance(499 * time.Millisecond)
	notDone(t, done)
	c.Advance(time.Millisecond)
	if err := waitDone(t, done); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	bucketNear(t, "Tokens after Wait", b.Tokens(), 0)
}

func TestBucketWaitFailsAtOnce(t *testing.T) {
	b, c := newFakeBucket(1, 5)
	if err := b.Wait(context.Background(), 6); !errors.Is(err, tbf.ErrBucketCapacity) {
		t.Fatalf("Wait above capacity = %v, want ErrBucketCapacity", err)
	}

	for _, n := range []float64{math.NaN(), math.Inf(1)} {
		if err := b.Wait(context.Background(), n); !errors.Is(err, tbf.ErrBucketCapacity) {
			t.Fatalf("Wait(%v) = %v, want ErrBucketCapacity", n, err)
		}
	}
	huge, _ := newFakeBucket(1, math.Inf(1))
	if err := huge.Wait(context.Background(), math.Inf(1)); !errors.Is(err, tbf.ErrBucketCapacity) {
		t.Fatalf("Wait(+Inf) with infinite capacity = %v, want ErrBucketCapacity", err)
	}

	b.SetRate(0)
	b.Drain()
	if err := b.Wait(context.Background(), 1); !errors.Is(err, tbf.ErrBucketNoRefill) {
		t.Fatalf("Wait at rate 0 = %v, want ErrBucketNoRefill", err)
	}

	b.SetRate(1)
	ctx, cancel := context.WithDeadline(context.Background(), c.Wall().Add(999*time.Millisecond))
	defer cancel()
	if err := b.Wait(ctx, 1); !errors.Is(err, tbf.ErrBucketDeadline) {
		t.Fatalf("Wait with a too-early deadline = %v, want ErrBucketDeadline", err)
	}

	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := b.Wait(cancelled, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context = %v, want context.Canceled", err)
	}
	if n := c.AfterCalls(); n != 0 {
		t.Fatalf("Wait slept %d times before failing", n)
	}
	bucketNear(t, "Tokens after failed Waits", b.Tokens(), 0)

	// A deadline late enough lets it wait.
	ctx3, cancel3 := context.WithDeadline(context.Background(), c.Wall().Add(time.Second))
	defer cancel3()
	done := startWait(ctx3, b, 1)
	nextAfter(t, c)
	c.Advance(time.Second)
	if err := waitDone(t, done); err != nil {
		t.Fatalf("Wait with an exact deadline: %v", err)
	}
}

func TestBucketWaitReturnsContextError(t *testing.T) {
	b, c := newFakeBucket(1, 5)
	b.Drain()
	ctx, cancel := context.WithCancel(context.Background())
	done := startWait(ctx, b, 3)
	if d := nextAfter(t, c); d != 3*time.Second {
		t.Fatalf("Wait(3) at 1 token/s sleeps %v, want 3s", d)
	}
	c.Advance(time.Second)
	cancel()
	if err := waitDone(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	bucketNear(t, "Tokens after a cancelled Wait", b.Tokens(), 1)
}

func TestBucketWaitWakesOnRateChange(t *testing.T) {
	b, c := newFakeBucket(1, 10)
	b.Drain()
	done := startWait(context.Background(), b, 5)
	if d := nextAfter(t, c); d != 5*time.Second {
		t.Fatalf("first sleep %v, want 5s", d)
	}
	b.SetRate(10)
	if d := nextAfter(t, c); d != 500*time.Millisecond {
		t.Fatalf("sleep after SetRate(10) %v, want 500ms", d)
	}
	notDone(t, done)
	b.Ramp(30, time.Second) // 10 -> 30 over 1 s; 5 tokens after t: 10t + 10t² = 5
	d := nextAfter(t, c)
	want := (-10 + math.Sqrt(100+200)) / 20 // seconds
	bucketNear(t, "sleep during a ramp (s)", d.Seconds(), math.Ceil(want*1e9)/1e9)
	c.Advance(d)
	if err := waitDone(t, done); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got := b.Tokens(); got < 0 || got > 1e-6 {
		t.Fatalf("Tokens after the Wait = %v, want ~0", got)
	}
}

func TestBucketWaitDuringRampIsExact(t *testing.T) {
	cases := []struct {
		n    float64
		want time.Duration
	}{
		{6, time.Second},     // exactly the ramp's integral 10 -> 2 over 1 s
		{8, 2 * time.Second}, // the ramp's 6, then 2 more at 2 tokens/s
		{3, time.Duration(math.Ceil((10 - math.Sqrt(100-48)) / 8 * 1e9))}, // 10t - 4t² = 3
	}
	for _, tc := range cases {
		b, c := newFakeBucket(10, 100)
		b.Drain()
		b.Ramp(2, time.Second)
		done := startWait(context.Background(), b, tc.n)
		d := nextAfter(t, c)
		if diff := d - tc.want; diff < -1 || diff > 1 {
			t.Fatalf("Wait(%v) during the ramp sleeps %v, want %v", tc.n, d, tc.want)
		}
		c.Advance(d)
		if err := waitDone(t, done); err != nil {
			t.Fatalf("Wait(%v): %v", tc.n, err)
		}
	}

	// A ramp down to 0 gives 5 tokens in all: 5 is reachable, 6 never.
	b, c := newFakeBucket(10, 100)
	b.Drain()
	b.Ramp(0, time.Second)
	if err := b.Wait(context.Background(), 6); !errors.Is(err, tbf.ErrBucketNoRefill) {
		t.Fatalf("Wait(6) on a ramp to 0 = %v, want ErrBucketNoRefill", err)
	}
	done := startWait(context.Background(), b, 5)
	if d := nextAfter(t, c); d < time.Second-1 || d > time.Second {
		t.Fatalf("Wait(5) on a ramp 10 -> 0 over 1 s sleeps %v, want 1s", d)
	}
	c.Advance(time.Second)
	if err := waitDone(t, done); err != nil {
		t.Fatalf("Wait(5): %v", err)
	}
}

func TestBucketWaitDoesNotOverGrant(t *testing.T) {
	b, c := newFakeBucket(1, 10)
	b.Drain()
	first := startWait(context.Background(), b, 1)
	nextAfter(t, c)
	second := startWait(context.Background(), b, 1)
	nextAfter(t, c)

	c.Advance(time.Second) // one token for two waiters
	var loser <-chan error
	select {
	case err := <-first:
		loser = second
		if err != nil {
			t.Fatalf("first Wait: %v", err)
		}
	case err := <-second:
		loser = first
		if err != nil {
			t.Fatalf("second Wait: %v", err)
		}
	case <-time.After(bucketHang):
		t.Fatal("no waiter returned")
	}
	if d := nextAfter(t, c); d != time.Second { // the loser sleeps again
		t.Fatalf("the losing waiter sleeps %v, want 1s", d)
	}
	notDone(t, loser)
	bucketNear(t, "Tokens", b.Tokens(), 0)
	c.Advance(time.Second)
	if err := waitDone(t, loser); err != nil {
		t.Fatalf("second waiter: %v", err)
	}
}

func TestBucketWaitLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	b, c := newFakeBucket(1, 10)
	b.Drain()
	ctx, cancel := context.WithCancel(context.Background())
	for range 3 {
		b.Drain()
		done := startWait(ctx, b, 1)
		nextAfter(t, c)
		b.SetRate(2) // wakes, sleeps again
		nextAfter(t, c)
		c.Advance(time.Second)
		if err := waitDone(t, done); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		b.SetRate(1)
	}
	done := startWait(ctx, b, 5)
	nextAfter(t, c)
	cancel()
	waitDone(t, done)

	// The test's own goroutines exit right after sending; give them a moment
	// to be scheduled out (no wall-clock assertion).
	for i := 0; i < 1000 && runtime.NumGoroutine() > before; i++ {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after the Waits, %d before", n, before)
	}
}

func TestBucketWaitSaturatesLongSleeps(t *testing.T) {
	b, c := newFakeBucket(1e-300, 1) // one token takes ~3e292 years
	b.Drain()
	ctx, cancel := context.WithCancel(context.Background())
	done := startWait(ctx, b, 1)
	if d := nextAfter(t, c); d != math.MaxInt64 {
		t.Fatalf("sleep %v, want the largest Duration", d)
	}
	cancel()
	if err := waitDone(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
}

// TestBucketWaitRealClock runs Wait on the default clock once (real timer
// path); it asserts only the outcome, not the time taken.
func TestBucketWaitRealClock(t *testing.T) {
	b := tbf.NewBucket(1000, 1)
	b.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), bucketHang)
	defer cancel()
	for range 3 {
		if err := b.Wait(ctx, 1); err != nil {
			t.Fatalf("Wait on the real clock: %v", err)
		}
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	b.SetRate(0.001) // 1 token takes 1000 s: the deadline comes first
	if err := b.Wait(ctx2, 1); !errors.Is(err, tbf.ErrBucketDeadline) {
		t.Fatalf("Wait past the deadline on the real clock = %v, want ErrBucketDeadline", err)
	}
}
