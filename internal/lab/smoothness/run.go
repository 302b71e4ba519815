package smoothness

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// DefaultInterval is the policy tick the shaperd way uses unless told
// otherwise: 250 ms, what the daemon should run with while ramps are in
// progress (8 stairs over a 2 s ramp).
const DefaultInterval = 250 * time.Millisecond

// Options tune Run. Zero fields take the defaults given.
type Options struct {
	// Clock is the real clock (required).
	Clock Clock
	// Interval is the policy tick (default DefaultInterval); Ramp the
	// ramp duration (default 2 s).
	Interval, Ramp time.Duration
	// Sample is the counter sampling period (default 100 ms).
	Sample time.Duration
	// Warmup is how long the download runs before sampling starts
	// (default 1.5 s); Before how long it is sampled before the change
	// (default 1 s); After how long after it (default Ramp + 1.5 s).
	Warmup, Before, After time.Duration
	// Streams is the number of parallel TCP streams (default 4).
	Streams int
	// GSOMaxSegs caps the wan host's GSO packets (`ip link set w-eth
	// gso_max_segs N`); default 1: MTU-sized packets. HTB and TBF charge a
	// GSO packet whole, so 64 KB packets (52 ms at 10 Mbit) would quantise
	// 100 ms windows by tens of percent; real routers see such aggregates
	// from GRO, but the targets are about the shaper, not the sender.
	// Negative leaves the device's default.
	GSOMaxSegs int
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Interval, DefaultInterval)
	def(&o.Ramp, 2*time.Second)
	def(&o.Sample, 100*time.Millisecond)
	def(&o.Warmup, 1500*time.Millisecond)
	def(&o.Before, time.Second)
	def(&o.After, o.Ramp+1500*time.Millisecond)
	if o.Streams <= 0 {
		o.Streams = 4
	}
	if o.GSOMaxSegs == 0 {
		o.GSOMaxSegs = 1
	}
	return o
}

// Run measures case c changed the way way in lab: it installs the plan's
// tree on lab.RouterLAN at c.From (the daemon's path), starts a download
// with o.Streams TCP streams from the wan host to user 0, samples the
// shaper's exit counter every o.Sample for o.Before, changes the rate and
// samples for o.After more, then removes the tree. Windows and Steps are
// relative to the sample taken just before the change request. It returns
// an error when the kernel or tc refuses something. srv is the iperf3
// server the download goes to, on user 0, started for this run (it serves
// one client): netnslab.StartServer(t, lab.LAN, lab.Users4[0]).
func Run(lab *netnslab.RouterLab, srv *netnslab.Server, c Case, way Way, o Options) (Result, error) {
	o = o.withDefaults()
	res := Result{Case: c, Way: way, Ramp: o.Ramp, Interval: o.Interval, Sample: o.Sample}
	if o.Clock == nil {
		return res, errors.New("smoothness: Options.Clock is required")
	}
	if way != WayShaperd && way != WayNaive {
		return res, fmt.Errorf("smoothness: unknown way %q", way)
	}
	dev := lab.RouterLAN
	ks, err := kernel.Open(kernel.Options{NetNS: lab.Router.Name})
	if err != nil {
		return res, fmt.Errorf("open kernel in %s: %w", lab.Router.Name, err)
	}
	defer ks.Close()
	if err := ks.Teardown(dev, ""); err != nil {
		return res, fmt.Errorf("%s: remove an earlier tree: %w", dev, err)
	}
	defer func() { _ = ks.Teardown(dev, "") }()

	d, err := newDriver(lab, c, way, o)
	if err != nil {
		return res, err
	}
	defer d.close()
	installedTree := d.installed
	res.Installed = &installedTree
	smp := &sampler{k: ks, clock: o.Clock, dev: dev}
	if c.Shaper == model.ShaperHTB {
		smp.class = d.cls.Handle
	}
	stop, err := download(lab, srv, o)
	if err != nil {
		return res, fmt.Errorf("case %s: %w", c, err)
	}
	defer stop()
	o.Clock.Sleep(o.Warmup)

	nBefore := int(o.Before / o.Sample)
	n := nBefore + int((o.After+o.Sample-1)/o.Sample)
	mark := make(chan time.Time, 1)
	type done struct {
		rs  []reading
		err error
	}
	fin := make(chan done, 1)
	start := o.Clock.Now()
	go func() {
		rs, err := smp.series(start, o.Sample, n, nBefore, mark)
		fin <- done{rs, err}
	}()
	var t0 time.Time
	select {
	case t0 = <-mark:
	case r := <-fin:
		return res, fmt.Errorf("case %s: sampling stopped before the change: %w", c, r.err)
	}
	var changeErr error
	if way == WayShaperd {
		changeErr = d.setRate(context.Background())
	} else {
		res.Steps, changeErr = naiveChange(lab, c, dev, d.cls, t0, o)
	}
	r := <-fin
	if changeErr == nil && way == WayShaperd {
		res.Steps, changeErr = rampSteps(d, c, t0, o)
		res.Phase = firstTick(res.Steps)
	}
	if changeErr != nil {
		return res, fmt.Errorf("case %s (%s): %w", c, way, changeErr)
	}
	if r.err != nil {
		return res, fmt.Errorf("case %s (%s): %w", c, way, r.err)
	}
	ss := make([]sample, len(r.rs))
	for i, x := range r.rs {
		ss[i] = sample{At: x.at.Sub(t0), Bytes: x.bytes, Took: x.took}
		res.SampleLatency = max(res.SampleLatency, x.took)
	}
	res.Windows = windowsOf(ss)
	res.Mismatches = d.mismatches()
	res.Verdict = Assess(c, res.Windows, res.Steps)
	return res, nil
}

