package clstest

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
)

// CompareThroughput measures TCP throughput (iperf3, shaper -> target in
// the peer namespace, through class cls) in lab one and lab many
// alternately (A B, B A, ...), rounds runs of seconds each, and returns
// the ratio of the medians many/one with both medians (bit/s). Each run
// must be counted by cls, not the default class.
func CompareThroughput(t testing.TB, one, many *Lab, target netip.Addr, cls model.Handle, rounds, seconds int) (ratio, alone, crowded float64) {
	t.Helper()
	measure := func(l *Lab) float64 {
		t.Helper()
		server := netnslab.StartServer(t, l.Peer, target)
		before := l.Packets()[cls.String()]
		bps, err := netnslab.RunClient(l.Shaper, netip.MustParseAddr(Src4), server, netnslab.ClientOptions{Seconds: seconds})
		if err != nil {
			t.Fatalf("iperf3: %v", err)
		}
		if got := l.Packets()[cls.String()] - before; got < 1000 {
			t.Fatalf("class %v counted %d packets of the iperf3 run", cls, got)
		}
		return bps
	}
	var a, b []float64
	for i := range rounds {
		if i%2 == 0 {
			a = append(a, measure(one))
			b = append(b, measure(many))
		} else {
			b = append(b, measure(many))
			a = append(a, measure(one))
		}
	}
	alone, crowded = Median(a), Median(b)
	return crowded / alone, alone, crowded
}

// Median is the middle value of xs (the mean of the two middle ones for an
// even count); xs must not be empty.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
