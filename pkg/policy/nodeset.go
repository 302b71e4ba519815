package policy

import (
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
)

// AddNode adds node (just added to plan, with no users or child nodes
// behind it) to r on every HTB interface it is on, with the rates
// Evaluate(plan, ov, usage, now) would give its class. r must come from
// Evaluate of plan without the node. It reports false, leaving r as it
// was, when the node changes more than its own class: its ceil above its
// parent's (the bandwidth for a top-level node), which would be capped,
// or a guarantee that oversubscribes its parent, or a parent that is
// oversubscribed already (the scaling of its children moves). Then
// evaluate everything. It serves `shaperctl node add` in time that does
// not grow with the number of users, except for the sum of the guarantees
// under the node's parent.
func (r *Result) AddNode(plan *config.Plan, ov Overrides, now time.Time, node string) bool {
	r.invalidateSums() // node rates and parents change
	n, ok := plan.Node(node)
	if !ok || len(r.Interfaces) != len(plan.Interfaces) {
		return false
	}
	e := evaluator{plan: plan, ov: &ov, now: now, loc: plan.Policy.Location}
	if e.loc == nil {
		e.loc = time.Local
	}
	type add struct {
		ir *InterfaceResult
		x  Explanation
	}
	var adds []add
	for i := range r.Interfaces {
		ir, in := &r.Interfaces[i], &plan.Interfaces[i]
		if in.Shaper == config.ShaperTBF || !n.On(in.Name) {
			continue
		}
		if slices.ContainsFunc(ir.Targets.Nodes, func(t model.NodeTarget) bool { return t.Name == n.Name }) {
			return false // there already: not an addition
		}
		limit := in.Bandwidth
		if n.Parent != "" {
			if limit = nodeCeil(ir, n.Parent); limit == 0 {
				return false
			}
		}
		for _, o := range ir.Oversubscriptions {
			if o.Tier == "" && o.Node == n.Parent {
				return false
			}
		}
		x := e.node(n, in)
		if x.Ceil > limit {
			return false
		}
		adds = append(adds, add{ir, x})
	}
	if len(adds) == 0 {
		return false
	}
	for k, a := range adds {
		a.ir.Targets.Nodes = append(a.ir.Targets.Nodes, model.NodeTarget{Name: n.Name, Parent: n.Parent, Rate: a.x.Rate, Ceil: a.x.Ceil})
		a.ir.Nodes = append(a.ir.Nodes, a.x)
		if !parentFits(a.ir, len(a.ir.Targets.Nodes)-1, a.x.Rate) {
			for _, b := range adds[:k+1] {
				b.ir.Targets.Nodes = b.ir.Targets.Nodes[:len(b.ir.Targets.Nodes)-1]
				b.ir.Nodes = b.ir.Nodes[:len(b.ir.Nodes)-1]
			}
			return false
		}
	}
	return true
}

// RemoveNode removes node from r on every interface it is on. The node
// must have no users or child nodes behind it in r. It reports false,
// leaving r as it was, when that changes more than the node's own class:
// its parent is oversubscribed (the scaling of the siblings moves). Then
// evaluate everything.
func (r *Result) RemoveNode(node string) bool {
	r.invalidateSums() // node rates and parents change
	type at struct{ i, j int }
	var found []at
	for i := range r.Interfaces {
		ir := &r.Interfaces[i]
		j := slices.IndexFunc(ir.Targets.Nodes, func(t model.NodeTarget) bool { return t.Name == node })
		if j < 0 {
			continue
		}
		if j >= len(ir.Nodes) {
			return false
		}
		parent := ir.Targets.Nodes[j].Parent
		for _, o := range ir.Oversubscriptions {
			if o.Tier == "" && (o.Node == parent || o.Node == node) {
				return false
			}
		}
		if slices.ContainsFunc(ir.Targets.Nodes, func(t model.NodeTarget) bool { return t.Parent == node }) ||
			slices.ContainsFunc(ir.Targets.Users, func(u model.UserTarget) bool { return u.Node == node }) {
			return false
		}
		found = append(found, at{i, j})
	}
	if len(found) == 0 {
		return false
	}
	// Deleted in order: a node's children come after it, so parents stay
	// first.
	for _, f := range found {
		ir := &r.Interfaces[f.i]
		ir.Targets.Nodes = slices.Delete(ir.Targets.Nodes, f.j, f.j+1)
		ir.Nodes = slices.Delete(ir.Nodes, f.j, f.j+1)
		if len(ir.Nodes) == 0 { // as Evaluate leaves an interface without nodes
			ir.Targets.Nodes, ir.Nodes = nil, nil
		}
	}
	return true
}
