package simlab

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/sim"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Measurement windows: the counters are read warmup after the loads start
// and again window later.
const (
	warmup = 2 * time.Second
	window = 5 * time.Second
)

// How close the simulator's prediction must be to the kernel: every class
// within 8 % or 0.5 Mbit/s, whichever is larger; the interface total
// within 3 %.
const (
	classFrac  = 0.08
	classAbs   = 0.5e6
	totalFrac  = 0.03
	payloadV4  = 1448.0 // TCP payload of a 1514-byte IPv4 frame with timestamps
	frameBytes = 1514.0
)

// lab is a router lab with a Kernel in its router namespace.
type lab struct {
	*netnslab.RouterLab
	k *kernel.Kernel
}

func newLab(t *testing.T, users int) *lab {
	t.Helper()
	netnslab.Require(t)
	l := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: users})
	k, err := kernel.Open(kernel.Options{NetNS: l.Router.Name})
	if err != nil {
		t.Fatalf("kernel.Open: %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return &lab{RouterLab: l, k: k}
}

// apply builds tg, applies it and verifies it; it returns the tree.
func (l *lab) apply(t *testing.T, tg model.Targets) model.Tree {
	t.Helper()
	desired, err := model.Build(tg, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if tg.Interface.Direction == model.Ingress {
		if err := l.k.EnsureIFB(tg.Interface.IFB); err != nil {
			t.Fatalf("EnsureIFB: %v", err)
		}
	}
	actual, err := l.k.Actual(desired)
	if err != nil {
		t.Fatalf("Actual: %v", err)
	}
	if _, err := l.k.Apply(model.Diff(actual, desired)); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	mm, err := l.k.Verify(desired)
	if err != nil || len(mm) > 0 {
		t.Fatalf("Verify: %v %s", err, strings.Join(mm, "\n"))
	}
	return desired
}

// noGSO makes the senders of the lab send single frames: gso_max_segs 1
// on the wan and lan hosts' devices keeps TCP from building TSO packets.
func (l *lab) noGSO(t *testing.T) {
	t.Helper()
	l.WAN.MustRun("ip", "link", "set", netnslab.WANDev, "gso_max_segs", "1")
	l.LAN.MustRun("ip", "link", "set", netnslab.LANDev, "gso_max_segs", "1")
}

// load is one user's traffic: saturating (Bitrate "") with Streams TCP
// streams, or paced at Bitrate (iperf3 -b, TCP payload per stream).
type load struct {
	User    netip.Addr
	Dir     netnslab.Direction
	Streams int
	Bitrate string
}

// counters is one reading of a device's counters: bytes per class and of
// the root qdisc.
type counters struct {
	at      time.Time
	classes map[model.Handle]uint64
	root    uint64
}

func (l *lab) read(device string) (counters, error) {
	tree, err := l.k.Dump(device)
	if err != nil {
		return counters{}, err
	}
	c := counters{at: time.Now(), classes: map[model.Handle]uint64{}}
	for _, cl := range tree.Classes {
		if cl.Stats != nil {
			c.classes[cl.Handle] = cl.Stats.Bytes
		}
	}
	if tree.Root != nil && tree.Root.Stats != nil {
		c.root = tree.Root.Stats.Bytes
	}
	return c, nil
}

// rates are bits/s per class and of the root qdisc over a window, and
// each load's TCP goodput as its iperf3 receiver saw it over the whole run.
type rates struct {
	classes map[model.Handle]float64
	root    float64
	goodput []float64
}

// run starts every load, reads device's counters after warmup and again
// after window, waits for the loads and returns the rates in between.
func (l *lab) run(t *testing.T, device string, loads ...load) rates {
	t.Helper()
	secs := strconv.Itoa(int((warmup + window + 2*time.Second) / time.Second))
	type client struct {
		argv []string
		ns   *netnslab.NS
	}
	clients := make([]client, len(loads))
	for i, ld := range loads {
		wan := l.WAN4
		if ld.User.Is6() {
			wan = l.WAN6
		}
		var c client
		var srv *netnslab.Server
		switch ld.Dir {
		case netnslab.Download:
			srv = netnslab.StartServer(t, l.LAN, ld.User)
			c = client{ns: l.WAN, argv: []string{"-B", wan.String()}}
		case netnslab.Upload:
			srv = netnslab.StartServer(t, l.WAN, wan)
			c = client{ns: l.LAN, argv: []string{"-B", ld.User.String()}}
		}
		streams := max(ld.Streams, 1)
		c.argv = append([]string{"iperf3", "-J", "-c", srv.Addr.String(), "-p", strconv.Itoa(srv.Port), "-t", secs,
			"-P", strconv.Itoa(streams)}, c.argv...)
		if ld.Bitrate != "" {
			c.argv = append(c.argv, "-b", ld.Bitrate)
		}
		clients[i] = c
	}
	errs := make(chan error, len(clients))
	goodput := make([]float64, len(clients))
	for i, c := range clients {
		cmd := c.ns.Command(c.argv...)
		go func() {
			out, err := cmd.Output()
			if err == nil {
				goodput[i], err = netnslab.ParseIperf3(string(out))
			}
			if err != nil {
				err = fmt.Errorf("%s: %w: %.300s", strings.Join(c.argv, " "), err, out)
			}
			errs <- err
		}()
	}
	time.Sleep(warmup)
	a, errA := l.read(device)
	time.Sleep(window)
	b, errB := l.read(device)
	if os.Getenv("SIMLAB_VERBOSE") != "" {
		out, _ := l.Router.Run("tc", "-s", "class", "show", "dev", device)
		t.Logf("tc -s class show dev %s:\n%s", device, out)
	}
	var failed error
	for range clients { // wait for every client before failing
		if err := <-errs; err != nil && failed == nil {
			failed = err
		}
	}
	if failed != nil {
		t.Fatal(failed)
	}
	if errA != nil || errB != nil {
		t.Fatalf("read counters of %s: %v %v", device, errA, errB)
	}
	dt := b.at.Sub(a.at).Seconds()
	r := rates{classes: map[model.Handle]float64{}, root: float64(b.root-a.root) * 8 / dt, goodput: goodput}
	for h, v := range b.classes {
		r.classes[h] = float64(v-a.classes[h]) * 8 / dt
	}
	return r
}

// errRow is one line of a prediction-error table.
type errRow struct {
	name            string
	predicted, got  float64
	limitedBy       string
	absErr, relErr  float64
	withinTolerance bool
}

func newErrRow(name string, predicted, got float64, limitedBy string, frac, abs float64) errRow {
	e := errRow{name: name, predicted: predicted, got: got, limitedBy: limitedBy, absErr: math.Abs(got - predicted)}
	if predicted > 0 {
		e.relErr = e.absErr / predicted
	}
	e.withinTolerance = e.absErr <= max(frac*predicted, abs)
	return e
}

// report logs the table, fails for rows out of tolerance and returns the
// max and median relative error.
func report(t *testing.T, scenario string, rows []errRow) (maxErr, median float64) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s: predicted vs measured (kernel class counters, %v):\n", scenario, window)
	fmt.Fprintf(&b, "  %-10s %12s %12s %8s  %s\n", "class", "predicted", "measured", "error", "limited_by")
	var errs []float64
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-10s %9.3f Mb %9.3f Mb %7.2f%%  %s\n", r.name, r.predicted/1e6, r.got/1e6, 100*r.relErr, r.limitedBy)
		errs = append(errs, r.relErr)
	}
	sort.Float64s(errs)
	maxErr, median = errs[len(errs)-1], errs[len(errs)/2]
	if len(errs)%2 == 0 {
		median = (errs[len(errs)/2-1] + errs[len(errs)/2]) / 2
	}
	fmt.Fprintf(&b, "  max error %.2f%%, median %.2f%%", 100*maxErr, 100*median)
	t.Log(b.String())
	for _, r := range rows {
		if !r.withinTolerance {
			t.Errorf("%s %s: measured %.3f Mbit/s, predicted %.3f (error %.3f Mbit/s, %.1f%%)",
				scenario, r.name, r.got/1e6, r.predicted/1e6, r.absErr/1e6, 100*r.relErr)
		}
	}
	return maxErr, median
}

