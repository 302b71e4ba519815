package simulate

import (
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/sim"
)

// Unclassified is the user name of the rows for an interface's default
// class (traffic no user's address matches).
const Unclassified = "(unclassified)"

// Report is a simulated plan at one time.
type Report struct {
	At         time.Time
	Users      []UserRow
	Interfaces []IfaceRow
	// Nodes are the nodes ([nodes.NAME]) of the HTB interfaces, per
	// interface in plan order and parents first.
	Nodes []NodeRow
}

// UserRow is one user on one interface. Rates are bits/s.
type UserRow struct {
	User, Tier string
	Interface  string
	Direction  model.Direction
	Demand     sim.Demand
	Rate       float64
	// LimitedBy is sim's reason; Detail names the limiting class
	// ("interface", "tier gold") or, for "ceil", the policy rule that set
	// the ceil ("tier gold", "schedule gold#0 ...", "user config").
	LimitedBy, Detail string
	// ShortBurst: the user borrows with a cburst below sim.BurstPackets
	// packets, so the kernel may give less (see sim.ClassResult).
	ShortBurst bool
	// ShortQueue: the user's leaf is a bfifo smaller than one GSO/GRO
	// aggregate, so TCP gets a few percent of Rate (see sim.ClassResult).
	ShortQueue bool
	// Node is the node the user's class hangs from; "" for none.
	Node string
}

// IfaceRow is one interface's totals. Rates are bits/s.
type IfaceRow struct {
	Interface, Device string
	Direction         model.Direction
	Shaper            model.ShaperKind
	Bandwidth         float64
	Demand            float64 // +Inf when someone asks for max
	Rate              float64
	// Guaranteed is the sum of min(demand, rate) of the users (HTB);
	// above Bandwidth, HTB lets Rate exceed Bandwidth too.
	Guaranteed     float64
	Oversubscribed bool
	// Capped lists the ceilings above the interface's configured bandwidth
	// that are capped to it (policy.Cap).
	Capped []string
	Tiers  []TierTotal
	// Queues are the per-queue trees (queues > 1) with the split the
	// policy loop's rebalancing settles on.
	Queues []sim.QueueResult
}

// NodeRow is one node on one interface: what the users behind it get
// together. Rates are bits/s.
type NodeRow struct {
	// Node is the node's name, Parent the node it is behind ("" at the
	// top level), Path the names from the top level down ("north/ap-1")
	// and Depth their number.
	Node, Parent, Path string
	Depth              int
	Interface          string
	Direction          model.Direction
	// ClassRate and ClassCeil are the node class's rates in force (after
	// schedules, overrides, the cap to its parent's ceil and scaled
	// guarantees).
	ClassRate, ClassCeil float64
	// Demand is the users' behind it summed (+Inf when one asks for max);
	// Rate is what passes through the node, their predicted rates summed.
	Demand, Rate float64
	// LimitedBy is "ceil" when the node is at its ceil (its users get no
	// more through it), else ""; Detail is then the rule that set the
	// ceil ("node ap-1", "node override (ap-1)", a schedule).
	LimitedBy, Detail string
	// Users is how many users are behind the node, through its child
	// nodes too.
	Users int
}

// TierTotal is what a tier's users get together on one interface.
type TierTotal struct {
	Tier string
	Rate float64
}

// Simulate evaluates plan at at with spec's demand and solves every
// interface with o (its Flows are ignored: every interface gets its own).
// Errors name the interface.
func Simulate(plan *config.Plan, spec *Spec, at time.Time, o sim.Options) (*Report, error) {
	return SimulateState(plan, policy.Overrides{}, nil, spec, at, o)
}

// SimulateState is Simulate with a running daemon's overrides and quota
// usage (nil: nobody used anything), as policy.Evaluate takes them.
func SimulateState(plan *config.Plan, ov policy.Overrides, usage *policy.Usage, spec *Spec, at time.Time, o sim.Options) (*Report, error) {
	if err := spec.check(plan); err != nil {
		return nil, err
	}
	res := policy.Evaluate(plan, ov, usage, at)
	rep := &Report{At: at}
	for i := range res.Interfaces {
		ir := &res.Interfaces[i]
		cfg := &plan.Interfaces[i]
		tree, err := model.Build(ir.Targets, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: interface %s %s: %w", cfg.Source, cfg.Name, cfg.Direction, err)
		}
		if tree.Root.Kind == model.ShaperTBF {
			err = rep.addTBF(plan, spec, cfg, &tree)
		} else {
			err = rep.addHTB(spec, ir, &tree, o)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: interface %s %s: %w", cfg.Source, cfg.Name, cfg.Direction, err)
		}
	}
	return rep, nil
}

