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
	out := &control.Status{Generated: d.clock.Now(), Interfaces: []control.InterfaceStatus{}, Users: []control.UserStatus{}}
	for i, st := range d.ifaces {
		in := &st.cfg
		is := control.InterfaceStatus{Name: in.Name, Device: st.device, Shaper: string(in.Shaper),
			Direction: string(in.Direction), Bandwidth: in.Bandwidth, Users: []string{}, Tiers: []control.TierStatus{}}
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
		out.Interfaces = append(out.Interfaces, is)
		if d.result == nil || i >= len(d.result.Interfaces) {
			continue
		}
		inForce := map[string]model.UserTarget{}
		for _, u := range st.targets.Users {
			inForce[u.Name] = u
		}
		for _, x := range d.result.Interfaces[i].Users {
			out.Users = append(out.Users, d.userStatus(st, x, inForce[x.User]))
		}
	}
	return out
}

// userStatus is one user on one interface: x explains the policy's
// decision, ut is what the kernel is given now (ramps included).
func (d *Daemon) userStatus(st *iface, x policy.Explanation, ut model.UserTarget) control.UserStatus {
	us := control.UserStatus{Name: x.User, Tier: x.Tier, Interface: st.cfg.Name,
		Rate: x.ConfiguredRate, Ceil: x.ConfiguredCeil, EffectiveRate: x.Rate, EffectiveCeil: x.Ceil,
		Reason: x.Reason}
	if ut.Name != "" {
		us.EffectiveRate, us.EffectiveCeil = ut.Rate, ut.Ceil
		k := policy.RampKey{Interface: st.cfg.Name, Direction: model.Direction(st.cfg.Direction), Kind: policy.ClassUser, Name: x.User}
		if r, ok := d.ramper.Ramp(k); ok {
			us.Ramp = &control.RampStatus{From: r.From.Ceil, To: r.To.Ceil, Until: r.End}
		}
	}
	if m, ok := st.ids.User(x.User); ok {
		h := model.MakeHandle(model.RootQdisc.Major(), m)
		us.Throughput = st.throughput[h]
		if c := findClass(st.actual, h); c != nil && c.Stats != nil {
			us.Bytes, us.Drops = c.Stats.Bytes, uint64(c.Stats.Drops)
		}
	}
	if q := x.Quota; q != nil {
		us.Quota = &control.QuotaStatus{Used: q.Used, Limit: q.Limit, PeriodEnd: q.PeriodEnd}
	}
	return us
}

// findClass returns the class with handle h in t (sorted by handle).
func findClass(t model.Tree, h model.Handle) *model.Class {
	i, ok := slices.BinarySearchFunc(t.Classes, h, func(c model.Class, h model.Handle) int {
		switch {
		case c.Handle < h:
			return -1
		case c.Handle > h:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return &t.Classes[i]
}
