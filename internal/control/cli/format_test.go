package cli

import (
	"testing"

	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestFormatRate(t *testing.T) {
	for _, tc := range []struct {
		r    tbf.Rate
		want string
	}{
		{0, "0bit"},
		{999, "999bit"},
		{1000, "1kbit"},
		{9_873_456, "9.87mbit"},
		{50 * tbf.Mbit, "50mbit"},
		{1500 * tbf.Mbit, "1.5gbit"},
		{35_120_000, "35.1mbit"},
		{999_700, "1mbit"},
		{123_456_789, "123mbit"},
		{34_400 * tbf.Mbit, "34.4gbit"},
		{5 * tbf.Tbit, "5tbit"},
	} {
		if got := formatRate(tc.r); got != tc.want {
			t.Errorf("formatRate(%d) = %q, want %q", uint64(tc.r), got, tc.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{0, "0b"},
		{512, "512b"},
		{1024, "1kb"},
		{98_765, "96.5kb"},
		{1_234_567_890, "1.15gb"},
		{10 << 30, "10gb"},
		{1023 * 1024, "1023kb"},
	} {
		if got := formatBytes(tc.n); got != tc.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
