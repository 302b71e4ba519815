package main

import (
	"slices"
	"time"
)

// quantile returns the q-quantile (0..1) of xs by the nearest-rank method
// on a sorted copy; 0 for an empty slice. quantile(xs, 0.5) of an even
// count is the mean of the two middle values.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if q == 0.5 && len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func median(xs []float64) float64 { return quantile(xs, 0.5) }

// secs converts a duration to seconds.
func secs(d time.Duration) float64 { return d.Seconds() }

// verdict is PASS when ok, else MISS.
func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}
