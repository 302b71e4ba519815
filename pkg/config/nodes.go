package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// MaxNodeDepth is how many node levels a branch of the hierarchy may have
// (a site, a building, a floor, an access point: 4). HTB trees are at most
// 8 classes deep (the kernel refuses a class whose grandparent is below
// level 2); the interface's root class and the user's class take two,
// which leaves 6 for nodes. A user under a node hangs directly from it:
// tier aggregates only group users without a node.
const MaxNodeDepth = 6

// Node is one [nodes.NAME] table: a part of the network behind the router
// (a site, a building, an access point) with its own capacity, which
// every user behind it shares. Names follow NameRule and are unique
// across the hierarchy.
type Node struct {
	Name string
	// Source is where the node's table is written, "FILE:LINE:COL".
	Source string
	// Parent is the node this one is behind; "" for a top-level node,
	// which hangs from the interface's root.
	Parent string
	// Path is the names from the top-level node down to this one, joined
	// with "/" ("north/dorm-a/ap-3"); Depth is their number (1: top level).
	Path  string
	Depth int
	// Rate and Ceil apply on Egress interfaces (downloads), UploadRate and
	// UploadCeil on Ingress ones, defaulting as a tier's do: Ceil to Rate,
	// UploadRate to Rate, UploadCeil to the larger of Ceil and UploadRate.
	Rate, Ceil             tbf.Rate
	UploadRate, UploadCeil tbf.Rate
	// Interfaces names the interfaces ([[interface]] name) the node is
	// behind; empty: the parent's, and for a top-level node every HTB
	// interface. A node's users are shaped on its interfaces only.
	Interfaces []string
	// Schedules replace the node's rates during their windows, as a
	// tier's do.
	Schedules []Schedule
}

// Rates returns the node's configured rate and ceil for direction d.
func (n *Node) Rates(d Direction) (rate, ceil tbf.Rate) {
	if d == Ingress {
		return n.UploadRate, n.UploadCeil
	}
	return n.Rate, n.Ceil
}

// On reports whether the node is behind the interface named iface.
func (n *Node) On(iface string) bool {
	return len(n.Interfaces) == 0 || slices.Contains(n.Interfaces, iface)
}

// Node returns the node called name (or written as its path).
func (p *Plan) Node(name string) (*Node, bool) {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		n, ok := p.Node(name[i+1:])
		if !ok || n.Path != name {
			return nil, false
		}
		return n, true
	}
	if p.nodeAt == nil { // a Plan not made by Load
		i := slices.IndexFunc(p.Nodes, func(n Node) bool { return n.Name == name })
		return nodeOrNil(p, i)
	}
	i, ok := p.nodeAt[name]
	if !ok {
		return nil, false
	}
	return &p.Nodes[i], true
}

// nodeOrNil is p.Nodes[i], or none for i < 0.
func nodeOrNil(p *Plan, i int) (*Node, bool) {
	if i < 0 {
		return nil, false
	}
	return &p.Nodes[i], true
}

// indexNodes indexes p.Nodes by name.
func (p *Plan) indexNodes() {
	p.nodeAt = make(map[string]int, len(p.Nodes))
	for i, n := range p.Nodes {
		p.nodeAt[n.Name] = i
	}
}

// decodeNodes reads every [nodes.NAME] table and orders them parents
// first (by depth, then name), checking parents (known, no cycle, at most
// MaxNodeDepth levels) and interfaces (each one configured; local, a node
// on an interface of no [[interface]] is an error; from a fleet's shared
// plan, it is a node of another router and stays unshaped here).
func decodeNodes(rt *table, ifaces []Interface, shared bool) []Node {
	nt, ok := rt.sub("nodes")
	if !ok {
		return nil
	}
	names := make([]string, 0, len(nt.m))
	for name := range nt.m {
		names = append(names, name)
	}
	slices.Sort(names)
	byName := map[string]*Node{}
	tables := map[string]*table{}
	var nodes []Node
	for _, name := range names {
		t, ok := nt.sub(name)
		if !ok {
			continue
		}
		if !ValidName(name) {
			nt.errf(name, "node name %q is not valid: use %s", name, NameRule)
			continue
		}
		n := decodeNode(t, name, ifaces, shared)
		nodes = append(nodes, n)
		tables[name] = t
	}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	// Parents: known, and every branch ends at a top-level node within
	// MaxNodeDepth levels.
	bad := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		if n.Parent != "" && byName[n.Parent] == nil {
			msg := fmt.Sprintf("unknown parent node %q for node %q", n.Parent, n.Name)
			if s := nearest(n.Parent, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			tables[n.Name].errf("parent", "%s", msg)
			bad[n.Name] = true
		}
	}
	for i := range nodes {
		n := &nodes[i]
		var path []string
		seen := map[string]bool{}
		for m := n; m != nil; m = byName[m.Parent] {
			if seen[m.Name] {
				tables[n.Name].errf("parent", "node %q is its own ancestor: %s", n.Name, strings.Join(append(path, m.Name), " -> "))
				bad[n.Name] = true
				break
			}
			seen[m.Name] = true
			path = append(path, m.Name)
			if bad[m.Name] {
				bad[n.Name] = true
				break
			}
			if m.Parent == "" {
				break
			}
		}
		if bad[n.Name] {
			continue
		}
		slices.Reverse(path)
		n.Path, n.Depth = strings.Join(path, "/"), len(path)
		if n.Depth > MaxNodeDepth {
			tables[n.Name].errf("parent", "node %q is %d levels deep (%s); at most %d fit in the kernel's HTB tree (8 classes deep: the interface's root, %d node levels and the user)",
				n.Name, n.Depth, n.Path, MaxNodeDepth, MaxNodeDepth)
		}
	}
	// Interfaces are inherited: a child on an interface its parent is not
	// on would have no parent class there.
	slices.SortFunc(nodes, func(a, b Node) int {
		if a.Depth != b.Depth {
			return a.Depth - b.Depth
		}
		return strings.Compare(a.Name, b.Name)
	})
	at := map[string]int{}
	for i := range nodes {
		at[nodes[i].Name] = i
	}
	for i := range nodes {
		n := &nodes[i]
		j, ok := at[n.Parent]
		if !ok || bad[n.Name] {
			continue
		}
		p := &nodes[j]
		if len(n.Interfaces) == 0 {
			n.Interfaces = p.Interfaces
			continue
		}
		for _, in := range n.Interfaces {
			if !p.On(in) {
				tables[n.Name].errf("interfaces", "node %q is on interface %s, which its parent %q is not on (%s)", n.Name, in, p.Name, strings.Join(p.Interfaces, ", "))
			}
		}
	}
	return nodes
}

