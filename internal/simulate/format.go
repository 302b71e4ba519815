package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/sim"
)

// WriteTable prints the users and then the interfaces' totals as aligned
// columns. On an interface with nodes, each node has a row ("node ap-1
// (100mbit/200mbit)": its class's rate and ceil in force) with what passes
// through it, followed by its child nodes and then its users, indented
// by depth; the users of no node come first.
func (rep *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "simulated at %s\n\n", rep.At.Format("2006-01-02 15:04 MST"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tTIER\tINTERFACE\tDIRECTION\tDEMAND\tRATE\tLIMITED_BY")
	short, shortQueue := false, false
	for _, r := range rep.tableRows() {
		if n := r.node; n != nil {
			demand := "max"
			if !math.IsInf(n.Demand, 1) {
				demand = FormatRate(n.Demand)
			}
			limited := dash(n.LimitedBy)
			if n.Detail != "" {
				limited += " (" + n.Detail + ")"
			}
			fmt.Fprintf(tw, "%snode %s (%s/%s)\t-\t%s\t%s\t%s\t%s\t%s\n", r.indent, n.Node, FormatRate(n.ClassRate), FormatRate(n.ClassCeil),
				n.Interface, n.Direction, demand, FormatRate(n.Rate), limited)
			continue
		}
		u := r.user
		limited := u.LimitedBy
		if u.Detail != "" {
			limited += " (" + u.Detail + ")"
		}
		if u.ShortBurst {
			limited += " *"
			short = true
		}
		if u.ShortQueue {
			limited += " !"
			shortQueue = true
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.indent, u.User, dash(u.Tier), u.Interface, u.Direction,
			u.Demand, FormatRate(u.Rate), limited)
	}
	if short {
		fmt.Fprintf(tw, "* borrows with a cburst below %d packets: the kernel may give less\n", sim.BurstPackets)
	}
	if shortQueue {
		fmt.Fprintln(tw, "! its leaf is a bfifo smaller than one 64 KiB TCP aggregate: the kernel drops aggregates whole and TCP gets a few percent of this rate")
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "INTERFACE\tDIRECTION\tSHAPER\tBANDWIDTH\tDEMAND\tRATE\tTIERS")
	for _, in := range rep.Interfaces {
		demand := "max"
		if !math.IsInf(in.Demand, 1) {
			demand = FormatRate(in.Demand)
		}
		var tiers []string
		for _, t := range in.Tiers {
			tiers = append(tiers, t.Tier+" "+FormatRate(t.Rate))
		}
		rate := FormatRate(in.Rate)
		if in.Oversubscribed {
			rate += " (guarantees " + FormatRate(in.Guaranteed) + " > bandwidth)"
		}
		shaper := string(in.Shaper)
		if len(in.Queues) > 0 {
			shaper = fmt.Sprintf("%s x%d queues", in.Shaper, len(in.Queues))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Interface, in.Direction, shaper,
			FormatRate(in.Bandwidth), demand, rate, dash(strings.Join(tiers, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, in := range rep.Interfaces {
		for _, c := range in.Capped {
			fmt.Fprintf(w, "%s %s: %s\n", in.Interface, in.Direction, c)
		}
	}
	for _, in := range rep.Interfaces {
		if len(in.Queues) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s %s: queues after rebalancing (ceil / sent):", in.Interface, in.Direction)
		for _, q := range in.Queues {
			fmt.Fprintf(w, " %d: %s / %s", q.Queue, FormatRate(q.Ceil), FormatRate(q.Sent))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// tableRow is a row of the users table: a user or a node, indented.
type tableRow struct {
	user   *UserRow
	node   *NodeRow
	indent string
}

// tableRows orders the users table: per interface, as in rep.Users; on an
// interface with nodes, its users of no node first, then each top-level
// node followed by its branch (child nodes, then its users). Nodes of an
// interface without users follow the users.
func (rep *Report) tableRows() []tableRow {
	out := make([]tableRow, 0, len(rep.Users)+len(rep.Nodes))
	type key struct {
		iface string
		dir   model.Direction
	}
	nodes := map[key][]*NodeRow{}
	var order []key
	for i := range rep.Nodes {
		n := &rep.Nodes[i]
		k := key{n.Interface, n.Direction}
		if _, ok := nodes[k]; !ok {
			order = append(order, k)
		}
		nodes[k] = append(nodes[k], n)
	}
	// tree appends the rows of one interface's users and nodes.
	tree := func(block []UserRow, ns []*NodeRow) {
		known := make(map[string]bool, len(ns))
		children := map[string][]*NodeRow{}
		for _, n := range ns { // parents first
			p := n.Parent
			if !known[p] {
				p = ""
			}
			known[n.Node] = true
			children[p] = append(children[p], n)
		}
		users := map[string][]*UserRow{}
		for b := range block {
			u := &block[b]
			node := u.Node
			if !known[node] {
				node = ""
			}
			users[node] = append(users[node], u)
		}
		for _, u := range users[""] {
			out = append(out, tableRow{user: u})
		}
		var branch func(n *NodeRow, indent string)
		branch = func(n *NodeRow, indent string) {
			out = append(out, tableRow{node: n, indent: indent})
			for _, c := range children[n.Node] {
				branch(c, indent+"  ")
			}
			for _, u := range users[n.Node] {
				out = append(out, tableRow{user: u, indent: indent + "  "})
			}
		}
		for _, n := range children[""] {
			branch(n, "")
		}
	}
	done := map[key]bool{}
	for i := 0; i < len(rep.Users); {
		k := key{rep.Users[i].Interface, rep.Users[i].Direction}
		j := i
		for j < len(rep.Users) && rep.Users[j].Interface == k.iface && rep.Users[j].Direction == k.dir {
			j++
		}
		block := rep.Users[i:j]
		i = j
		if done[k] { // nodes are drawn once per interface
			tree(block, nil)
			continue
		}
		done[k] = true
		tree(block, nodes[k])
	}
	for _, k := range order {
		if !done[k] {
			tree(nil, nodes[k])
		}
	}
	return out
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// FormatRate formats bits/s with tc's decimal units and up to two
// decimals: "23.33mbit", "1gbit", "0bit".
func FormatRate(bits float64) string {
	units := []struct {
		name  string
		scale float64
	}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}}
	for _, u := range units {
		if bits >= u.scale {
			return strconv.FormatFloat(math.Round(bits/u.scale*100)/100, 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatFloat(math.Round(bits), 'f', -1, 64) + "bit"
}

// jsonReport is the --json layout (shaperd --simulate --json and
// shaperctl simulate --json, docs/json.md): rates are whole bits per
// second; direction is the users' word ("download", "upload") and
// interface_direction the interface's ("egress", "ingress").
type jsonReport struct {
	At         time.Time   `json:"at"`
	Users      []jsonUser  `json:"users"`
	Interfaces []jsonIface `json:"interfaces"`
	Nodes      []jsonNode  `json:"nodes,omitempty"`
}

type jsonUser struct {
	User           string `json:"user"`
	Tier           string `json:"tier,omitempty"`
	Node           string `json:"node,omitempty"`
	Interface      string `json:"interface"`
	Direction      string `json:"direction"`
	IfaceDirection string `json:"interface_direction"`
	// Demand is "max" or a rate as text; DemandBits is null for max.
	Demand     string  `json:"demand_text"`
	DemandBits *uint64 `json:"demand_bits_per_second"`
	Bits       uint64  `json:"bits_per_second"`
	LimitedBy  string  `json:"limited_by"`
	Detail     string  `json:"detail,omitempty"`
	ShortBurst bool    `json:"short_burst,omitempty"`
	ShortQueue bool    `json:"short_queue,omitempty"`
}

type jsonIface struct {
	Interface      string     `json:"interface"`
	Device         string     `json:"device"`
	Direction      string     `json:"direction"`
	IfaceDirection string     `json:"interface_direction"`
	Shaper         string     `json:"shaper"`
	Bandwidth      uint64     `json:"bandwidth_bits_per_second"`
	DemandBits     *uint64    `json:"demand_bits_per_second"`
	Bits           uint64     `json:"bits_per_second"`
	Guaranteed     uint64     `json:"guaranteed_bits_per_second"`
	Oversubscribed bool       `json:"oversubscribed"`
	Capped         []string   `json:"capped,omitempty"`
	Tiers          []jsonTier `json:"tiers"`
}

type jsonTier struct {
	Tier string `json:"tier"`
	Bits uint64 `json:"bits_per_second"`
}

// jsonNode is a node on an interface (NodeRow): bits_per_second is what
// passes through it, rate_ and ceil_bits_per_second its class's rates in
// force, users how many users are behind it.
type jsonNode struct {
	Node           string  `json:"node"`
	Parent         string  `json:"parent,omitempty"`
	Path           string  `json:"path"`
	Interface      string  `json:"interface"`
	Direction      string  `json:"direction"`
	IfaceDirection string  `json:"interface_direction"`
	Users          int     `json:"user_count"`
	DemandBits     *uint64 `json:"demand_bits_per_second"`
	Bits           uint64  `json:"bits_per_second"`
	Rate           uint64  `json:"rate_bits_per_second"`
	Ceil           uint64  `json:"ceil_bits_per_second"`
	LimitedBy      string  `json:"limited_by,omitempty"`
	Detail         string  `json:"detail,omitempty"`
}

// usersWord is an interface direction in the words of users' rates.
func usersWord(d model.Direction) string {
	if d == model.Ingress {
		return "upload"
	}
	return "download"
}

// bits rounds a rate to whole bits; nil for +Inf (max).
func bits(v float64) *uint64 {
	if math.IsInf(v, 1) {
		return nil
	}
	b := uint64(math.Round(v))
	return &b
}

// WriteJSON prints the report as one JSON object (see jsonReport).
func (rep *Report) WriteJSON(w io.Writer) error {
	out := jsonReport{At: rep.At, Users: []jsonUser{}, Interfaces: []jsonIface{}}
	for _, u := range rep.Users {
		out.Users = append(out.Users, jsonUser{User: u.User, Tier: u.Tier, Node: u.Node, Interface: u.Interface,
			Direction: usersWord(u.Direction), IfaceDirection: string(u.Direction), Demand: u.Demand.String(), DemandBits: bits(float64(u.Demand)),
			Bits: *bits(u.Rate), LimitedBy: u.LimitedBy, Detail: u.Detail, ShortBurst: u.ShortBurst, ShortQueue: u.ShortQueue})
	}
	for _, in := range rep.Interfaces {
		j := jsonIface{Interface: in.Interface, Device: in.Device, Direction: usersWord(in.Direction),
			IfaceDirection: string(in.Direction), Shaper: string(in.Shaper),
			Bandwidth: *bits(in.Bandwidth), DemandBits: bits(in.Demand), Bits: *bits(in.Rate),
			Guaranteed: *bits(in.Guaranteed), Oversubscribed: in.Oversubscribed, Capped: in.Capped, Tiers: []jsonTier{}}
		for _, t := range in.Tiers {
			j.Tiers = append(j.Tiers, jsonTier{Tier: t.Tier, Bits: *bits(t.Rate)})
		}
		out.Interfaces = append(out.Interfaces, j)
	}
	for _, n := range rep.Nodes {
		out.Nodes = append(out.Nodes, jsonNode{Node: n.Node, Parent: n.Parent, Path: n.Path, Interface: n.Interface,
			Direction: usersWord(n.Direction), IfaceDirection: string(n.Direction), Users: n.Users, DemandBits: bits(n.Demand), Bits: *bits(n.Rate),
			Rate: *bits(n.ClassRate), Ceil: *bits(n.ClassCeil), LimitedBy: n.LimitedBy, Detail: n.Detail})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
