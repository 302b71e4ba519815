package u32

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel/internal/clstest"
	"github.com/shaperd/shaperd/pkg/model"
)

// TestThroughputIndependentOfUsers is the O(1) evidence: TCP throughput
// (iperf3, shaper -> peer through HTB) to a user whose filter was added
// last of 10,000 compared with that user's filter alone.
//
// Two identical labs, one with the target's filter only and one with
// 10,000 filters (the target's added last), are measured alternately (A B,
// B A, A B), 3 runs of 3 s each, and the medians compared, so that load
// from others on the machine (±15% and worse per run) hits both sides
// alike and a single disturbed run does not decide. The test
// asserts a ratio of at least 0.80: a linear list of 10,000 u32 filters
// gives ~0.26 (docs/kernel.md), so this still catches a fall back to linear
// classification, while the strict 0.95 target is checked by the bench
// script from the log line
//
//	throughput ratio last-of-10000/1-user: X.XXX (1 user A Gbit/s, 10000 users B Gbit/s)
//
// A ratio below 0.80 is measured again (2 more runs each, medians of 5)
// before it fails. A control, logged only, measures the 10,000 filters as
// a linear u32 list in front of shaperd's to show what the test detects.
func TestThroughputIndependentOfUsers(t *testing.T) {
	if testing.Short() {
		t.Skip("throughput measurement skipped in -short mode")
	}
	const users, seconds, rounds, minRatio = 10000, 3, 3, 0.80
	target := netip.MustParseAddr("198.18.7.7")
	tf := model.Filter{Prefix: netip.PrefixFrom(target, 32), Match: model.MatchDst, ClassID: userClass(0)}
	r := rand.New(rand.NewPCG(9, 10))
	var others []model.Filter
	seen := map[netip.Addr]bool{target: true}
	for len(others) < users-1 {
		a := netip.AddrFrom4([4]byte{198, byte(18 + r.IntN(2)), byte(r.IntN(256)), byte(r.IntN(256))})
		if seen[a] || a.As4()[2] == 255 { // keep off the lab's 198.19.255.0/30
			continue
		}
		seen[a] = true
		others = append(others, model.Filter{Prefix: netip.PrefixFrom(a, 32), Match: model.MatchDst, ClassID: userClass(1 + len(others)%100)})
	}

	one, many := throughputLab(t, target), throughputLab(t, target)
	if _, err := one.c.Add(tf); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	writes := 0
	for _, f := range slices.Concat(others, []model.Filter{tf}) { // the target's filter is added last
		w, err := many.c.Add(f)
		if err != nil {
			t.Fatal(err)
		}
		writes += w
	}
	t.Logf("installed %d filters (%d netlink writes) in %v", users, writes, time.Since(start))
	start = time.Now()
	fs, err := many.c.Dump()
	if err != nil || len(fs) != users {
		t.Fatalf("Dump: %d filters, %v; want %d", len(fs), err, users)
	}
	t.Logf("dumped and decoded %d filters in %v", len(fs), time.Since(start))

	// measure runs iperf3 once in lab l and checks that the target's class
	// (not the default one) carried it.
	measure := func(l *lab, what string) float64 {
		t.Helper()
		server := netnslab.StartServer(t, l.peer, target) // serves one run
		before := l.packets()[tf.ClassID.String()]
		bps, err := netnslab.RunClient(l.shaper, netip.MustParseAddr(labSrc4), server, netnslab.ClientOptions{Seconds: seconds})
		if err != nil {
			t.Fatalf("iperf3 (%s): %v", what, err)
		}
		if got := l.packets()[tf.ClassID.String()] - before; got < 1000 {
			t.Fatalf("%s: the target's class counted %d packets of the iperf3 run", what, got)
		}
		t.Logf("%s: %.2f Gbit/s", what, bps/1e9)
		return bps
	}
	var alone, crowded []float64
	run := func(n int) float64 {
		for range n {
			a := func() { alone = append(alone, measure(one, "1 user")) }
			b := func() { crowded = append(crowded, measure(many, fmt.Sprintf("%d users, target last", users))) }
			if len(alone)%2 == 1 { // alternate which goes first: A B, B A, A B, ...
				a, b = b, a
			}
			a()
			b()
		}
		return clstest.Median(crowded) / clstest.Median(alone)
	}
	ratio := run(rounds)
	if ratio < minRatio {
		t.Logf("ratio of medians %.3f below %.2f: 2 more runs each", ratio, minRatio)
		ratio = run(2)
	}
	t.Logf("throughput ratio last-of-%d/1-user: %.3f (1 user %.2f Gbit/s, %d users %.2f Gbit/s)",
		users, ratio, clstest.Median(alone)/1e9, users, clstest.Median(crowded)/1e9)
	if ratio < minRatio {
		t.Errorf("median throughput with %d users is %.1f%% of that with 1 (%.2f vs %.2f Gbit/s, %d runs each), want >= %.0f%%",
			users, 100*ratio, clstest.Median(crowded)/1e9, clstest.Median(alone)/1e9, len(alone), 100*minRatio)
	}

	// Control, logged only: the 10,000 filters also as a linear u32 list
	// (priority 99, tried before shaperd's) in the crowded lab.
	f, err := os.CreateTemp(t.TempDir(), "linear")
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for _, o := range others {
		fmt.Fprintf(w, "filter add dev %s parent 1: protocol ip prio 99 u32 match ip dst %v flowid %v\n", many.dev, o.Prefix, o.ClassID)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	many.shaper.MustRun("tc", "-batch", f.Name())
	lin := measure(many, fmt.Sprintf("control: %d linear u32 filters before the target", users-1))
	t.Logf("control ratio linear/1-user: %.3f", lin/clstest.Median(alone))
}

// throughputLab is a lab whose peer also has address target, with the
// classes of the target (userClass(0)) and of 100 others, and shaperd's
// empty skeleton of tables.
func throughputLab(t *testing.T, target netip.Addr) *lab {
	t.Helper()
	l := newLab(t)
	l.peer.MustRun("ip", "addr", "add", target.String()+"/32", "dev", "pe0")
	l.addClasses(101)
	if _, err := l.c.Ensure(); err != nil {
		t.Fatal(err)
	}
	return l
}
