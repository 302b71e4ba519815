package bpfcls

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel/internal/clstest"
	"github.com/shaperd/shaperd/pkg/model"
)

// BenchmarkUserChangeAt100k measures one user's change (Add with a new
// class: one map update, no tc write) on a classifier that holds 100,000
// IPv4 /32 users, and reports p50 and p99 per update (ns). Run:
//
//	go test ./pkg/kernel/bpfcls -run '^$' -bench UserChangeAt100k -benchtime 20000x
func BenchmarkUserChangeAt100k(b *testing.B) {
	netnslab.Require(b)
	const users = 100000
	l := newLab(b)
	r := rand.New(rand.NewPCG(1, 2))
	fs := make([]model.Filter, 0, users)
	seen := map[netip.Addr]bool{}
	for len(fs) < users {
		a := netip.AddrFrom4([4]byte{198, byte(18 + r.IntN(2)), byte(r.IntN(256)), byte(r.IntN(256))})
		if seen[a] {
			continue
		}
		seen[a] = true
		fs = append(fs, model.Filter{Prefix: netip.PrefixFrom(a, 32), Match: model.MatchDst, ClassID: clstest.UserClass(len(fs) % 1000)})
	}
	start := time.Now()
	for _, f := range fs {
		if _, err := l.c.Add(f); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("installed %d users in %v", users, time.Since(start))
	start = time.Now()
	if got, err := l.c.Dump(); err != nil || len(got) != users {
		b.Fatalf("Dump: %d filters, %v", len(got), err)
	}
	b.Logf("dumped %d users (both maps read back) in %v", users, time.Since(start))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		j := r.IntN(users)
		fs[j].ClassID = clstest.UserClass(int(fs[j].ClassID.Minor()-model.FirstUserMinor+1) % 2000) // another class
		t0 := time.Now()
		w, err := l.c.Add(fs[j])
		lat = append(lat, time.Since(t0))
		if err != nil || w != 1 {
			b.Fatalf("Add: %d writes, %v", w, err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	b.ReportMetric(float64(p(0.50).Nanoseconds()), "p50-ns/update")
	b.ReportMetric(float64(p(0.99).Nanoseconds()), "p99-ns/update")
	b.Logf("%d updates at %d users: p50 %v p99 %v max %v", len(lat), users, p(0.50), p(0.99), lat[len(lat)-1])
	if err := l.c.Remove(); err != nil {
		b.Fatal(err)
	}
}
