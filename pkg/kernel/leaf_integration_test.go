package kernel

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// The leaf kinds this kernel has are applied as encoded: `tc -s -j qdisc
// show` reports each leaf's kind and limit as the model has them, a second
// reconcile changes nothing, and a changed limit is applied in place.
func TestLeafQdiscsInKernel(t *testing.T) {
	lab, k := labKernel(t, 3)
	have, err := LeafKindsAvailable()
	if err != nil {
		t.Fatal(err)
	}
	leaves := []*model.LeafQdisc{
		{Kind: model.LeafPfifo, Limit: 100},
		{Kind: model.LeafBfifo, Latency: 50 * time.Millisecond}, // 5mbit ceil: 31250 bytes
		{Kind: model.LeafBfifo, Limit: 20000},
	}
	for _, kind := range []string{model.LeafFQCodel, model.LeafSFQ, model.LeafCake} {
		if have[kind] {
			leaves = append(leaves, map[string]*model.LeafQdisc{
				model.LeafFQCodel: {Kind: kind, Limit: 500, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond},
				model.LeafSFQ:     {Kind: kind, Limit: 100},
				model.LeafCake:    {Kind: kind, Diffserv: "besteffort"},
			}[kind])
		}
	}
	tg := model.Targets{Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Bandwidth: 100 * tbf.Mbit}}
	for i, l := range leaves {
		u := user(fmt.Sprintf("u%d", i), "t", netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)}), 5*tbf.Mbit, 5*tbf.Mbit)
		u.Leaf = l
		tg.Users = append(tg.Users, u)
	}
	desired, _ := reconcile(t, k, tg, nil)
	type shown struct {
		Kind    string `json:"kind"`
		Handle  string `json:"handle"`
		Parent  string `json:"parent"`
		Options struct {
			Limit json.RawMessage `json:"limit"`
		} `json:"options"`
	}
	var qdiscs []shown
	out := lab.Router.MustRun("tc", "-s", "-j", "qdisc", "show", "dev", netnslab.RouterLANDev)
	if err := json.Unmarshal([]byte(out), &qdiscs); err != nil {
		t.Fatalf("tc -j qdisc show: %v: %s", err, out)
	}
	for _, c := range desired.Classes {
		if c.Labels.Kind != "user" {
			continue
		}
		want := c.Leaf
		i := slices.IndexFunc(qdiscs, func(q shown) bool { return q.Parent == c.Handle.String() })
		if i < 0 {
			t.Errorf("user %s: no leaf qdisc under %s in\n%s", c.Labels.User, c.Handle, out)
			continue
		}
		q := qdiscs[i]
		limit := string(q.Options.Limit) // pfifo: packets; bfifo: bytes
		if q.Kind == model.LeafTBF {
			limit = strconv.FormatUint(uint64(dumpedLeaf(t, k, c.Handle).Limit), 10) // tc shows a tbf's limit as "lat"
		}
		wantLimit := strconv.FormatUint(uint64(want.Limit), 10)
		t.Logf("user %s: tc shows %s %s limit %s; model %+v", c.Labels.User, q.Kind, q.Handle, limit, *want)
		if q.Kind != want.Kind || q.Handle != LeafHandle(c.Handle).String() || (want.Limit != 0 && limit != wantLimit) {
			t.Errorf("user %s: tc shows %s %s limit %s, want %s %s limit %s", c.Labels.User, q.Kind, q.Handle, limit,
				want.Kind, LeafHandle(c.Handle), wantLimit)
		}
	}
	if want := uint32(5 * tbf.Mbit / 8 * 50 / 1000); desired.Classes[slices.IndexFunc(desired.Classes, func(c model.Class) bool { return c.Labels.User == "u1" })].Leaf.Limit != want {
		t.Errorf("latency-sized bfifo: want limit %d", want)
	}
	// Change one limit: applied in place.
	tg.Users[0].Leaf = &model.LeafQdisc{Kind: model.LeafPfifo, Limit: 200}
	_, res := reconcile(t, k, tg, nil)
	if res.Writes != 1 {
		t.Errorf("changing one leaf's limit took %d writes, want 1", res.Writes)
	}
	// A small move of a class's ceil (one step of a ramp) resizes its
	// latency-sized leaf too, in place: 5.5mbit * 50ms.
	tg.Users[1].Ceil = 5500 * tbf.Kbit
	reconcile(t, k, tg, nil)
	u1 := desired.Classes[slices.IndexFunc(desired.Classes, func(c model.Class) bool { return c.Labels.User == "u1" })].Handle
	if l := dumpedLeaf(t, k, u1); l.Kind != model.LeafTBF || l.Limit != 34375 || l.Segment != 1536 {
		t.Errorf("after the ceil moved 10%%: u1's leaf %+v, want the segmenting tbf with limit 34375 and max_size 1536", l)
	}
}

