package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// The nodes of status (a NODES table, most loaded first), status --tree
// (each interface's hierarchy: root > nodes > users) and top --nodes.

// defaultTreeUsers is how many users status --tree shows under each node
// (and the root) without --users.
const defaultTreeUsers = 5

// side is a user's or node's direction for an interface's direction:
// download on egress, upload on ingress.
func side(ifaceDirection string) string {
	if ifaceDirection == "ingress" {
		return "upload"
	}
	return "download"
}

// ifaceNode is a node with the interface it is on.
type ifaceNode struct {
	control.NodeStatus
	iface *control.InterfaceStatus
}

// load is the share of its effective ceil a node's throughput takes; 0
// without a ceil.
func load(n *control.NodeStatus) float64 {
	if n.EffectiveCeil == 0 {
		return 0
	}
	return float64(n.Throughput) / float64(n.EffectiveCeil)
}

// byLoad orders nodes most loaded first: by load, then throughput, then
// interface, direction and path.
func byLoad(a, b ifaceNode) int {
	return cmp.Or(cmp.Compare(load(&b.NodeStatus), load(&a.NodeStatus)), cmp.Compare(b.Throughput, a.Throughput),
		cmp.Compare(a.iface.Name, b.iface.Name), cmp.Compare(a.iface.Direction, b.iface.Direction), cmp.Compare(a.Path, b.Path))
}

// allNodes lists the nodes of every interface of st, most loaded first.
func allNodes(st *control.Status) []ifaceNode {
	var out []ifaceNode
	for i := range st.Interfaces {
		in := &st.Interfaces[i]
		for _, n := range in.Nodes {
			out = append(out, ifaceNode{NodeStatus: n, iface: in})
		}
	}
	slices.SortStableFunc(out, byLoad)
	return out
}

// nodeReason is a node's REASON column: the daemon's reason with a ramp
// in progress.
func nodeReason(n *control.NodeStatus) string {
	r := dash(n.Reason)
	if rp := n.Ramp; rp != nil {
		r += fmt.Sprintf("; ramping %s -> %s until %s", formatRate(rp.From), formatRate(rp.To), rp.Until.Format(time.TimeOnly))
	}
	return r
}

// writeNodeTable writes the NODES table of st, most loaded first, and a
// blank line; nothing when no interface has nodes.
func writeNodeTable(out io.Writer, st *control.Status) error {
	nodes := allNodes(st)
	if len(nodes) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINTERFACE\tDIRECTION\tRATE/CEIL\tEFFECTIVE\tTHROUGHPUT\t%CEIL\tUSERS\tDIRECT\tBYTES\tDROPS\tREASON")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s/%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\n", n.Path, n.iface.Name, side(n.iface.Direction),
			formatRate(n.Rate), formatRate(n.Ceil), formatRate(n.EffectiveRate), formatRate(n.EffectiveCeil),
			formatRate(n.Throughput), percent(n.Throughput, n.EffectiveCeil), n.TotalUsers, n.Users,
			formatBytes(n.Bytes), n.Drops, nodeReason(&n.NodeStatus))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out)
	return err
}

// parseTreeUsers parses status --users: a count of users per node, or
// "all".
func parseTreeUsers(s string) (int, error) {
	if s == "all" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, usagef("status", "--users %q: a number of users per node (0: none) or all", s)
	}
	return n, nil
}

// treeNode is a node of an interface's drawn tree with its children.
type treeNode struct {
	node  ifaceNode
	nodes []*treeNode
	users []control.UserStatus
}

// writeTree draws each interface of st as a tree: the root (the
// interface's bandwidth and its users' total throughput), its nodes
// nested as configured (siblings most loaded first), and under each node
// and the root its users, heaviest first, at most perNode of them (-1:
// all) and a "... N more users" line for the rest. Rates are the ones in
// force.
func writeTree(out io.Writer, st *control.Status, perNode int) error {
	fmt.Fprintf(out, "shaperd status at %s: %s, %s\n", st.Generated.Format("2006-01-02 15:04:05 MST"),
		plural(len(st.Interfaces), "interface"), plural(countUsers(st.Users), "user"))
	for i := range st.Interfaces {
		in := &st.Interfaces[i]
		fmt.Fprintln(out)
		if err := writeIfaceTree(out, st, in, perNode); err != nil {
			return err
		}
	}
	return nil
}

