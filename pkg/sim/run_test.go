package sim

import (
	"math"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// pktBytes is the packet size of the hand-derived cases: 1000 bytes take
// 0.8 ms at 10mbit (1.25 MB/s), so a 125000-byte bucket (100 ms at
// 10mbit) holds 125 packets.
const (
	pktBytes = 1000
	bucket10 = 125000
)

// h is class 1:minor.
func h(minor uint16) model.Handle { return model.MakeHandle(1, minor) }

// oneLeaf is an HTB tree: root class 1:1 at 1gbit, leaf 1:10 at rate/ceil
// with burst = cburst = bucket bytes.
func oneLeaf(rate, ceil tbf.Rate, bucket tbf.Size) *model.Tree {
	return &model.Tree{Device: "lan0", Root: &model.Qdisc{Kind: model.ShaperHTB, Handle: model.RootQdisc},
		Classes: []model.Class{
			{Handle: h(1), Parent: model.RootQdisc, Rate: tbf.Gbit, Ceil: tbf.Gbit, Quantum: 200000},
			{Handle: h(10), Parent: h(1), Rate: rate, Ceil: ceil, Burst: bucket, CBurst: bucket, Quantum: 200000,
				Labels: model.Labels{Kind: "user", User: "a"}},
		}}
}

// tbfTree is a TBF root at rate with burst bytes.
func tbfTree(rate tbf.Rate, burst tbf.Size) *model.Tree {
	return &model.Tree{Device: "wan0", Root: &model.Qdisc{Kind: model.ShaperTBF, Handle: model.RootQdisc,
		TBF: &model.TBFParams{Rate: rate, Burst: burst, Limit: 1 << 20}}}
}

func runT(t *testing.T, tree *model.Tree, o RunOptions) *Series {
	t.Helper()
	if o.PacketSize == 0 {
		o.PacketSize = pktBytes
	}
	s, err := Run(tree, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return s
}

// packets returns the packets class hd sent in each window.
func packets(t *testing.T, s *Series, hd model.Handle) []int {
	t.Helper()
	c, ok := s.Class(hd)
	if !ok {
		t.Fatalf("no series for %s", hd)
	}
	out := make([]int, len(c.Bytes))
	for i, b := range c.Bytes {
		out[i] = int(b / pktBytes)
	}
	return out
}

// TestRunBurstAfterIdle: a 10mbit class idle for 1 s, then backlogged,
// sends its whole bucket at once (125 packets at 1.0 s) and then one
// packet every 0.8 ms (124 more before 1.1 s): 249 packets in the first
// window, 125 (10 Mbit/s) in each later one. Its tokens grew while it was
// idle (lazily, capped at the buffer).
func TestRunBurstAfterIdle(t *testing.T) {
	s := runT(t, oneLeaf(10*tbf.Mbit, 10*tbf.Mbit, bucket10), RunOptions{
		Duration: 2 * time.Second,
		Events:   []Event{{At: time.Second, Demand: map[model.Handle]Demand{h(10): Max}}},
	})
	p := packets(t, s, h(10))
	for i := 0; i < 10; i++ {
		if p[i] != 0 {
			t.Errorf("window %d (idle): %d packets, want 0", i, p[i])
		}
	}
	if p[10] < 248 || p[10] > 250 {
		t.Errorf("window 10 (burst after idle): %d packets, want 249 (bucket 125 + 124 at the rate)", p[10])
	}
	for i := 11; i < 20; i++ {
		if p[i] < 124 || p[i] > 126 {
			t.Errorf("window %d: %d packets, want 125 (10 Mbit/s)", i, p[i])
		}
	}
	if root := packets(t, s, h(1)); root[10] != p[10] {
		t.Errorf("root class counted %d packets in window 10, its leaf %d: inner classes count their leaves' packets", root[10], p[10])
	}
}

// TestRunChangeRefillsTBFNotHTB: the same parameters written again at 1 s
// and 2 s to a backlogged 10mbit shaper with a 125000-byte bucket. TBF's
// tbf_change refills the bucket: each change releases another 125 packets
// at once (249 in that window instead of 125). HTB's htb_change_class keeps
// the tokens: nothing extra.
func TestRunChangeRefillsTBFNotHTB(t *testing.T) {
	max := map[model.Handle]Demand{model.RootQdisc: Max}
	tt := tbfTree(10*tbf.Mbit, bucket10)
	s := runT(t, tt, RunOptions{Duration: 3 * time.Second, Demand: max,
		Events: []Event{{At: time.Second, Tree: tt}, {At: 2 * time.Second, Tree: tt}}})
	p := packets(t, s, model.RootQdisc)
	for i, n := range p {
		want := 125
		if i%10 == 0 { // 0: the initial full bucket; 10, 20: the refills
			want = 249
		}
		if n < want-1 || n > want+1 {
			t.Errorf("TBF window %d: %d packets, want %d", i, n, want)
		}
	}

	ht := oneLeaf(10*tbf.Mbit, 10*tbf.Mbit, bucket10)
	s = runT(t, ht, RunOptions{Duration: 3 * time.Second, Demand: map[model.Handle]Demand{h(10): Max},
		Events: []Event{{At: time.Second, Tree: ht}, {At: 2 * time.Second, Tree: ht}}})
	p = packets(t, s, h(10))
	for i, n := range p {
		want := 125
		if i == 0 {
			want = 249 // the class is created with full buckets
		}
		if n < want-1 || n > want+1 {
			t.Errorf("HTB window %d: %d packets, want %d (tokens kept on change)", i, n, want)
		}
	}
}

// TestRunShareByQuantumMatchesSolve: two 5mbit classes (ceil 30mbit,
// quanta 3000 and 6000 bytes) under a 30mbit parent, both backlogged. Each
// sends its rate on its own tokens and the parent lends the remaining
// 20mbit by DRR, 1:2: 11.67 and 18.33 Mbit/s, what Solve predicts. After
// the initial bursts (2 s) the packet-level means agree within 1 %.
func TestRunShareByQuantumMatchesSolve(t *testing.T) {
	tree := &model.Tree{Device: "lan0", Root: &model.Qdisc{Kind: model.ShaperHTB, Handle: model.RootQdisc},
		Classes: []model.Class{
			{Handle: h(1), Parent: model.RootQdisc, Rate: 30 * tbf.Mbit, Ceil: 30 * tbf.Mbit, Quantum: 200000},
			{Handle: h(10), Parent: h(1), Rate: 5 * tbf.Mbit, Ceil: 30 * tbf.Mbit, Quantum: 3000, Labels: model.Labels{User: "a"}},
			{Handle: h(11), Parent: h(1), Rate: 5 * tbf.Mbit, Ceil: 30 * tbf.Mbit, Quantum: 6000, Labels: model.Labels{User: "b"}},
		}}
	res, err := Solve(tree, func(*model.Class) Demand { return Max }, Options{PacketSize: pktBytes})
	if err != nil {
		t.Fatal(err)
	}
	s := runT(t, tree, RunOptions{Duration: 6 * time.Second, Demand: map[model.Handle]Demand{h(10): Max, h(11): Max}})
	for _, c := range res.Classes {
		cs, _ := s.Class(c.Handle)
		got := cs.BitsBetween(s.Window, 2*time.Second, 6*time.Second) / 4
		if math.Abs(got-c.Rate) > 0.01*c.Rate {
			t.Errorf("class %s: packet level %.3f Mbit/s, steady state %.3f", c.Handle, got/1e6, c.Rate/1e6)
		}
	}
	if a := res.Classes[1].Rate / 1e6; math.Abs(a-35.0/3) > 0.01 {
		t.Errorf("Solve gave a %.3f Mbit/s, want 11.667 (5 + 20/3)", a)
	}
}

// TestRunCeilRamp: a backlogged class with rate 5mbit whose ceil steps
// from 50mbit down to 10mbit by 5mbit every 250 ms (the stairs of a 2 s
// ramp), starting at 1 s. The class sends at its ceil (5mbit on its own
// tokens, the rest borrowed from the 1gbit root), so each 100 ms window
// carries the integral of the ceil over it: 50 Mbit/s before the ramp,
// the stairs' values (windows straddling a stair get half of each), 10
// Mbit/s after, within 2 packets per window (each stair can shift one
// packet). The class's own 125000-byte cbucket is empty while it is at its
// ceil, and HTB keeps it empty across the changes: no burst.
func TestRunCeilRamp(t *testing.T) {
	ceilAt := func(d time.Duration) tbf.Rate {
		if d < time.Second {
			return 50 * tbf.Mbit
		}
		k := min(int((d-time.Second)/(250*time.Millisecond))+1, 8)
		return tbf.Rate(50-5*k) * tbf.Mbit
	}
	var evs []Event
	for k := 1; k <= 8; k++ {
		evs = append(evs, Event{At: time.Second + time.Duration(k-1)*250*time.Millisecond,
			Tree: oneLeaf(5*tbf.Mbit, tbf.Rate(50-5*k)*tbf.Mbit, bucket10)})
	}
	s := runT(t, oneLeaf(5*tbf.Mbit, 50*tbf.Mbit, bucket10), RunOptions{
		Duration: 4 * time.Second, Demand: map[model.Handle]Demand{h(10): Max}, Events: evs})
	cs, _ := s.Class(h(10))
	for i := 5; i < len(cs.Bytes); i++ { // from 0.5 s: the initial bursts are over
		var want float64 // bits: the integral of the ceil over the window
		for ms := 0; ms < 100; ms++ {
			want += float64(ceilAt(time.Duration(i*100+ms)*time.Millisecond)) / 1000
		}
		if got := cs.Bits(i); math.Abs(got-want) > 2*pktBytes*8 {
			t.Errorf("window %d (%v): %.0f bits, want %.0f (±2 packets)", i, time.Duration(i)*s.Window, got, want)
		}
	}
}

// TestRunPrioBorrowsFirstMatchesSolve: under a 20mbit parent, a prio-0 and
// a prio-7 class (2mbit each, ceil 20mbit) both backlogged. The parent
// lends its spare 16mbit to the prio-0 class first, up to its ceil less
// what the other sends on its own rate: 18 and 2 Mbit/s, Solve's answer;
// the packet level agrees within 1 % after the initial bursts.
func TestRunPrioBorrowsFirstMatchesSolve(t *testing.T) {
	tree := &model.Tree{Device: "lan0", Root: &model.Qdisc{Kind: model.ShaperHTB, Handle: model.RootQdisc},
		Classes: []model.Class{
			{Handle: h(1), Parent: model.RootQdisc, Rate: 20 * tbf.Mbit, Ceil: 20 * tbf.Mbit, Quantum: 200000},
			{Handle: h(10), Parent: h(1), Rate: 2 * tbf.Mbit, Ceil: 20 * tbf.Mbit, Quantum: 20000, Prio: 7, Labels: model.Labels{User: "lo"}},
			{Handle: h(11), Parent: h(1), Rate: 2 * tbf.Mbit, Ceil: 20 * tbf.Mbit, Quantum: 20000, Prio: 0, Labels: model.Labels{User: "hi"}},
		}}
	res, err := Solve(tree, func(*model.Class) Demand { return Max }, Options{PacketSize: pktBytes})
	if err != nil {
		t.Fatal(err)
	}
	s := runT(t, tree, RunOptions{Duration: 5 * time.Second, Demand: map[model.Handle]Demand{h(10): Max, h(11): Max}})
	wantMbit := map[model.Handle]float64{h(10): 2, h(11): 18}
	for _, c := range res.Classes[1:] {
		if math.Abs(c.Rate/1e6-wantMbit[c.Handle]) > 0.01 {
			t.Errorf("Solve: class %s %.3f Mbit/s, want %.0f", c.Handle, c.Rate/1e6, wantMbit[c.Handle])
		}
		cs, _ := s.Class(c.Handle)
		got := cs.BitsBetween(s.Window, time.Second, 5*time.Second) / 4
		if math.Abs(got-c.Rate) > 0.01*c.Rate {
			t.Errorf("class %s: packet level %.3f Mbit/s, steady state %.3f", c.Handle, got/1e6, c.Rate/1e6)
		}
	}
}

// TestRunTBFPeakRate: a TBF at 10mbit with a 125000-byte burst and a
// 20mbit peak rate (2000-byte peak bucket), backlogged from 0. Without the
// peak rate the bucket would leave at once (125 packets of 1000 bytes in
// the first 10 ms); the peak bucket paces it out at 20 Mbit/s instead (one
// packet per 0.4 ms, 25 per 10 ms) after the 2 packets its own full
// bucket lets out at 0. Each packet costs the rate bucket 0.8 ms and earns
// it 0.4, so its 100 ms minus the first 2 packets' 1.6 ms last until
// 98.4 ms: 27 packets in the first 10 ms window, 25 in the next 8, 21 + 2
// in the last, then 10 Mbit/s (12.5 packets per 10 ms).
func TestRunTBFPeakRate(t *testing.T) {
	tree := tbfTree(10*tbf.Mbit, bucket10)
	tree.Root.TBF.PeakRate, tree.Root.TBF.MTU = 20*tbf.Mbit, 2000
	s := runT(t, tree, RunOptions{Duration: 500 * time.Millisecond, Window: 10 * time.Millisecond,
		Demand: map[model.Handle]Demand{model.RootQdisc: Max}})
	p := packets(t, s, model.RootQdisc)
	for i := range 10 {
		want := 25
		switch i {
		case 0:
			want = 27
		case 9:
			want = 23
		}
		if p[i] < want-1 || p[i] > want+1 {
			t.Errorf("window %d (%v): %d packets, want %d (the burst at the 20mbit peak rate)", i, time.Duration(i)*s.Window, p[i], want)
		}
	}
	sum := 0
	for i := 11; i < len(p); i++ {
		if p[i] < 12 || p[i] > 13 {
			t.Errorf("window %d (%v): %d packets, want 12 or 13 (10 Mbit/s)", i, time.Duration(i)*s.Window, p[i])
		}
		sum += p[i]
	}
	if want := 12.5 * float64(len(p)-11); math.Abs(float64(sum)-want) > 2 {
		t.Errorf("from 110 ms: %d packets, want %.0f", sum, want)
	}
}

// TestRunPacedSource: a source paced at 4mbit (one 1000-byte packet every
// 2 ms) through a 10mbit class gets all it sends, 50 packets per 100 ms;
// dropped to 0 at 1 s it sends nothing more (its queue is empty), and
// raised to max at 1.5 s it gets the class's burst and then its rate.
func TestRunPacedSource(t *testing.T) {
	s := runT(t, oneLeaf(10*tbf.Mbit, 10*tbf.Mbit, bucket10), RunOptions{
		Duration: 2 * time.Second,
		Demand:   map[model.Handle]Demand{h(10): Demand(4 * tbf.Mbit)},
		Events: []Event{
			{At: time.Second, Demand: map[model.Handle]Demand{h(10): 0}},
			{At: 1500 * time.Millisecond, Demand: map[model.Handle]Demand{h(10): Max}},
		},
	})
	p := packets(t, s, h(10))
	for i, n := range p {
		want := 50
		switch {
		case i >= 10 && i < 15:
			want = 0
		case i == 15:
			want = 249 // the bucket, full again after 500 ms idle, then the rate
		case i > 15:
			want = 125
		}
		if n < want-1 || n > want+1 {
			t.Errorf("window %d: %d packets, want %d", i, n, want)
		}
	}
}

// TestRunLinkRate: a backlogged 10mbit TBF with a 125000-byte (1 Mbit)
// bucket on a 100mbit link. The full bucket cannot leave at once: it
// drains at 100 - 10 = 90 Mbit/s, empty after 11.1 ms, so the first 10 ms
// carry 125 packets of 1000 bytes (the link's rate, not the 137 an
// infinitely fast link passes), and the first 100 ms 250 as before.
func TestRunLinkRate(t *testing.T) {
	s := runT(t, tbfTree(10*tbf.Mbit, bucket10), RunOptions{Duration: 100 * time.Millisecond, Window: 10 * time.Millisecond,
		Link: 100 * tbf.Mbit, Demand: map[model.Handle]Demand{model.RootQdisc: Max}})
	p := packets(t, s, model.RootQdisc)
	if p[0] < 124 || p[0] > 126 {
		t.Errorf("first 10 ms: %d packets, want 125 (100 Mbit/s)", p[0])
	}
	total := 0
	for _, n := range p {
		total += n
	}
	if total < 248 || total > 251 {
		t.Errorf("first 100 ms: %d packets, want 250 (bucket 139 at the link rate, then 10 Mbit/s)", total)
	}
}