func (rep *Report) addHTB(spec *Spec, ir *policy.InterfaceResult, tree *model.Tree, o sim.Options) error {
	spec0 := ir.Targets.Interface
	dir := spec0.Direction
	if dir == "" {
		dir = model.Egress
	}
	expl := make(map[string]*policy.Explanation, len(ir.Users))
	for i := range ir.Users {
		expl[ir.Users[i].User] = &ir.Users[i]
	}
	out, err := sim.Solve(tree, func(c *model.Class) sim.Demand {
		switch c.Labels.Kind {
		case "user":
			return spec.demand(c.Labels.User, c.Labels.Tier, spec0.Name, dir)
		case "default":
			d := spec.unclassified(spec0.Name, dir)
			if n := len(tree.Queues); n > 0 && !d.IsMax() {
				d /= sim.Demand(n) // unclassified traffic hashes over the queues
			}
			return d
		}
		return 0
	}, sim.Options{PacketSize: o.PacketSize})
	if err != nil {
		return err
	}
	byHandle := make(map[model.Handle]*model.Class, len(tree.Classes))
	for i := range tree.Classes {
		byHandle[tree.Classes[i].Handle] = &tree.Classes[i]
	}
	row := IfaceRow{Interface: spec0.Name, Device: tree.Device, Direction: dir, Shaper: model.ShaperHTB,
		Bandwidth: out.Bandwidth, Demand: out.Demand, Rate: out.Total, Guaranteed: out.Guaranteed,
		Oversubscribed: out.Guaranteed > out.Bandwidth, Queues: out.Queues}
	for _, c := range ir.Caps() {
		row.Capped = append(row.Capped, c.String())
	}
	tiers := map[string]int{}
	users := make(map[string]UserRow, len(ir.Users))
	var unclassified *UserRow
	nodes := nodeRows(ir, out, spec0.Name, dir)
	for _, c := range out.Classes {
		if !c.Leaf {
			continue
		}
		u := UserRow{User: c.Labels.User, Tier: c.Labels.Tier, Node: c.Labels.Node, Interface: spec0.Name, Direction: dir,
			Demand: c.Demand, Rate: c.Rate, LimitedBy: string(c.LimitedBy), ShortBurst: c.ShortBurst, ShortQueue: c.ShortQueue}
		if c.By != 0 {
			u.Detail = describe(byHandle[c.By], c.By)
		}
		switch c.Labels.Kind {
		case "default":
			if c.Demand > 0 {
				u.User = Unclassified
				if unclassified != nil { // per-queue trees: one default class per queue
					u.Demand += unclassified.Demand
					u.Rate += unclassified.Rate
				}
				unclassified = &u
			}
			continue
		case "user":
		default:
			continue
		}
		if x := expl[c.Labels.User]; x != nil && c.LimitedBy == sim.ByCeil {
			u.Detail = x.Reason // the rule that set the ceil
		}
		users[u.User] = u
		if _, ok := tiers[u.Tier]; !ok {
			tiers[u.Tier] = len(row.Tiers)
			row.Tiers = append(row.Tiers, TierTotal{Tier: u.Tier})
		}
		row.Tiers[tiers[u.Tier]].Rate += c.Rate
	}
	for _, x := range ir.Users { // plan order
		rep.Users = append(rep.Users, users[x.User])
	}
	if unclassified != nil {
		rep.Users = append(rep.Users, *unclassified)
	}
	rep.Interfaces = append(rep.Interfaces, row)
	rep.Nodes = append(rep.Nodes, nodes...)
	return nil
}

