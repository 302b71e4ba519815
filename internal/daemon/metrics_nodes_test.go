package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// TestNodeMetrics: shaperd_node_* per node, interface and direction: the
// configured and effective rates in bytes per second (capped, scaled,
// overridden), the node class's byte counter, the drops behind the node
// (the kernel's totals, summed up the tree), and its users; node classes
// are not among the shaperd_class_* series (their labels would collide).
func TestNodeMetrics(t *testing.T) {
	d, k, clk := nodesDaemon(t)
	dumpStats(t, d, k, clk, "lan0/egress", "lan0", map[string]model.Stats{
		"node:north": {Bytes: 1000}, "node:ap-1": {Bytes: 1000}, "alice": {Bytes: 1000, Drops: 10}, "bob": {Drops: 5},
	})
	dumpStats(t, d, k, clk, "lan0/egress", "lan0", map[string]model.Stats{
		"node:north": {Bytes: 5000}, "node:ap-1": {Bytes: 4000}, "alice": {Bytes: 4000, Drops: 30}, "bob": {Drops: 7},
	})
	mfs := scrape(t, d)
	egress := func(node string) map[string]string {
		return map[string]string{"interface": "lan0", "direction": "egress", "node": node}
	}
	ingress := func(node string) map[string]string {
		return map[string]string{"interface": "lan0", "direction": "ingress", "node": node}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"shaperd_node_rate_configured_bytes_per_second", egress("ap-1"), float64(100*tbf.Mbit) / 8},
		{"shaperd_node_ceil_configured_bytes_per_second", egress("ap-1"), float64(200*tbf.Mbit) / 8},
		{"shaperd_node_rate_effective_bytes_per_second", egress("ap-1"), float64(100*tbf.Mbit) / 8},
		{"shaperd_node_ceil_effective_bytes_per_second", egress("ap-1"), float64(200*tbf.Mbit) / 8},
		// Upload: north's 500mbit ceil capped to the 100mbit bandwidth,
		// ap-1's 100mbit guarantee scaled to half of north's 50mbit.
		{"shaperd_node_ceil_configured_bytes_per_second", ingress("north"), float64(500*tbf.Mbit) / 8},
		{"shaperd_node_ceil_effective_bytes_per_second", ingress("north"), float64(100*tbf.Mbit) / 8},
		{"shaperd_node_rate_effective_bytes_per_second", ingress("ap-1"), float64(25*tbf.Mbit) / 8},
		{"shaperd_node_bytes_total", egress("north"), 5000},
		{"shaperd_node_bytes_total", egress("ap-1"), 4000},
		// The kernel's totals: alice's 30 and bob's 7.
		{"shaperd_node_drops_total", egress("ap-1"), 30},
		{"shaperd_node_drops_total", egress("ap-2"), 7},
		{"shaperd_node_drops_total", egress("north"), 37},
		{"shaperd_node_drops_total", ingress("north"), 0},
		{"shaperd_node_users", egress("north"), 2},
		{"shaperd_node_direct_users", egress("north"), 0},
		{"shaperd_node_users", egress("ap-1"), 1},
		{"shaperd_node_direct_users", egress("ap-1"), 1},
		{"shaperd_node_users", ingress("ap-2"), 1},
		{"shaperd_node_info", map[string]string{"interface": "lan0", "direction": "egress", "node": "ap-1", "parent": "north", "path": "north/ap-1"}, 1},
	} {
		if got := value(t, mfs, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"shaperd_class_rate_bytes_per_second", "shaperd_class_bytes_total"} {
		for _, m := range mfs[name].GetMetric() {
			if label(m, "kind") == "node" {
				t.Errorf("%s has a node class: %v", name, m.GetLabel())
			}
		}
	}
	if n := len(mfs["shaperd_node_users"].GetMetric()); n != 6 {
		t.Errorf("%d shaperd_node_users series, want 6 (3 nodes, 2 directions)", n)
	}

	// An override moves the effective rates, not the configured ones.
	if _, err := d.setRate(control.SetRateRequest{Target: "node:ap-2", Rate: 30 * tbf.Mbit, Ramp: control.DurationPtr(0), Direction: "download"}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(t, time.Second)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	mfs = scrape(t, d)
	if got := value(t, mfs, "shaperd_node_ceil_effective_bytes_per_second", egress("ap-2")); got != float64(30*tbf.Mbit)/8 {
		t.Errorf("ap-2's effective ceil after set-rate 30mbit: %v", got)
	}
	if got := value(t, mfs, "shaperd_node_ceil_configured_bytes_per_second", egress("ap-2")); got != float64(100*tbf.Mbit)/8 {
		t.Errorf("ap-2's configured ceil after set-rate: %v", got)
	}
}

// TestNoNodeMetricsWithoutNodes: a plan without nodes has no
// shaperd_node_* series.
func TestNoNodeMetricsWithoutNodes(t *testing.T) {
	d, k, clk, _ := metricsDaemon(t, "")
	dumpBytes(t, d, k, clk, map[string]uint64{"alice": 100})
	mfs := scrape(t, d)
	if _, ok := mfs["shaperd_class_bytes_total"]; !ok {
		t.Fatal("no class series in the scrape")
	}
	for name := range mfs {
		if len(name) > len("shaperd_node_") && name[:len("shaperd_node_")] == "shaperd_node_" {
			t.Errorf("series %s without nodes", name)
		}
	}
}