// rampSteps are the shaperd way's writes: the daemon's set-rate step at
// once, then one per tick of its own policy ticker until the ramp is
// over. It is an error when the last one did not reach c.To.
func rampSteps(d *driver, c Case, t0 time.Time, o Options) ([]Step, error) {
	steps, err := d.steps(t0)
	if err != nil {
		return steps, err
	}
	if len(steps) == 0 {
		return steps, fmt.Errorf("the daemon wrote nothing for the change")
	}
	if last := steps[len(steps)-1]; last.Rate.BytesPerSecond() != c.To.BytesPerSecond() {
		return steps, fmt.Errorf("ramp still in progress after %v: %v installed, want %v", o.After, last.Rate, c.To)
	}
	return steps, nil
}

// naiveChange is the naive way: one tc command at t0. Its Step is at the
// tc process's exit (its netlink write is its last act).
func naiveChange(lab *netnslab.RouterLab, c Case, dev string, cls model.Class, t0 time.Time, o Options) ([]Step, error) {
	clock := o.Clock
	var to *model.TBFParams
	if c.Shaper == model.ShaperTBF {
		want, err := finalTBF(lab, c, o)
		if err != nil {
			return nil, err
		}
		to = want
	}
	args, err := naiveArgs(c, dev, cls, to)
	if err != nil {
		return nil, err
	}
	start := clock.Now()
	if _, err := lab.Router.Run(args...); err != nil {
		return nil, err
	}
	end := clock.Now()
	st := Step{At: end.Sub(t0), Rate: c.To, Took: end.Sub(start)}
	if to != nil {
		st.Burst = to.Burst
	}
	return []Step{st}, nil
}

// finalTBF returns the TBF parameters Build gives the interface at c.To
// with its configured burst: what a ramp ends with.
func finalTBF(lab *netnslab.RouterLab, c Case, o Options) (*model.TBFParams, error) {
	plan, err := Plan(c, lab.RouterLAN, lab.Users4[0], o.Interval, o.Ramp)
	if err != nil {
		return nil, err
	}
	tg := policy.Evaluate(plan, policy.Overrides{}, nil, time.Time{}).Interfaces[0].Targets
	tg.Interface.Bandwidth = c.To
	tree, err := model.Build(tg, nil)
	if err != nil {
		return nil, fmt.Errorf("build the TBF at %s: %w", c.To, err)
	}
	if tree.Root == nil || tree.Root.TBF == nil {
		return nil, fmt.Errorf("build the TBF at %s: no TBF root", c.To)
	}
	return tree.Root.TBF, nil
}

// download starts an iperf3 download (wan host -> user 0) with o.Streams
// streams, long enough for the whole measurement; stop ends it.
func download(lab *netnslab.RouterLab, srv *netnslab.Server, o Options) (stop func(), err error) {
	if o.GSOMaxSegs > 0 {
		if _, err := lab.WAN.Run("ip", "link", "set", "dev", netnslab.WANDev, "gso_max_segs", strconv.Itoa(o.GSOMaxSegs)); err != nil {
			return nil, err
		}
	}
	secs := int((o.Warmup+o.Before+o.After)/time.Second) + 3
	cmd := lab.WAN.Command("iperf3", "-c", srv.Addr.String(), "-p", strconv.Itoa(srv.Port),
		"-B", lab.WAN4.String(), "-t", strconv.Itoa(secs), "-P", strconv.Itoa(o.Streams))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start iperf3 client in %s: %w", lab.WAN.Name, err)
	}
	return func() { stopCmd(cmd) }, nil
}

// stopCmd kills a running command and reaps it.
func stopCmd(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// firstTick is when the daemon's first policy tick after the change wrote
// (the write of set-rate itself, within a few ms of the change, is not a
// tick), or 0 without one.
func firstTick(steps []Step) time.Duration {
	for _, s := range steps {
		if s.At > s.Took+20*time.Millisecond {
			return s.At
		}
	}
	return 0
}
