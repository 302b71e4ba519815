package kernel

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// manyUsers is an HTB plan with n users of 198.18.0.0/15 addresses; with
// filters false the users have no prefixes (classes only).
func manyUsers(dev string, n int, filters bool) model.Targets {
	tg := model.Targets{Interface: model.InterfaceSpec{Name: dev, Bandwidth: 10 * tbf.Gbit}}
	for i := 0; i < n; i++ {
		u := model.UserTarget{Name: fmt.Sprintf("u%05d", i), Rate: tbf.Mbit, Ceil: 10 * tbf.Mbit}
		if filters {
			a := netip.AddrFrom4([4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)})
			u.Prefixes = []netip.Prefix{netip.PrefixFrom(a, 32)}
		}
		tg.Users = append(tg.Users, u)
	}
	return tg
}

// benchNS is a namespace with a veth pair (dev "bench0") and a Kernel in it.
func benchNS(b *testing.B) (*netnslab.NS, *Kernel) {
	b.Helper()
	netnslab.Require(b)
	ns := netnslab.NewNS(b, "bench")
	ns.MustRun("ip", "link", "add", "bench0", "type", "veth", "peer", "name", "bench1")
	ns.MustRun("ip", "link", "set", "bench0", "up")
	ns.MustRun("ip", "link", "set", "bench1", "up")
	k, err := Open(Options{NetNS: ns.Name})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = k.Close() })
	return ns, k
}

// BenchmarkApply measures a full Apply of n users on an empty device
// (classes only, and classes with one u32 filter each), and tc -batch
// creating the same classes.
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{2500, 10000} {
		for _, filters := range []bool{false, true} {
			b.Run(fmt.Sprintf("users=%d/filters=%v", n, filters), func(b *testing.B) {
				ns, k := benchNS(b)
				desired, err := model.Build(manyUsers("bench0", n, filters), nil)
				if err != nil {
					b.Fatal(err)
				}
				changes := model.Diff(model.Tree{Device: "bench0"}, desired)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					res, err := k.Apply(changes)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(res.Writes), "writes/op")
					b.StopTimer()
					ns.MustRun("tc", "qdisc", "del", "dev", "bench0", "root")
					b.StartTimer()
				}
			})
		}
		b.Run(fmt.Sprintf("users=%d/tc-batch", n), func(b *testing.B) {
			ns, _ := benchNS(b)
			desired, err := model.Build(manyUsers("bench0", n, false), nil)
			if err != nil {
				b.Fatal(err)
			}
			var sb strings.Builder
			sb.WriteString("qdisc add dev bench0 root handle 1: htb default 2 r2q 10\n")
			for _, c := range desired.Classes {
				fmt.Fprintf(&sb, "class add dev bench0 parent %s classid %s htb rate %dbit ceil %dbit burst %d cburst %d quantum %d\n",
					c.Parent, c.Handle, uint64(c.Rate), uint64(c.Ceil), c.Burst, c.CBurst, c.Quantum)
			}
			file := filepath.Join(b.TempDir(), "batch")
			if err := os.WriteFile(file, []byte(sb.String()), 0o600); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ns.MustRun("tc", "-batch", file)
				b.StopTimer()
				ns.MustRun("tc", "qdisc", "del", "dev", "bench0", "root")
				b.StartTimer()
			}
		})
	}
}

// BenchmarkOneUserChange measures reconciling one user's rate change in a
// 10,000-user tree (Build + Diff + Apply, no dump): one class change;
// µs/apply is the Apply alone.
func BenchmarkOneUserChange(b *testing.B) {
	_, k := benchNS(b)
	tg := manyUsers("bench0", 10000, true)
	ids := model.NewAssignment()
	desired, err := model.Build(tg, ids)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := k.Apply(model.Diff(model.Tree{Device: "bench0"}, desired)); err != nil {
		b.Fatal(err)
	}
	actual := desired
	b.ResetTimer()
	var applying time.Duration
	for i := 0; i < b.N; i++ {
		tg.Users[5000].Ceil = tbf.Rate(11+i%2) * tbf.Mbit
		next, err := model.Build(tg, ids)
		if err != nil {
			b.Fatal(err)
		}
		changes := model.Diff(actual, next)
		start := time.Now()
		res, err := k.Apply(changes)
		applying += time.Since(start)
		if err != nil || res.Writes != 1 {
			b.Fatalf("apply: %d writes, %v; want 1", res.Writes, err)
		}
		actual = next
	}
	b.ReportMetric(float64(applying.Microseconds())/float64(b.N), "µs/apply")
}

// BenchmarkDump measures dumping a 10,000-user tree with filters and stats.
func BenchmarkDump(b *testing.B) {
	_, k := benchNS(b)
	desired, err := model.Build(manyUsers("bench0", 10000, true), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := k.Apply(model.Diff(model.Tree{Device: "bench0"}, desired)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		actual, err := k.Dump("bench0")
		if err != nil {
			b.Fatal(err)
		}
		if len(actual.Classes) != len(desired.Classes) || len(actual.Filters) != len(desired.Filters) {
			b.Fatalf("dumped %d classes, %d filters; want %d, %d", len(actual.Classes), len(actual.Filters), len(desired.Classes), len(desired.Filters))
		}
	}
}
