package policy

import (
	"fmt"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Nodes: the network behind an interface ([nodes.NAME]). Each node on an
// interface is an inner class under its parent node (or the root class)
// with the node's rates for the interface's direction: its schedule's
// when one is active, else its own, and a `set-rate node:NAME` override
// above both. A node's ceil is capped to its parent's (the bandwidth for
// a top-level node), and guarantees oversubscribed under a node are
// scaled as under the root (see scaleGuarantees).

// Node sources (Explanation.Source of a node).
const (
	SourceNode         Source = "node"          // the node's rates
	SourceNodeOverride Source = "node-override" // set-rate node:NAME
)

// nodes decides the nodes on interface in: their targets (parents first,
// as plan.Nodes) and explanations, index for index.
func (e *evaluator) nodes(in *config.Interface) ([]model.NodeTarget, []Explanation) {
	var ts []model.NodeTarget
	var xs []Explanation
	for i := range e.plan.Nodes {
		n := &e.plan.Nodes[i]
		if !n.On(in.Name) {
			continue
		}
		x := e.node(n, in)
		ts = append(ts, model.NodeTarget{Name: n.Name, Parent: n.Parent, Rate: x.Rate, Ceil: x.Ceil})
		xs = append(xs, x)
	}
	return ts, xs
}

// node decides one node's rates on interface in.
func (e *evaluator) node(n *config.Node, in *config.Interface) Explanation {
	d := in.Direction
	x := Explanation{Node: n.Name, Interface: in.Name, Direction: model.Direction(d)}
	x.ConfiguredRate, x.ConfiguredCeil = n.Rates(d)
	x.Rate, x.Ceil = x.ConfiguredRate, max(x.ConfiguredCeil, x.ConfiguredRate)
	x.Source, x.Reason = SourceNode, "node "+n.Name
	i := -1
	if e.force != nil {
		if e.force.sched < len(n.Schedules) {
			i = e.force.sched
		}
	} else if len(n.Schedules) > 0 {
		t := e.now.In(e.loc)
		for k := range n.Schedules {
			if n.Schedules[k].Contains(t) {
				i = k
				break
			}
		}
	}
	if i >= 0 {
		s := &n.Schedules[i]
		x.Rate, x.Ceil = scheduleRates(s, d)
		x.Ceil = max(x.Ceil, x.Rate)
		x.Source, x.Reason = SourceSchedule, describeSchedule("node "+n.Name, i, s)
	}
	if o, ok := e.ov.For(Target{TargetNode, n.Name}, d, e.now); ok {
		x.Rate, x.Ceil = o.Rates()
		x.Source, x.OverrideUntil, x.Ramp = SourceNodeOverride, o.Until, o.Ramp
		x.Reason = overrideReason("node override ("+n.Name+")", o, e.now, e.loc)
	}
	x.Burst, x.CBurst = tbf.RecommendedBurst(x.Rate), tbf.RecommendedBurst(x.Ceil)
	return x
}

// nodeOn reports whether user u is shaped on an interface whose nodes are
// nodes (a user behind a node is shaped where the node is).
func nodeOn(u *config.User, nodes []model.NodeTarget) bool {
	if u.Node == "" {
		return true
	}
	for i := range nodes {
		if nodes[i].Name == u.Node {
			return true
		}
	}
	return false
}

// capNodes caps each node's ceil to its parent's (a top-level node's to
// bw), parents first, and each user's ceil under a node to the node's:
// a class never borrows more than its parent has, so a higher ceiling
// would only mislead.
func capNodes(ir *InterfaceResult, bw tbf.Rate) {
	tg := &ir.Targets
	if len(tg.Nodes) == 0 {
		return
	}
	ceil := make(map[string]tbf.Rate, len(tg.Nodes))
	for i := range tg.Nodes {
		n := &tg.Nodes[i]
		limit, parent := bw, "the bandwidth"
		if n.Parent != "" {
			limit, parent = ceil[n.Parent], "node "+n.Parent+"'s ceil"
		}
		if n.Ceil > limit {
			ir.tierCaps = append(ir.tierCaps, Cap{Kind: "node", Node: n.Name, Ceil: n.Ceil, Bandwidth: limit})
			if i < len(ir.Nodes) {
				x := &ir.Nodes[i]
				if !x.CeilCapped {
					x.UncappedCeil = x.Ceil
				}
				x.Reason += fmt.Sprintf("; ceil %s capped to %s %s", x.UncappedCeil, parent, limit)
				x.Ceil, x.CeilCapped, x.CBurst = limit, true, tbf.RecommendedBurst(limit)
			}
			n.Ceil = limit
		}
		ceil[n.Name] = n.Ceil
	}
	for j := range tg.Users {
		if u := &tg.Users[j]; u.Node != "" && j < len(ir.Users) {
			if c, ok := ceil[u.Node]; ok {
				capUserTo(u, &ir.Users[j], c, "node "+u.Node+"'s ceil")
			}
		}
	}
}

// nodeCeil is the ceil of node on ir (after capping), or 0.
func nodeCeil(ir *InterfaceResult, node string) tbf.Rate {
	for _, n := range ir.Targets.Nodes {
		if n.Name == node {
			return n.Ceil
		}
	}
	return 0
}

// parentOf names the class user u hangs from on tg: the node ("node",
// name), the tier's aggregate ("tier", name), or the root ("", "").
func parentOf(u *model.UserTarget, aggregate map[string]int) (kind, name string) {
	if u.Node != "" {
		return "node", u.Node
	}
	if _, ok := aggregate[u.Tier]; ok {
		return "tier", u.Tier
	}
	return "", ""
}

// NodeOf returns the explanation of node on the interface, if it is there.
func (ir *InterfaceResult) NodeOf(node string) (Explanation, bool) {
	for _, x := range ir.Nodes {
		if x.Node == node {
			return x, true
		}
	}
	return Explanation{}, false
}
