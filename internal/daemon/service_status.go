package daemon

import (
	"slices"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// status assembles control.Status from the plan, the last policy result,
// the targets in force and the last dump of every interface.
func (d *Daemon) status() *control.Status {
	// The explanations are evaluated afresh: keeping the last result
	// between ticks would cost megabytes with 10,000 users.
	res := policy.Evaluate(d.plan, d.evalOverrides(d.overrides), d.usage, d.clock.Now())
	rows := 0
	for _, ir := range res.Interfaces {
		rows += len(ir.Users)
	}
	out := &control.Status{Generated: d.clock.Now(), Interfaces: []control.InterfaceStatus{}, Users: make([]control.UserStatus, 0, rows)}
	out.StateProblems = d.stateProblemList()
	addrs := make(map[string][]string, len(d.plan.Users))
	for _, u := range d.plan.Users {
		a := make([]string, len(u.Prefixes))
		for k, p := range u.Prefixes {
			a[k] = p.String()
		}
		addrs[u.Name] = a
	}
	for i, st := range d.ifaces {
		in := &st.cfg
		is := control.InterfaceStatus{Name: in.Name, Device: st.device, Shaper: string(in.Shaper),
			Direction: string(in.Direction), Bandwidth: in.Bandwidth, Users: []string{}, Tiers: []control.TierStatus{}}
		is.Classifier = d.classifiers[st.key]
		is.State, is.Error = st.health()
		is.Foreign = st.foreign
		if in.Shaper == config.ShaperHTB {
			tiers := map[string]bool{}
			for _, u := range d.plan.Users {
				is.Users = append(is.Users, u.Name)
				tiers[u.Tier] = true
			}
			slices.Sort(is.Users)
			for _, t := range d.plan.Tiers {
				if tiers[t.Name] {
					r, c := t.Rates(in.Direction)
					is.Tiers = append(is.Tiers, control.TierStatus{Name: t.Name, Rate: r, Ceil: c})
				}
			}
		}
		var ir *policy.InterfaceResult
		if i < len(res.Interfaces) {
			ir = &res.Interfaces[i]
		}
		d.addOverrideStatus(&is, in, ir, out.Generated)
		addCapStatus(&is, in, ir)
		is.Nodes = d.nodeStatus(st, ir)
		out.Interfaces = append(out.Interfaces, is)
		if i >= len(res.Interfaces) {
			continue
		}
		targets := st.targets().Users
		inForce := make(map[string]model.UserTarget, len(targets))
		for _, u := range targets {
			inForce[u.Name] = u
		}
		errs := userErrors(st)
		for j, x := range ir.Users {
			us := d.userStatus(st, x, inForce[x.User])
			us.Error = errs[x.User]
			us.Addresses = addrs[x.User]
			if j < len(ir.Targets.Users) {
				us.Node = ir.Targets.Users[j].Node
			}
			out.Users = append(out.Users, us)
		}
	}
	out.LastReload = d.lastReload
	out.Fleet = d.fleetStatus()
	out.Overrides = d.overrideList(out.Generated)
	return out
}

// userStatus is one user on one interface: x explains the policy's
// decision, ut is what the kernel is given now (ramps included).
func (d *Daemon) userStatus(st *reconciler, x policy.Explanation, ut model.UserTarget) control.UserStatus {
	us := control.UserStatus{Name: x.User, Tier: x.Tier, Interface: st.cfg.Name,
		Rate: x.ConfiguredRate, Ceil: x.ConfiguredCeil, EffectiveRate: x.Rate, EffectiveCeil: x.Ceil,
		Reason: x.Reason, Direction: policy.DirectionOf(st.cfg.Direction).String(), Device: st.device,
		Source: d.userSource(x.User)}
	if ut.Name != "" {
		us.EffectiveRate, us.EffectiveCeil = ut.Rate, ut.Ceil
		k := policy.RampKey{Interface: st.cfg.Name, Direction: model.Direction(st.cfg.Direction), Kind: policy.ClassUser, Name: x.User}
		if r, ok := d.ramper.Ramp(k); ok {
			us.Ramp = &control.RampStatus{From: r.From.Ceil, To: r.To.Ceil, Until: r.End}
		}
	}
	if h, ok := userHandle(st, x.User); ok {
		if c, ok := st.counter(h); ok {
			us.Throughput, us.Bytes, us.Drops = c.throughput, c.stats.Bytes, uint64(c.stats.Drops)
			us.QueueDelay = control.Duration(queueDelay(c.stats.Backlog, c.throughput, us.EffectiveRate, us.EffectiveCeil))
		}
	}
	if q := x.Quota; q != nil {
		us.Quota = &control.QuotaStatus{Used: q.Used, Limit: q.Limit, PeriodEnd: q.PeriodEnd}
	}
	return us
}

// addCapStatus fills what an HTB interface caps to its configured
// bandwidth: each tier whose ceil here is above it (CappedCeil) and the
// capped classes (Capped, from the policy's result ir).
func addCapStatus(is *control.InterfaceStatus, in *config.Interface, ir *policy.InterfaceResult) {
	if in.Shaper != config.ShaperHTB {
		return
	}
	for k := range is.Tiers {
		ts := &is.Tiers[k]
		ceil := ts.Ceil
		if ts.Override != nil {
			ceil = ts.EffectiveCeil
		}
		if ceil > in.Bandwidth {
			ts.CappedCeil = in.Bandwidth
		}
	}
	if ir == nil {
		return
	}
	for _, c := range ir.Caps() {
		is.Capped = append(is.Capped, c.String())
	}
}
