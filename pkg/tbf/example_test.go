package tbf_test

import (
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// exampleBucketClock is a hand-driven Clock for the example.
type exampleBucketClock struct{ now time.Duration }

func (c *exampleBucketClock) Now() time.Duration { return c.now }

func ExampleBucket() {
	clock := &exampleBucketClock{}
	// 10 tokens/s, up to 20 tokens; it starts full.
	b := tbf.NewBucket(10, 20, tbf.WithClock(clock))
	fmt.Println(b.AllowN(5), b.Tokens())

	// Cut the rate to 2 tokens/s: the 15 tokens scale to 3 (same 1.5 s of sending).
	b.SetRate(2)
	fmt.Println(b.Tokens())

	fmt.Println(b.Allow(), b.Allow(), b.Allow(), b.Allow())
	clock.now += 500 * time.Millisecond
	fmt.Println(b.Allow())
	// Output:
	// true 15
	// 3
	// true true true false
	// true
}

func ExampleBucket_Ramp() {
	clock := &exampleBucketClock{}
	b := tbf.NewBucket(10, 100, tbf.WithClock(clock))
	b.Drain()
	// Move the rate from 10 to 2 tokens/s over one second; tokens accrue by
	// the integral of the ramp, (10+2)/2 * 1 s.
	b.Ramp(2, time.Second)
	clock.now += time.Second
	fmt.Println(b.Tokens(), b.Rate())
	// Output: 6 2
}

func ExampleBucket_SetRateSmooth() {
	clock := &exampleBucketClock{}
	b := tbf.NewBucket(100, 200, tbf.WithClock(clock))
	// A cut from 100 to 1 token/s scales 200 tokens to 2, then keeps at most
	// 1 s worth at the new rate.
	b.SetRateSmooth(1, time.Second)
	fmt.Println(b.Tokens())
	// Output: 1
}