// decodeNode reads one node table.
func decodeNode(t *table, name string, ifaces []Interface, shared bool) Node {
	n := Node{Name: name, Source: t.f.where(t.path)}
	t.require("rate")
	n.Rate, n.Ceil, _, _ = rateCeil(t, "rate", "ceil")
	var upRateSet, upCeilSet bool
	n.UploadRate, n.UploadCeil, upRateSet, upCeilSet = uploadRates(t, n.Rate, n.Ceil)
	if s, ok := t.str("parent"); ok {
		switch {
		case s == name:
			t.errf("parent", "node %q is its own parent", name)
		case ValidName(s):
			n.Parent = s
		default:
			t.errf("parent", "parent node name %q is not valid: use %s", s, NameRule)
		}
	}
	if list, ok := t.strs("interfaces"); ok {
		if len(list) == 0 {
			t.errf("interfaces", "no interfaces given (leave the key out for every interface)")
		}
		for _, e := range list {
			if !slices.ContainsFunc(ifaces, func(in Interface) bool { return in.Name == e.s && in.Shaper != ShaperTBF }) {
				if shared {
					n.Interfaces = append(n.Interfaces, e.s) // another router's
					continue
				}
				t.f.errf(index(t.key("interfaces"), e.i), "node %q is on interface %q, which no [[interface]] with shaper = \"htb\" configures", name, e.s)
				continue
			}
			if !slices.Contains(n.Interfaces, e.s) {
				n.Interfaces = append(n.Interfaces, e.s)
			}
		}
	}
	if scheds, ok := t.tables("schedule"); ok {
		rates := Tier{Rate: n.Rate, Ceil: n.Ceil, UploadRate: n.UploadRate, UploadCeil: n.UploadCeil}
		for _, st := range scheds {
			if s, ok := decodeSchedule(st, &rates, upRateSet, upCeilSet); ok {
				n.Schedules = append(n.Schedules, s)
			}
		}
	}
	t.finish()
	return n
}

// nodeOfUser reads a user's node key: a node name, or a path of names
// from the top ("north/dorm-a/ap-3") that must match the hierarchy.
func nodeOfUser(t *table, u *User, nodes map[string]*Node) {
	s, ok := t.str("node")
	if !ok {
		return
	}
	name := s
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		name = s[i+1:]
	}
	n := nodes[name]
	if n == nil {
		all := make([]string, 0, len(nodes))
		for k := range nodes {
			all = append(all, k)
		}
		slices.Sort(all)
		msg := fmt.Sprintf("unknown node %q for user %q", s, u.Name)
		switch sug := nearest(name, all); {
		case len(nodes) == 0:
			msg += " (no [nodes] are configured)"
		case sug != "":
			msg += fmt.Sprintf(" (did you mean %q?)", sug)
		}
		t.errf("node", "%s", msg)
		return
	}
	if name != s && n.Path != "" && n.Path != s {
		t.errf("node", "node %q of user %q is at %s, not %s", name, u.Name, n.Path, s)
		return
	}
	u.Node = name
}

// nodeList names the configured nodes for messages.
func nodeList(nodes []Node) string {
	if len(nodes) == 0 {
		return "no [nodes] are configured"
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	if len(names) > 10 {
		names = append(names[:10], fmt.Sprintf("and %d more", len(nodes)-10))
	}
	return "nodes: " + strings.Join(names, ", ")
}

// htbInterface reports whether an [[interface]] with shaper = "htb" is
// called name.
func htbInterface(ifaces []Interface, name string) bool {
	return slices.ContainsFunc(ifaces, func(in Interface) bool { return in.Name == name && in.Shaper != ShaperTBF })
}

// checkTierInterfaces checks the tiers' interfaces: each one an HTB
// [[interface]] (from a fleet's shared plan, an unknown one is another
// router's).
func checkTierInterfaces(f *file, tiers []Tier, ifaces []Interface, shared bool) {
	for _, t := range tiers {
		for i, name := range t.Interfaces {
			if !shared && !htbInterface(ifaces, name) {
				f.errf(t.ifaceKeys[i], "tier %q is on interface %q, which no [[interface]] with shaper = \"htb\" configures", t.Name, name)
			}
		}
	}
}

// UserOn reports whether user u is shaped on the interface named iface:
// its own interfaces, else its tier's, else every interface. (A user
// behind a node is also only where the node is: see Node.On.)
func (p *Plan) UserOn(u *User, iface string) bool {
	if len(u.Interfaces) > 0 {
		return slices.Contains(u.Interfaces, iface)
	}
	if t, ok := p.Tier(u.Tier); ok && len(t.Interfaces) > 0 {
		return slices.Contains(t.Interfaces, iface)
	}
	return true
}
