package tbf_test

import (
	"sync"
	"time"
)

// bucketFakeClock is a manual Clock for tests: time moves only when the test
// calls Advance, and After channels fire when Advance reaches them.
type bucketFakeClock struct {
	mu     sync.Mutex
	now    time.Duration
	wall   time.Time // wall-clock time at now == 0, for context deadlines
	timers []bucketFakeTimer
	afters []time.Duration // every duration passed to After, in order
	called chan time.Duration
}

type bucketFakeTimer struct {
	at time.Duration
	ch chan time.Time
}

func newBucketFakeClock() *bucketFakeClock {
	return &bucketFakeClock{
		now: time.Hour, // not 0, so that no code relies on a zero origin
		// Real contexts expire on the real wall clock: keep the fake wall
		// clock ahead of it so that deadlines built from Wall() have not
		// passed yet. Only Until reads it.
		wall:   time.Now().Add(time.Hour),
		called: make(chan time.Duration, 1024),
	}
}

func (c *bucketFakeClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, also backwards (to test misbehaving clocks).
func (c *bucketFakeClock) Set(t time.Duration) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Advance moves the clock forward by d and fires the After channels due.
func (c *bucketFakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now += d
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at <= c.now {
			t.ch <- c.wall.Add(c.now) // buffered, never blocks
		} else {
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

// After returns a channel that receives when the clock has advanced by d.
func (c *bucketFakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.afters = append(c.afters, d)
	if d <= 0 {
		ch <- c.wall.Add(c.now)
	} else {
		c.timers = append(c.timers, bucketFakeTimer{at: c.now + d, ch: ch})
	}
	c.called <- d
	return ch
}

// Until converts a wall-clock deadline into time left on this clock.
func (c *bucketFakeClock) Until(t time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.Sub(c.wall.Add(c.now))
}

// Wall returns the fake wall-clock time now.
func (c *bucketFakeClock) Wall() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall.Add(c.now)
}

// AfterCalls returns how many times After was called.
func (c *bucketFakeClock) AfterCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.afters)
}
