package clstest

import (
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{9, 1, 4, 2}, 3},
		{[]float64{7, 7, 1, 100, 8}, 7},
	} {
		in := slices.Clone(c.xs)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("Median reordered its argument: %v", c.xs)
		}
	}
}