// nodeRows makes the rows of ir's nodes (parents first) from the solved
// tree out: each node class's rate, whether it is at its ceil, and the
// demand and number of the users behind it.
func nodeRows(ir *policy.InterfaceResult, out *sim.Result, iface string, dir model.Direction) []NodeRow {
	if len(ir.Targets.Nodes) == 0 {
		return nil
	}
	rows := make([]NodeRow, len(ir.Targets.Nodes))
	at := make(map[string]int, len(rows))
	for k, n := range ir.Targets.Nodes {
		r := NodeRow{Node: n.Name, Parent: n.Parent, Path: n.Name, Depth: 1, Interface: iface, Direction: dir,
			ClassRate: float64(n.Rate), ClassCeil: float64(n.Ceil)}
		if j, ok := at[n.Parent]; ok && n.Parent != "" { // parents first
			r.Path, r.Depth = rows[j].Path+"/"+n.Name, rows[j].Depth+1
		}
		rows[k] = r
		at[n.Name] = k
	}
	byHandle := make(map[model.Handle]*sim.ClassResult, len(out.Classes))
	for i := range out.Classes {
		byHandle[out.Classes[i].Handle] = &out.Classes[i]
	}
	for i := range out.Classes {
		c := &out.Classes[i]
		switch {
		case c.Labels.Kind == "node":
			if k, ok := at[c.Labels.Node]; ok {
				rows[k].Rate += c.Rate // a split node: its classes in every queue
				if c.LimitedBy == sim.ByCeil {
					rows[k].LimitedBy = string(sim.ByCeil)
					if k < len(ir.Nodes) {
						rows[k].Detail = ir.Nodes[k].Reason
					}
				}
			}
		case c.Labels.Kind == "user" && c.Labels.Node != "":
			// Up the tree from the user's class: each node above it.
			for p := byHandle[c.Parent]; p != nil && p.Labels.Kind == "node"; p = byHandle[p.Parent] {
				if k, ok := at[p.Labels.Node]; ok {
					rows[k].Users++
					rows[k].Demand += float64(c.Demand)
				}
			}
		}
	}
	return rows
}

// describe names class c for a limited_by detail.
func describe(c *model.Class, h model.Handle) string {
	if c == nil {
		return "class " + h.String()
	}
	switch c.Labels.Kind {
	case "root":
		return "interface"
	case "tier":
		return "tier " + c.Labels.Tier
	case "default":
		return "default class"
	case "user":
		return "user " + c.Labels.User
	case "node":
		return "node " + c.Labels.Node
	}
	return "class " + h.String()
}

// addTBF shares a TBF interface among every user (and unclassified
// traffic when it has a demand).
func (rep *Report) addTBF(plan *config.Plan, spec *Spec, cfg *config.Interface, tree *model.Tree) error {
	dir := model.Direction(cfg.Direction)
	if dir == "" {
		dir = model.Egress
	}
	var flows []sim.Flow
	var tiers []string
	for _, u := range plan.Users {
		flows = append(flows, sim.Flow{Name: u.Name, Demand: spec.demand(u.Name, u.Tier, cfg.Name, dir)})
		tiers = append(tiers, u.Tier)
	}
	if d := spec.unclassified(cfg.Name, dir); d > 0 {
		flows = append(flows, sim.Flow{Name: Unclassified, Demand: d})
		tiers = append(tiers, "")
	}
	out, err := sim.Solve(tree, nil, sim.Options{Flows: flows})
	if err != nil {
		return err
	}
	row := IfaceRow{Interface: cfg.Name, Device: tree.Device, Direction: dir, Shaper: model.ShaperTBF,
		Bandwidth: out.Bandwidth, Demand: out.Demand, Rate: out.Total}
	idx := map[string]int{}
	for i, f := range out.Flows {
		rep.Users = append(rep.Users, UserRow{User: f.Name, Tier: tiers[i], Interface: cfg.Name, Direction: dir,
			Demand: f.Demand, Rate: f.Rate, LimitedBy: string(f.LimitedBy)})
		if tiers[i] == "" {
			continue
		}
		if _, ok := idx[tiers[i]]; !ok {
			idx[tiers[i]] = len(row.Tiers)
			row.Tiers = append(row.Tiers, TierTotal{Tier: tiers[i]})
		}
		row.Tiers[idx[tiers[i]]].Rate += f.Rate
	}
	rep.Interfaces = append(rep.Interfaces, row)
	return nil
}
