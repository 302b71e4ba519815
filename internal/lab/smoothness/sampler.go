package smoothness

import (
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// sampler reads the byte counter at the shaper's exit: the class's (HTB)
// or the root qdisc's (TBF, class 0) through a whole kernel Dump, the only
// stats read pkg/kernel offers.
type sampler struct {
	k     *kernel.Kernel
	clock Clock
	dev   string
	class model.Handle // 0: the root qdisc
}

// read returns the counter and the midpoint and duration of the Dump.
func (s *sampler) read() (bytes uint64, at time.Time, took time.Duration, err error) {
	t0 := s.clock.Now()
	tree, err := s.k.Dump(s.dev)
	t1 := s.clock.Now()
	at, took = t0.Add(t1.Sub(t0)/2), t1.Sub(t0)
	if err != nil {
		return 0, at, took, fmt.Errorf("sample %s: %w", s.dev, err)
	}
	if s.class == 0 {
		if tree.Root == nil || tree.Root.Stats == nil {
			return 0, at, took, fmt.Errorf("sample %s: no root qdisc statistics", s.dev)
		}
		return tree.Root.Stats.Bytes, at, took, nil
	}
	for _, c := range tree.Classes {
		if c.Handle == s.class && c.Stats != nil {
			return c.Stats.Bytes, at, took, nil
		}
	}
	return 0, at, took, fmt.Errorf("sample %s: class %s missing or without statistics", s.dev, s.class)
}

// reading is one raw sample with its absolute time.
type reading struct {
	at    time.Time
	bytes uint64
	took  time.Duration
}

// series samples every period from start, n+1 readings, and sends the
// time of reading markAt on mark as soon as it is taken. It stops at the
// first error.
func (s *sampler) series(start time.Time, period time.Duration, n, markAt int, mark chan<- time.Time) ([]reading, error) {
	rs := make([]reading, 0, n+1)
	for i := 0; i <= n; i++ {
		sleepUntil(s.clock, start.Add(time.Duration(i)*period))
		b, at, took, err := s.read()
		if err != nil {
			return rs, err
		}
		rs = append(rs, reading{at, b, took})
		if i == markAt {
			mark <- at
		}
	}
	return rs, nil
}