// dumpedLeaf is the leaf qdisc under class h of the router's lan device,
// as the kernel dumps it.
func dumpedLeaf(t *testing.T, k *Kernel, h model.Handle) model.LeafQdisc {
	t.Helper()
	tr, err := k.Dump(netnslab.RouterLANDev)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tr.Classes {
		if c.Handle == h && c.Leaf != nil {
			return *c.Leaf
		}
	}
	t.Fatalf("no leaf under class %s", h)
	return model.LeafQdisc{}
}

// rtts pings dst from ns count times at interval and returns the RTTs.
func rtts(t *testing.T, ns *netnslab.NS, dst netip.Addr, count int, interval time.Duration) []time.Duration {
	t.Helper()
	if _, err := exec.LookPath("ping"); err != nil {
		t.Fatalf("ping is needed (apt-get install iputils-ping): %v", err)
	}
	out, _ := ns.Run("ping", "-n", "-c", strconv.Itoa(count), "-i", strconv.FormatFloat(interval.Seconds(), 'f', 2, 64), "-W", "5", dst.String())
	var d []time.Duration
	for _, m := range regexp.MustCompile(`time=([0-9.]+) ms`).FindAllStringSubmatch(out, -1) {
		ms, _ := strconv.ParseFloat(m[1], 64)
		d = append(d, time.Duration(ms*float64(time.Millisecond)))
	}
	if len(d) < count/2 {
		t.Fatalf("ping %s: %d of %d answers:\n%s", dst, len(d), count, out)
	}
	slices.Sort(d)
	return d
}

// quantile returns the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Ping RTT to a user whose 5mbit class is saturated by a TCP download
// (4 streams, as a browser or a torrent opens several),
// with the old leaf (pfifo, 1000 packets) and with shaperd's default on
// this kernel (fq_codel where present, else a bfifo sized to 50ms). The
// default's p99 stays under 2 x queue_latency + the idle RTT; pfifo's
// queue holds seconds. The figures are in
// docs/measurements/2026-12-02-queues-overhead-oversubscription.md.
func TestQueueLatency(t *testing.T) {
	lab, k := labKernel(t, 1)
	have, err := LeafKindsAvailable()
	if err != nil {
		t.Fatal(err)
	}
	const latency = 50 * time.Millisecond
	def := &model.LeafQdisc{Kind: model.LeafBfifo, Latency: latency}
	if have[model.LeafFQCodel] {
		def = &model.LeafQdisc{Kind: model.LeafFQCodel}
	}
	rate := 5 * tbf.Mbit
	alice := lab.Users4[0]
	base := rtts(t, lab.WAN, alice, 10, 100*time.Millisecond)
	idle := quantile(base, 0.5)
	t.Logf("idle RTT p50 %v p99 %v", idle, quantile(base, 0.99))

	for _, tc := range []struct {
		name string
		leaf *model.LeafQdisc
	}{
		{"pfifo 1000 packets", &model.LeafQdisc{Kind: model.LeafPfifo, Limit: 1000}},
		{"default (" + def.Kind + ")", def},
	} {
		tg := model.Targets{Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Bandwidth: 100 * tbf.Mbit, Leaf: tc.leaf},
			Users: []model.UserTarget{user("alice", "t", alice, rate, rate)}}
		reconcile(t, k, tg, nil)
		var wg sync.WaitGroup
		var got float64
		wg.Add(1)
		go func() {
			defer wg.Done()
			got = lab.Measure(t, 12, netnslab.Flow{User: alice, Dir: netnslab.Download, Streams: 4})[0]
		}()
		time.Sleep(5 * time.Second) // the omitted second, slow start, the queue filling
		d := rtts(t, lab.WAN, alice, 60, 100*time.Millisecond)
		wg.Wait()
		p50, p99 := quantile(d, 0.5), quantile(d, 0.99)
		t.Logf("%s: download %.2f Mbit/s; RTT under load p50 %v p99 %v (%d pings)", tc.name, got/1e6, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), len(d))
		if tc.leaf == def {
			if limit := 2*latency + idle; p99 > limit {
				t.Errorf("%s: p99 RTT %v, want under 2 x %v + idle %v = %v", tc.name, p99, latency, idle, limit)
			}
		} else if limit := 2*latency + idle; p99 <= limit {
			t.Errorf("%s: p99 RTT %v: the 1000-packet queue should hold more than %v at 5mbit (the comparison is void)", tc.name, p99, limit)
		}
		if got < goodput(rate, false)*0.9 {
			t.Errorf("%s: the download got %.2f Mbit/s, below 90%% of the class's goodput %.2f", tc.name, got/1e6, goodput(rate, false)/1e6)
		}
	}
}
