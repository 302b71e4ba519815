package daemon

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Per-node metrics (shaperd_node_*): each node's rates, traffic and users
// per interface and direction.

// nodeConfigured is a node on an HTB interface with its configured rates
// for the interface's direction.
type nodeConfigured struct {
	name, parent, path string
	rate, ceil         tbf.Rate
}

// nodesOf lists plan's nodes on the HTB interface in, parents first.
func nodesOf(plan *config.Plan, in *config.Interface) []nodeConfigured {
	if in.Shaper != config.ShaperHTB || len(plan.Nodes) == 0 {
		return nil
	}
	var out []nodeConfigured
	for i := range plan.Nodes {
		n := &plan.Nodes[i]
		if !n.On(in.Name) {
			continue
		}
		r, c := n.Rates(in.Direction)
		out = append(out, nodeConfigured{name: n.Name, parent: n.Parent, path: n.Path, rate: r, ceil: c})
	}
	return out
}

// addNodeDrops adds class h's drop counter change since the previous dump
// (before; nil when h was not in it) to the sums of its node and of every
// node above it: a user's class to its node's, a node's own class to
// itself. HTB counts drops at the leaves, so a node's sum is the drops of
// the traffic through it. As for the tiers (addTierCounts), a class seen
// for the first time adds its whole counter (the sums are the kernel's,
// across restarts of the daemon) and a counter that went back counts from
// 0; the sums only grow.
func (st *reconciler) addNodeDrops(h model.Handle, now model.Stats, before *model.Stats) {
	if before == nil {
		before = &model.Stats{} // first sight: the kernel's total, as the tiers' (addTierCounts)
	}
	if st.want == nil || len(st.targets().Nodes) == 0 || now.Drops == before.Drops {
		return
	}
	i, ok := st.want.Index(h)
	if !ok {
		return
	}
	n := st.tree().Classes[i].Labels.Node
	if n == "" {
		return
	}
	if st.nodeDrops == nil {
		st.nodeDrops = map[string]uint64{}
	}
	grew := grown(uint64(now.Drops), uint64(before.Drops))
	for depth := 0; n != "" && depth <= model.MaxNodeDepth; depth++ {
		st.nodeDrops[n] += grew
		nt, ok := st.want.Node(n)
		if !ok {
			return
		}
		n = nt.Parent
	}
}

var (
	nodeLabels = []string{"interface", "direction", "node"}
	// shaperd_node_info carries the hierarchy for joins and legends.
	descNodeInfo           = prometheus.NewDesc("shaperd_node_info", "Always 1 for each node on the interface; parent is the node it is behind (\"\" for a top-level node), path its names from the top level down (\"north/ap-1\").", []string{"interface", "direction", "node", "parent", "path"}, nil)
	descNodeRateConfigured = prometheus.NewDesc("shaperd_node_rate_configured_bytes_per_second", "The node's rate for the interface's direction as configured (schedules and overrides not applied), bytes per second.", nodeLabels, nil)
	descNodeCeilConfigured = prometheus.NewDesc("shaperd_node_ceil_configured_bytes_per_second", "The node's ceil for the interface's direction as configured (schedules and overrides not applied), bytes per second.", nodeLabels, nil)
	descNodeRateEffective  = prometheus.NewDesc("shaperd_node_rate_effective_bytes_per_second", "Rate in force for the node's class (after schedules, overrides, scaling of oversubscribed guarantees and ramps), bytes per second.", nodeLabels, nil)
	descNodeCeilEffective  = prometheus.NewDesc("shaperd_node_ceil_effective_bytes_per_second", "Ceiling in force for the node's class (after schedules, overrides, the cap to its parent's ceil or the bandwidth, and ramps), bytes per second.", nodeLabels, nil)
	descNodeBytes          = prometheus.NewDesc("shaperd_node_bytes_total", "Bytes sent through the node's class, every user behind it (kernel counter, last dump).", nodeLabels, nil)
	descNodeDrops          = prometheus.NewDesc("shaperd_node_drops_total", "Packets dropped by the classes behind the node (its users' and child nodes'), from the kernel's class counters (so they carry on across restarts of shaperd).", nodeLabels, nil)
	descNodeUsers          = prometheus.NewDesc("shaperd_node_users", "Users behind the node on the interface, through its child nodes too.", nodeLabels, nil)
	descNodeDirectUsers    = prometheus.NewDesc("shaperd_node_direct_users", "Users whose class hangs directly from the node's on the interface.", nodeLabels, nil)
)

