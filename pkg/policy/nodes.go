package policy

import (
	"fmt"
	"slices"
	"time"

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
				if capUserTo(u, &ir.Users[j], c, "node "+u.Node+"'s ceil") {
					ir.Users[j].CappedBy = u.Node
				}
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

// UpdateNode re-evaluates node in r at now, in place, on every interface
// it is on: the same values Evaluate(plan, ov, usage, now) gives its class.
// r must come from Evaluate of the same plan. It reports false, changing
// nothing, when the change reaches other classes: the node's ceil capped
// by its parent's (or a child's by the node's), guarantees oversubscribed
// under its parent or under the node (before or after), or the node's
// rate below its children's. Then evaluate everything. It serves
// `set-rate node:NAME` without evaluating every user.
func (r *Result) UpdateNode(plan *config.Plan, ov Overrides, now time.Time, node string) bool {
	r.invalidateSums() // node rates and parents change
	n, ok := plan.Node(node)
	if !ok || len(r.Interfaces) != len(plan.Interfaces) {
		return false
	}
	e := evaluator{plan: plan, ov: &ov, now: now, loc: plan.Policy.Location}
	if e.loc == nil {
		e.loc = time.Local
	}
	type change struct {
		ir *InterfaceResult
		j  int
		x  Explanation
	}
	var changes []change
	for i := range r.Interfaces {
		ir, in := &r.Interfaces[i], &plan.Interfaces[i]
		j := slices.IndexFunc(ir.Targets.Nodes, func(t model.NodeTarget) bool { return t.Name == n.Name })
		if j < 0 {
			continue
		}
		if j >= len(ir.Nodes) {
			return false
		}
		x := e.node(n, in)
		if old := &ir.Nodes[j]; x.Rate == old.Unscaled() && x.Ceil == old.Uncapped() {
			continue // not this direction's override: the class stays
		}
		if !nodeAlone(ir, j, n.Parent) {
			return false
		}
		limit := in.Bandwidth
		if n.Parent != "" {
			limit = nodeCeil(ir, n.Parent)
		}
		if x.Ceil > limit || childrenAbove(ir, n.Name, x.Rate, x.Ceil) || !parentFits(ir, j, x.Rate) {
			return false
		}
		changes = append(changes, change{ir, j, x})
	}
	for _, c := range changes {
		t := &c.ir.Targets.Nodes[c.j]
		t.Rate, t.Ceil = c.x.Rate, c.x.Ceil
		c.ir.Nodes[c.j] = c.x
	}
	return len(changes) > 0
}

// nodeAlone reports whether node j of ir changes alone when its rates do:
// no oversubscription under its parent (or the root) or under the node,
// and neither its ceil nor a child's was capped.
func nodeAlone(ir *InterfaceResult, j int, parent string) bool {
	name := ir.Targets.Nodes[j].Name
	for _, o := range ir.Oversubscriptions {
		if o.Node == name || o.Node == parent && o.Tier == "" {
			return false
		}
	}
	if ir.Nodes[j].CeilCapped {
		return false
	}
	for k, x := range ir.Users {
		if ir.Targets.Users[k].Node == name && x.CeilCapped {
			return false
		}
	}
	for k, c := range ir.Targets.Nodes {
		if c.Parent == name && k < len(ir.Nodes) && ir.Nodes[k].CeilCapped {
			return false
		}
	}
	return true
}

// childrenAbove reports whether node's children would not fit its new
// rate (guarantees: they would need scaling) or ceil (they would need
// capping).
func childrenAbove(ir *InterfaceResult, node string, rate, ceil tbf.Rate) bool {
	var sum tbf.Rate
	for _, c := range ir.Targets.Nodes {
		if c.Parent == node {
			sum += c.Rate
			if c.Ceil > ceil {
				return true
			}
		}
	}
	for _, u := range ir.Targets.Users {
		if u.Node == node {
			sum += u.Rate
			if u.Ceil > ceil {
				return true
			}
		}
	}
	return sum > rate
}

// parentFits reports whether the guarantees under node j's parent (the
// root for a top-level node) still fit it with node j at rate.
func parentFits(ir *InterfaceResult, j int, rate tbf.Rate) bool {
	tg := &ir.Targets
	parent := tg.Nodes[j].Parent
	var sum uint64
	capacity := uint64(tg.Interface.Bandwidth)
	if parent == "" {
		sum = uint64(tg.Interface.DefaultRate)
		for _, t := range tg.Tiers {
			sum += uint64(t.Rate)
		}
		aggregate := map[string]int{}
		for i, t := range tg.Tiers {
			aggregate[t.Name] = i
		}
		for k := range tg.Users {
			if kind, _ := parentOf(&tg.Users[k], aggregate); kind == "" {
				sum += uint64(tg.Users[k].Rate)
			}
		}
	} else {
		for _, p := range tg.Nodes {
			if p.Name == parent {
				capacity = uint64(p.Rate)
			}
		}
		for k := range tg.Users {
			if tg.Users[k].Node == parent {
				sum += uint64(tg.Users[k].Rate)
			}
		}
	}
	for k, c := range tg.Nodes {
		switch {
		case k == j:
			sum += uint64(rate)
		case c.Parent == parent:
			sum += uint64(c.Rate)
		}
	}
	return sum <= capacity
}