// predict solves tree with demands by user name (missing: 0) for packets
// of pkt bytes.
func predict(t *testing.T, tree *model.Tree, demand map[string]sim.Demand, pkt tbf.Size) *sim.Result {
	t.Helper()
	res, err := sim.Solve(tree, func(c *model.Class) sim.Demand { return demand[c.Labels.User] }, sim.Options{PacketSize: pkt})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// compareHTB builds the error table of every user class and the total.
func compareHTB(t *testing.T, scenario string, res *sim.Result, got rates) {
	t.Helper()
	var rows []errRow
	var total float64
	for _, c := range res.Classes {
		if c.Labels.Kind == "node" {
			// A node's class is what its subtree sent together.
			rows = append(rows, newErrRow("node "+c.Labels.Node, c.Rate, got.classes[c.Handle], string(c.LimitedBy), classFrac, classAbs))
			continue
		}
		if !c.Leaf || c.Labels.Kind != "user" {
			continue
		}
		m := got.classes[c.Handle]
		total += m
		rows = append(rows, newErrRow(c.Labels.User, c.Rate, m, string(c.LimitedBy), classFrac, classAbs))
	}
	total += got.classes[model.DefaultClass]
	rows = append(rows, newErrRow("TOTAL", res.Total, total, "", totalFrac, 0))
	report(t, scenario, rows)
}

// paced is the class rate (frames on the wire) of an IPv4 TCP sender paced
// at payload bits/s (iperf3 -b reads "2M" as 2*2^20 bits/s).
func paced(payload float64) sim.Demand { return sim.Demand(payload * frameBytes / payloadV4) }
