package daemon

import (
	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// nodeStatus lists the nodes of interface st for status, parents first as
// the plan orders them: ir explains the policy's decision (ir.Nodes index
// for index with ir.Targets.Nodes), the desired targets give the rates in
// force (ramps included), the last dump's class counters the traffic, and
// ir.Targets.Users the users behind each node. Nil without nodes.
func (d *Daemon) nodeStatus(st *reconciler, ir *policy.InterfaceResult) []control.NodeStatus {
	if ir == nil || len(ir.Nodes) == 0 {
		return nil
	}
	direct := make(map[string]int, len(ir.Nodes))
	for _, u := range ir.Targets.Users {
		if u.Node != "" {
			direct[u.Node]++
		}
	}
	// The node classes (a split node has one in every queue's tree) and
	// the drops of the classes behind each node (HTB counts drops at the
	// users' leaves), from the desired tree.
	handles := make(map[string][]model.Handle, len(ir.Nodes))
	drops := make(map[string]uint64, len(ir.Nodes))
	for _, c := range st.tree().Classes {
		if c.Labels.Node == "" {
			continue
		}
		if c.Labels.Kind == "node" {
			handles[c.Labels.Node] = append(handles[c.Labels.Node], c.Handle)
		}
		if cc, ok := st.counter(c.Handle); ok {
			drops[c.Labels.Node] += uint64(cc.stats.Drops)
		}
	}
	out := make([]control.NodeStatus, len(ir.Nodes))
	index := make(map[string]int, len(ir.Nodes))
	for k, x := range ir.Nodes {
		ns := control.NodeStatus{Name: x.Node, Path: x.Node, Rate: x.ConfiguredRate, Ceil: x.ConfiguredCeil,
			EffectiveRate: x.Rate, EffectiveCeil: x.Ceil, Reason: x.Reason, Drops: drops[x.Node],
			Users: direct[x.Node]}
		if k < len(ir.Targets.Nodes) {
			ns.Parent = ir.Targets.Nodes[k].Parent
		}
		if n, ok := d.plan.Node(x.Node); ok {
			ns.Path = n.Path
		}
		if st.want != nil {
			if nt, ok := st.want.Node(x.Node); ok {
				ns.EffectiveRate, ns.EffectiveCeil = nt.Rate, nt.Ceil
			}
		}
		rk := policy.RampKey{Interface: st.cfg.Name, Direction: model.Direction(st.cfg.Direction), Kind: policy.ClassNode, Name: x.Node}
		if r, ok := d.ramper.Ramp(rk); ok {
			ns.Ramp = &control.RampStatus{From: r.From.Ceil, To: r.To.Ceil, Until: r.End}
		}
		for _, h := range handles[x.Node] {
			if c, ok := st.counter(h); ok {
				ns.Throughput += c.throughput
				ns.Bytes += c.stats.Bytes
			}
		}
		ns.TotalUsers = ns.Users
		out[k] = ns
		index[x.Node] = k
	}
	// Children come after their parents: summed from the last one up, a
	// node's totals are complete before they are added to its parent's.
	for k := len(out) - 1; k >= 0; k-- {
		if j, ok := index[out[k].Parent]; ok && out[k].Parent != "" {
			out[j].TotalUsers += out[k].TotalUsers
			out[j].Drops += out[k].Drops
		}
	}
	return out
}
