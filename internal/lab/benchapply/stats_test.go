package main

import "testing"

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 6, 7, 8, 9}
	for _, c := range []struct {
		xs   []float64
		q    float64
		want float64
	}{
		{xs, 0.5, 5.5}, // even count: mean of the middle two
		{xs[:5], 0.5, 3},
		{xs, 0.9, 9}, // nearest rank: 9th of 10
		{xs, 1, 10},
		{xs, 0, 1},
		{nil, 0.5, 0},
	} {
		if got := quantile(c.xs, c.q); got != c.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", c.xs, c.q, got, c.want)
		}
	}
	if xs[0] != 5 {
		t.Error("quantile sorted its argument in place")
	}
}
