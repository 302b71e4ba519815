package tbf_test

import (
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
	"golang.org/x/time/rate"
)

// The Allow benchmarks pair shaperd's Bucket with golang.org/x/time/rate's
// Limiter on the same parameters and the real clock: sub-benchmark
// "shaperd" vs "xrate" (scripts/bench-limiter.sh prints the ratios).
// The rate is high enough that every call is granted, so each call refills.
const (
	benchRate  = 1e9 // tokens/s
	benchBurst = 1e6 // tokens
)

var benchSink int

func BenchmarkAllow(b *testing.B) { benchAllowSerial(b, benchRate, benchBurst) }

// BenchmarkAllowExtreme is BenchmarkAllow at a rate and a burst of 1e12
// tokens, too large to count in nanotokens: the bucket counts in
// microtokens and stays lock-free.
func BenchmarkAllowExtreme(b *testing.B) { benchAllowSerial(b, 1e12, 1e12) }

// benchAllowSerial runs the pair of serial Allow benchmarks at rate
// tokens/s and burst tokens.
func benchAllowSerial(b *testing.B, r float64, burst int) {
	b.Run("shaperd", func(b *testing.B) {
		lim := tbf.NewBucket(r, float64(burst))
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if lim.Allow() {
				n++
			}
		}
		benchSink = n
	})
	b.Run("xrate", func(b *testing.B) {
		lim := rate.NewLimiter(rate.Limit(r), burst)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if lim.Allow() {
				n++
			}
		}
		benchSink = n
	})
}

func BenchmarkAllowParallel(b *testing.B) {
	b.Run("shaperd", func(b *testing.B) {
		lim := tbf.NewBucket(benchRate, benchBurst)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lim.Allow()
			}
		})
	})
	b.Run("xrate", func(b *testing.B) {
		lim := rate.NewLimiter(rate.Limit(benchRate), benchBurst)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lim.Allow()
			}
		})
	})
}

// BenchmarkClock shows why the default clock is time.Since(origin): it reads
// only the monotonic clock, while time.Now also reads the wall clock.
func BenchmarkClock(b *testing.B) {
	origin := time.Now()
	var sink time.Duration
	b.Run("timeNow", func(b *testing.B) {
		for b.Loop() {
			sink += time.Duration(time.Now().UnixNano())
		}
	})
	b.Run("since", func(b *testing.B) {
		for b.Loop() {
			sink += time.Since(origin)
		}
	})
	benchSink = int(sink)
}