// writeIfaceTree draws interface in of st (see writeTree).
func writeIfaceTree(out io.Writer, st *control.Status, in *control.InterfaceStatus, perNode int) error {
	dir := side(in.Direction)
	byName := make(map[string]*treeNode, len(in.Nodes))
	for _, n := range in.Nodes {
		byName[n.Name] = &treeNode{node: ifaceNode{NodeStatus: n, iface: in}}
	}
	root := &treeNode{}
	for _, n := range in.Nodes {
		parent := root
		if p, ok := byName[n.Parent]; ok && n.Parent != "" {
			parent = p
		}
		parent.nodes = append(parent.nodes, byName[n.Name])
	}
	var total tbf.Rate
	users := 0
	for _, u := range st.Users {
		if u.Interface != in.Name || u.Direction != "" && u.Direction != dir {
			continue
		}
		total += u.Throughput
		users++
		parent := root
		if p, ok := byName[u.Node]; ok {
			parent = p
		}
		parent.users = append(parent.users, u)
	}
	bw := in.Bandwidth
	if in.EffectiveBandwidth != 0 {
		bw = in.EffectiveBandwidth
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TREE\tRATE/CEIL\tTHROUGHPUT\t%CEIL\tUSERS")
	fmt.Fprintf(tw, "%s %s (%s)\t%s\t%s\t%s\t%d\n", in.Name, dir, dash(in.State), formatRate(bw), formatRate(total), percent(total, bw), users)
	root.write(tw, "", perNode)
	if err := tw.Flush(); err != nil {
		return err
	}
	// Users' lines end in an empty USERS cell, which tabwriter pads.
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(out, strings.Join(lines, "\n")+"\n")
	return err
}

// write draws t's children below a line whose continuation prefix is
// prefix: its nodes (most loaded first) and its users (heaviest first, at
// most perNode; -1: all).
func (t *treeNode) write(tw io.Writer, prefix string, perNode int) {
	slices.SortStableFunc(t.nodes, func(a, b *treeNode) int { return byLoad(a.node, b.node) })
	slices.SortStableFunc(t.users, func(a, b control.UserStatus) int {
		return cmp.Or(cmp.Compare(b.Throughput, a.Throughput), cmp.Compare(a.Name, b.Name))
	})
	shown := t.users
	if perNode >= 0 && len(shown) > perNode {
		shown = shown[:perNode]
	}
	more := len(t.users) - len(shown)
	if perNode == 0 {
		more = 0 // the USERS column counts them
	}
	lines := len(t.nodes) + len(shown)
	if more > 0 {
		lines++
	}
	branch := func(k int) (string, string) {
		if k == lines-1 {
			return prefix + "└─ ", prefix + "   "
		}
		return prefix + "├─ ", prefix + "│  "
	}
	k := 0
	for _, c := range t.nodes {
		head, next := branch(k)
		n := &c.node
		fmt.Fprintf(tw, "%s%s\t%s/%s\t%s\t%s\t%d\n", head, n.Name, formatRate(n.EffectiveRate), formatRate(n.EffectiveCeil),
			formatRate(n.Throughput), percent(n.Throughput, n.EffectiveCeil), n.TotalUsers)
		c.write(tw, next, perNode)
		k++
	}
	for _, u := range shown {
		head, _ := branch(k)
		fmt.Fprintf(tw, "%s%s (%s)\t%s/%s\t%s\t%s\t\n", head, u.Name, dash(u.Tier), formatRate(u.EffectiveRate), formatRate(u.EffectiveCeil),
			formatRate(u.Throughput), percent(u.Throughput, u.EffectiveCeil))
		k++
	}
	if more > 0 {
		head, _ := branch(k)
		fmt.Fprintf(tw, "%s... %s\t\t\t\t\n", head, plural(more, "more user"))
	}
}

// filterNodes keeps of st what target node:NAME (a name or a path)
// selects: the interfaces the node is on with the node and the nodes
// behind it, and the users behind them. Nothing selected is a
// *control.NotFoundError.
func filterNodes(st *control.Status, t control.Target, target string) (*control.Status, error) {
	for _, in := range st.Interfaces {
		for _, n := range in.Nodes {
			if n.Path == t.Name {
				t.Name = n.Name
			}
		}
	}
	subtree := map[string]bool{t.Name: true}
	for _, in := range st.Interfaces {
		for _, n := range in.Nodes { // parents first
			if subtree[n.Parent] {
				subtree[n.Name] = true
			}
		}
	}
	out := *st
	out.Interfaces = nil
	for _, in := range st.Interfaces {
		if !slices.ContainsFunc(in.Nodes, func(n control.NodeStatus) bool { return n.Name == t.Name }) {
			continue
		}
		in.Nodes = slices.DeleteFunc(slices.Clone(in.Nodes), func(n control.NodeStatus) bool { return !subtree[n.Name] })
		out.Interfaces = append(out.Interfaces, in)
	}
	if len(out.Interfaces) == 0 {
		return nil, &control.NotFoundError{Target: target}
	}
	out.Users = []control.UserStatus{}
	for _, u := range st.Users {
		if u.Node != "" && subtree[u.Node] {
			out.Users = append(out.Users, u)
		}
	}
	return &out, nil
}

// keepNodesAbove trims the nodes of each interface of st to those its
// users are behind, with their parents: the path from the root to each
// user (status USER and tier:NAME).
func keepNodesAbove(st *control.Status) {
	for i := range st.Interfaces {
		in := &st.Interfaces[i]
		if len(in.Nodes) == 0 {
			continue
		}
		parent := make(map[string]string, len(in.Nodes))
		for _, n := range in.Nodes {
			parent[n.Name] = n.Parent
		}
		keep := map[string]bool{}
		dir := side(in.Direction)
		for _, u := range st.Users {
			if u.Interface != in.Name || u.Direction != "" && u.Direction != dir {
				continue
			}
			for n := u.Node; n != "" && !keep[n]; n = parent[n] {
				keep[n] = true
			}
		}
		in.Nodes = slices.DeleteFunc(slices.Clone(in.Nodes), func(n control.NodeStatus) bool { return !keep[n.Name] })
		if len(in.Nodes) == 0 {
			in.Nodes = nil
		}
	}
}

// topNode is a node row of top --nodes --json: the node with its
// interface.
type topNode struct {
	control.NodeStatus
	Interface string `json:"interface"`
	Direction string `json:"direction"`
	Device    string `json:"device"`
}

// topNodes lists st's nodes for top --nodes, most loaded first, and the
// throughput of the top-level ones (the traffic through every node).
func topNodes(st *control.Status) ([]topNode, tbf.Rate) {
	var out []topNode
	var total tbf.Rate
	for _, n := range allNodes(st) {
		out = append(out, topNode{NodeStatus: n.NodeStatus, Interface: n.iface.Name, Direction: side(n.iface.Direction), Device: n.iface.Device})
		if n.Parent == "" {
			total += n.Throughput
		}
	}
	return out, total
}

// writeTopNodes writes one top --nodes screen: a header and every node on
// every interface, most loaded first, at most maxRows lines in all when
// maxRows > 0.
func writeTopNodes(out io.Writer, st *control.Status, maxRows int, terminal bool) {
	nodes, total := topNodes(st)
	hint := ""
	if terminal {
		hint = "  (q quits)"
	}
	fmt.Fprintf(out, "shaperd top at %s: %s, total %s%s\n\n",
		st.Generated.Format(time.TimeOnly), plural(len(nodes), "node"), formatRate(total), hint)
	more := 0
	if maxRows > 0 && len(nodes) > maxRows-topHeadRows-1 {
		keep := max(maxRows-topHeadRows-1, 0)
		more = len(nodes) - keep
		nodes = nodes[:keep]
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINTERFACE\tDIRECTION\tDEVICE\tTHROUGHPUT\tCEIL\t%CEIL\tUSERS\tBYTES\tDROPS")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\n", n.Path, n.Interface, n.Direction, dash(n.Device),
			formatRate(n.Throughput), formatRate(n.EffectiveCeil), percent(n.Throughput, n.EffectiveCeil),
			n.TotalUsers, formatBytes(n.Bytes), n.Drops)
	}
	tw.Flush()
	if more > 0 {
		fmt.Fprintf(out, "... %d more\n", more)
	}
}

// topNodesSnapshot is one `top --nodes --json` line.
type topNodesSnapshot struct {
	Generated time.Time `json:"generated"`
	Total     tbf.Rate  `json:"total"`
	Nodes     []topNode `json:"nodes"`
}

// writeTopNodesJSON writes one top --nodes snapshot as a line of JSON:
// the nodes most loaded first, as top --nodes shows them.
func writeTopNodesJSON(out io.Writer, st *control.Status) error {
	nodes, total := topNodes(st)
	if nodes == nil {
		nodes = []topNode{}
	}
	return jsonout.EncodeLine(out, topNodesSnapshot{Generated: st.Generated, Total: total, Nodes: nodes})
}