// nodeCollector reports each node on each HTB interface from the last
// published snapshot: its configured and effective rate and ceil, its
// class's byte counter, the drops behind it and its users. Cardinality
// is the number of nodes per interface and direction times nine.
type nodeCollector struct {
	d *Daemon
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodeInfo, descNodeRateConfigured, descNodeCeilConfigured, descNodeRateEffective,
		descNodeCeilEffective, descNodeBytes, descNodeDrops, descNodeUsers, descNodeDirectUsers} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.d.snap.Load()
	if p == nil {
		return
	}
	for _, s := range *p {
		if len(s.nodes) > 0 {
			collectNodes(ch, s)
		}
	}
}

// nodeSeen is what a snapshot's classes say of a node: its classes (none
// before the tree is built; a split node has one in every queue's tree)
// and the users hanging directly from it.
type nodeSeen struct {
	rows   []*classRow
	direct int
}

// collectNodes sends the series of s's nodes.
func collectNodes(ch chan<- prometheus.Metric, s *ifaceSnapshot) {
	classes := make(map[string]*nodeSeen, len(s.nodes))
	for _, n := range s.nodes {
		classes[n.name] = &nodeSeen{}
	}
	for i := 0; i < s.classes.len(); i++ {
		r := s.classes.at(i)
		nc := classes[r.labels.Node]
		switch {
		case nc == nil:
		case r.labels.Kind == "node":
			nc.rows = append(nc.rows, r)
		case r.labels.Kind == "user":
			nc.direct++
		}
	}
	// Children follow their parents: summed from the last node up, each
	// total is complete before it is added to its parent's.
	total := make(map[string]int, len(s.nodes))
	for k := len(s.nodes) - 1; k >= 0; k-- {
		n := s.nodes[k]
		total[n.name] += classes[n.name].direct
		if n.parent != "" {
			total[n.parent] += total[n.name]
		}
	}
	for _, n := range s.nodes {
		lv := []string{s.iface, s.direction, n.name}
		nc := classes[n.name]
		ch <- prometheus.MustNewConstMetric(descNodeInfo, prometheus.GaugeValue, 1, s.iface, s.direction, n.name, n.parent, n.path)
		ch <- prometheus.MustNewConstMetric(descNodeRateConfigured, prometheus.GaugeValue, float64(n.rate)/8, lv...)
		ch <- prometheus.MustNewConstMetric(descNodeCeilConfigured, prometheus.GaugeValue, float64(n.ceil)/8, lv...)
		ch <- prometheus.MustNewConstMetric(descNodeUsers, prometheus.GaugeValue, float64(total[n.name]), lv...)
		ch <- prometheus.MustNewConstMetric(descNodeDirectUsers, prometheus.GaugeValue, float64(nc.direct), lv...)
		ch <- prometheus.MustNewConstMetric(descNodeDrops, prometheus.CounterValue, float64(s.nodeDrops[n.name]), lv...)
		if len(nc.rows) == 0 {
			continue // not built yet
		}
		var rate, ceil, bytes float64
		counted := false
		for _, r := range nc.rows {
			rate, ceil = rate+float64(r.rate), ceil+float64(r.ceil)
			if j, ok := slices.BinarySearchFunc(s.counters, r.handle, func(x classCounters, h model.Handle) int { return cmp.Compare(x.handle, h) }); ok {
				bytes += float64(s.counters[j].stats.Bytes)
				counted = true
			}
		}
		ch <- prometheus.MustNewConstMetric(descNodeRateEffective, prometheus.GaugeValue, rate/8, lv...)
		ch <- prometheus.MustNewConstMetric(descNodeCeilEffective, prometheus.GaugeValue, ceil/8, lv...)
		if counted {
			ch <- prometheus.MustNewConstMetric(descNodeBytes, prometheus.CounterValue, bytes, lv...)
		}
	}
}
