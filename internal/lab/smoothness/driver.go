package smoothness

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/lab/daemonlab"
	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/model/modeltest"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// driver is the daemon itself (internal/daemon, run by daemonlab) on the
// lab's router, with its kernel writes recorded: a change reaches the
// kernel on the daemon's own path (the control API's set-rate, a policy
// step, ramp steps on the daemon's own policy ticker, the incremental
// desired tree, Apply, Verify).
type driver struct {
	lab *daemonlab.Lab
	c   Case
	dev string
	// installed is the tree after the first apply (a dump, with the
	// measured user's class labelled); cls is that class (HTB).
	installed model.Tree
	cls       model.Class
	tmp       string
	closed    bool
}

// newDriver starts the daemon on lab's router with case c's plan, applies
// it and brings it to c.From (a TBF's bandwidth is the higher of From and
// To: from a lower From, by an interface override set at once). For the
// naive way the daemon stops then, so that it does not repair the tc
// change; for the shaperd way its loop runs on.
func newDriver(lab *netnslab.RouterLab, c Case, way Way, o Options) (*driver, error) {
	dev, user := lab.RouterLAN, lab.Users4[0]
	main, users, err := planText(c, dev, user, o.Interval, o.Ramp)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "smoothness-")
	if err != nil {
		return nil, err
	}
	dl, err := daemonlab.Start(tmp, daemonlab.Options{NetNS: lab.Router.Name, Main: main, Users: users})
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("case %s: %w", c, err)
	}
	d := &driver{lab: dl, c: c, dev: dev, tmp: tmp}
	if err := dl.Once(context.Background()); err != nil {
		d.close()
		return nil, fmt.Errorf("case %s: install: %w", c, err)
	}
	dl.Run()
	if c.Shaper == model.ShaperTBF && c.From < c.To {
		if err := d.setTo(context.Background(), c.From, true); err != nil {
			d.close()
			return nil, fmt.Errorf("case %s: start at %v: %w", c, c.From, err)
		}
		if err := d.waitRate(c.From, 2*time.Second); err != nil {
			d.close()
			return nil, fmt.Errorf("case %s: %w", c, err)
		}
	}
	tree, err := dl.Kernel.Dump(dev)
	if err != nil {
		d.close()
		return nil, fmt.Errorf("case %s: dump the installed tree: %w", c, err)
	}
	if c.Shaper == model.ShaperHTB {
		h, ok := filterClass(tree, user.String())
		if !ok {
			d.close()
			return nil, fmt.Errorf("case %s: no filter for user %s (%s) in the installed tree", c, UserName, user)
		}
		for i := range tree.Classes {
			if tree.Classes[i].Handle == h {
				tree.Classes[i].Labels = model.Labels{Kind: "user", Tier: TierName, User: UserName}
				d.cls = tree.Classes[i]
			}
		}
		if d.cls.Handle == 0 {
			d.close()
			return nil, fmt.Errorf("case %s: no class %s for user %s", c, h, UserName)
		}
	}
	d.installed = tree
	dl.Kernel.Reset()
	if way == WayNaive {
		d.close()
		d.tmp = ""
	}
	return d, nil
}

// filterClass returns the class the filter of addr points to.
func filterClass(t model.Tree, addr string) (model.Handle, bool) {
	for _, f := range t.Filters {
		if f.Prefix.Addr().String() == addr && f.Prefix.IsSingleIP() {
			return f.ClassID, true
		}
	}
	return 0, false
}

// setRate asks the daemon for c.To on the measured object, as `shaperctl
// set-rate` does, with the plan's ramp.
func (d *driver) setRate(ctx context.Context) error { return d.setTo(ctx, d.c.To, false) }

// setTo sets the measured object to rate, as `shaperctl set-rate` does (a
// user override for HTB, an interface override for TBF), at once or with
// the plan's ramp.
func (d *driver) setTo(ctx context.Context, rate tbf.Rate, now bool) error {
	target := UserName
	if d.c.Shaper == model.ShaperTBF {
		target = "iface:" + d.dev
	}
	req := control.SetRateRequest{Target: target, Rate: rate}
	if now {
		req.Ramp = control.DurationPtr(0)
	}
	_, err := d.lab.Daemon.SetRate(ctx, req)
	return err
}

// waitRate waits until the kernel holds rate on the measured object.
func (d *driver) waitRate(rate tbf.Rate, limit time.Duration) error {
	end := time.Now().Add(limit)
	for {
		tree, err := d.lab.Kernel.Dump(d.dev)
		if err != nil {
			return err
		}
		if tree.Root != nil && tree.Root.TBF != nil && tree.Root.TBF.Rate.BytesPerSecond() == rate.BytesPerSecond() {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("the kernel does not hold %v after %v", rate, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// steps replays the daemon's writes since the install on the installed
// tree: one Step per write, at its middle (relative to t0), with what it
// left on the measured object and the whole tree after it.
func (d *driver) steps(t0 time.Time) ([]Step, error) {
	tree := d.installed
	var out []Step
	for i, w := range d.lab.Kernel.Writes() {
		if w.Err != nil {
			return out, fmt.Errorf("write %d: %w", i, w.Err)
		}
		next, err := modeltest.ApplyChanges(tree, w.Changes)
		if err != nil {
			return out, fmt.Errorf("replay write %d: %w", i, err)
		}
		tree = next
		rate, burst := d.measured(tree)
		t := tree
		out = append(out, Step{At: w.Mid().Sub(t0), Rate: rate, Burst: burst, Took: w.End.Sub(w.Start), Tree: &t})
	}
	return out, nil
}

// measured returns what t installs on the measured object: the user's
// class rate (HTB; burst 0) or the TBF rate and burst.
func (d *driver) measured(t model.Tree) (tbf.Rate, tbf.Size) {
	if d.c.Shaper == model.ShaperTBF {
		if t.Root != nil && t.Root.TBF != nil {
			return t.Root.TBF.Rate, t.Root.TBF.Burst
		}
		return 0, 0
	}
	for _, c := range t.Classes {
		if c.Handle == d.cls.Handle {
			return c.Rate, 0
		}
	}
	return 0, 0
}

// mismatches are what the daemon's verifications found.
func (d *driver) mismatches() []string { return d.lab.Kernel.Mismatches() }

// close stops the daemon (its shaping stays; Run tears the tree down).
func (d *driver) close() {
	if !d.closed {
		_ = d.lab.Close()
		d.closed = true
	}
	if d.tmp != "" {
		os.RemoveAll(d.tmp)
	}
}
