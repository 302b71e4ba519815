package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// nodesDaemon is a daemon on the fake kernel with nodesConfig and
// nodesUsers, applied once.
func nodesDaemon(t *testing.T) (*Daemon, *fakeKernel, *fakeClock) {
	t.Helper()
	dir := t.TempDir()
	writeConfig(t, dir, nodesConfig, nodesUsers)
	k := newFakeKernel("lan0", "ifb-lan0")
	clk := newFakeClock()
	d, _ := newTestDaemon(t, k, clk, dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d, k, clk
}

// dumpStats gives the classes of interface key (on device) these counters
// in a dump the daemon samples 5s after the last one: stats are by user
// name, or "node:NAME" for a node's class; other classes get zeros.
func dumpStats(t *testing.T, d *Daemon, k *fakeKernel, clk *fakeClock, key, device string, stats map[string]model.Stats) {
	t.Helper()
	var st *reconciler
	for _, s := range d.ifaces {
		if s.key == key {
			st = s
		}
	}
	if st == nil {
		t.Fatalf("no interface %s", key)
	}
	tr := k.tree(device)
	for i, c := range tr.Classes {
		s := model.Stats{}
		if j, ok := st.want.Index(c.Handle); ok {
			l := st.tree().Classes[j].Labels
			name := l.User
			if l.Kind == "node" {
				name = "node:" + l.Node
			}
			if v, ok := stats[name]; ok {
				s = v
			}
		}
		tr.Classes[i].Stats = &s
	}
	clk.now = clk.now.Add(5 * time.Second)
	d.sample(st, tr, clk.Now())
}

// statusNodes returns the nodes of interface name/direction in st by name.
func statusNodes(t *testing.T, st *control.Status, name, direction string) map[string]control.NodeStatus {
	t.Helper()
	for _, in := range st.Interfaces {
		if in.Name == name && in.Direction == direction {
			out := map[string]control.NodeStatus{}
			for _, n := range in.Nodes {
				out[n.Name] = n
			}
			return out
		}
	}
	t.Fatalf("no interface %s %s in the status", name, direction)
	return nil
}

// TestStatusShowsNodes: status lists each interface's nodes, parents
// first, with their configured and effective rates (caps to the parent
// and scaled guarantees on the small upload side, an override), the
// throughput and bytes of the node's class, the drops of the classes
// behind it, their users (directly and in total), and each user's node.
func TestStatusShowsNodes(t *testing.T) {
	d, k, clk := nodesDaemon(t)
	dumpStats(t, d, k, clk, "lan0/egress", "lan0", map[string]model.Stats{
		"node:north": {Bytes: 1000}, "node:ap-1": {Bytes: 1000}, "alice": {Bytes: 1000, Drops: 10}, "bob": {Drops: 5},
	})
	// 12.5 MB more in 5s through ap-1 (and north): 20mbit.
	dumpStats(t, d, k, clk, "lan0/egress", "lan0", map[string]model.Stats{
		"node:north": {Bytes: 12_501_000}, "node:ap-1": {Bytes: 12_501_000}, "alice": {Bytes: 12_501_000, Drops: 30}, "bob": {Drops: 5},
	})
	st := d.status()

	var order []string
	for _, in := range st.Interfaces {
		if in.Direction == "egress" {
			for _, n := range in.Nodes {
				order = append(order, n.Path)
			}
		}
	}
	if strings.Join(order, " ") != "north north/ap-1 north/ap-2" {
		t.Errorf("egress nodes %q, want parents first", order)
	}
	down := statusNodes(t, st, "lan0", "egress")
	want := map[string]control.NodeStatus{
		"north": {Name: "north", Path: "north", Rate: 500 * tbf.Mbit, Ceil: 500 * tbf.Mbit, EffectiveRate: 500 * tbf.Mbit, EffectiveCeil: 500 * tbf.Mbit,
			Reason: "node north", Throughput: 20 * tbf.Mbit, Bytes: 12_501_000, Drops: 35, Users: 0, TotalUsers: 2},
		"ap-1": {Name: "ap-1", Parent: "north", Path: "north/ap-1", Rate: 100 * tbf.Mbit, Ceil: 200 * tbf.Mbit, EffectiveRate: 100 * tbf.Mbit, EffectiveCeil: 200 * tbf.Mbit,
			Reason: "node ap-1", Throughput: 20 * tbf.Mbit, Bytes: 12_501_000, Drops: 30, Users: 1, TotalUsers: 1},
		"ap-2": {Name: "ap-2", Parent: "north", Path: "north/ap-2", Rate: 100 * tbf.Mbit, Ceil: 100 * tbf.Mbit, EffectiveRate: 100 * tbf.Mbit, EffectiveCeil: 100 * tbf.Mbit,
			Reason: "node ap-2", Drops: 5, Users: 1, TotalUsers: 1},
	}
	for name, w := range want {
		if got := down[name]; got != w {
			t.Errorf("download node %s:\n got %+v\nwant %+v", name, got, w)
		}
	}

	// The upload side: north's 500mbit upload ceil is capped to the
	// 100mbit bandwidth, its children's to north's, and their 100mbit
	// guarantees oversubscribe north's 50mbit.
	up := statusNodes(t, st, "lan0", "ingress")
	if n := up["north"]; n.Rate != 50*tbf.Mbit || n.Ceil != 500*tbf.Mbit || n.EffectiveCeil != 100*tbf.Mbit || !strings.Contains(n.Reason, "capped to the bandwidth 100mbit") {
		t.Errorf("upload north: %+v", n)
	}
	if n := up["ap-1"]; n.EffectiveCeil != 100*tbf.Mbit || n.EffectiveRate != 25*tbf.Mbit || !strings.Contains(n.Reason, "oversubscribed") {
		t.Errorf("upload ap-1: %+v, want its 100mbit scaled to 25mbit (half of north's 50mbit) and its ceil capped to north's 100mbit", n)
	}

	nodeOf := map[string]string{}
	for _, u := range st.Users {
		if u.Direction == "download" {
			nodeOf[u.Name] = u.Node
		}
	}
	if nodeOf["alice"] != "ap-1" || nodeOf["bob"] != "ap-2" || nodeOf["carol"] != "" {
		t.Errorf("users' nodes %v", nodeOf)
	}

	// A node override shows in the effective rates and the reason.
	if _, err := d.setRate(control.SetRateRequest{Target: "node:ap-2", Rate: 30 * tbf.Mbit, Ramp: control.DurationPtr(0), Direction: "download"}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(t, time.Second)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := statusNodes(t, d.status(), "lan0", "egress")["ap-2"]
	if n.Rate != 100*tbf.Mbit || n.EffectiveRate != 30*tbf.Mbit || n.EffectiveCeil != 30*tbf.Mbit || !strings.Contains(n.Reason, "node override (ap-2)") {
		t.Errorf("ap-2 after set-rate node:ap-2 30mbit: %+v", n)
	}
}

// TestStatusWithoutNodes: an interface without nodes has none in its
// status, and its users no node.
func TestStatusWithoutNodes(t *testing.T) {
	d, _ := newTestDaemon(t, newFakeKernel("lan0", "ifb-lan0"), newFakeClock(), "")
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := d.status()
	for _, in := range st.Interfaces {
		if in.Nodes != nil {
			t.Errorf("%s %s: nodes %+v", in.Name, in.Direction, in.Nodes)
		}
	}
	for _, u := range st.Users {
		if u.Node != "" {
			t.Errorf("%s has node %q", u.Name, u.Node)
		}
	}
	if len(st.Users) == 0 {
		t.Error("no users in the status")
	}
}

// TestTopShowsFreshNodeCounters: top's status (counters read for the
// request) gives each node its class's throughput since the last read.
func TestTopShowsFreshNodeCounters(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, nodesConfig, nodesUsers)
	fk := newFakeKernel("lan0", "ifb-lan0")
	k := &countingKernel{fakeKernel: fk}
	clk := newFakeClock()
	d, _ := newTestDaemon(t, k, clk, dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	top := func() map[string]control.NodeStatus {
		d.refreshCounters(clk.Now(), MinCounterAge)
		return statusNodes(t, d.status(), "lan0", "egress")
	}
	clk.now = clk.now.Add(time.Second)
	k.bytes = 125000
	top()
	clk.now = clk.now.Add(time.Second)
	k.bytes += 250000 // 2 Mbit in a second through every class
	nodes := top()
	for _, name := range []string{"north", "ap-1", "ap-2"} {
		if n := nodes[name]; n.Throughput != 2*tbf.Mbit || n.Bytes != 375000 {
			t.Errorf("%s: throughput %v, bytes %d; want 2mbit, 375000", name, n.Throughput, n.Bytes)
		}
	}
}
