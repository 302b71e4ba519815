package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// runtimeNodesConfig is nodesConfig with room for more nodes under north
// in both directions (nothing oversubscribed: an added node is one class).
func runtimeNodesConfig() string {
	cfg := strings.Replace(nodesConfig, `bandwidth = "100mbit"`, `bandwidth = "1gbit"`, 1)
	return strings.Replace(cfg, `upload_rate = "50mbit"`, `upload_rate = "300mbit"`, 1)
}

func ratePtr(r tbf.Rate) *tbf.Rate { return &r }

// hasNodeClass reports whether node has a class id on interface key of d.
func hasNodeClass(d *Daemon, key, node string) bool {
	for _, st := range d.ifaces {
		if st.key == key {
			_, ok := st.ids.Node(node)
			return ok
		}
	}
	return false
}

// TestRuntimeNodes: a node added at run time gets its class under its
// parent in both directions, writing only that class and evaluating
// nothing else; users can be put behind it; it cannot be removed while a
// user is behind it; removing it deletes only its class; nodes of the
// configuration cannot be removed at run time; bad nodes are refused
// naming what is wrong, changing nothing.
func TestRuntimeNodes(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, runtimeNodesConfig(), nodesUsers)
	k := newFakeKernel("lan0", "ifb-lan0")
	clk := newFakeClock()
	d, _ := newTestDaemon(t, k, clk, dir)
	defer d.Close()
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	evals, writes := d.work.evaluations, k.writeCount()
	resp, err := d.changeNode(control.NodeRequest{Op: control.NodeAdd, Name: "ap-3", Parent: "north", Rate: ratePtr(50 * tbf.Mbit),
		Ceil: ratePtr(80 * tbf.Mbit), UploadRate: ratePtr(20 * tbf.Mbit)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Node == nil || resp.Node.Path != "north/ap-3" || resp.Node.Source != "runtime" || resp.Node.UploadCeil != 80*tbf.Mbit {
		t.Errorf("node add answer: %+v", resp.Node)
	}
	if d.work.evaluations != evals {
		t.Errorf("adding a node evaluated the whole plan %d times", d.work.evaluations-evals)
	}
	if got := k.writeCount() - writes; got != 2 {
		t.Errorf("adding a node wrote %d objects, want 2 (its class in each direction)", got)
	}
	north := nodeClass(t, d, k, "lan0/egress", "lan0", "north")
	ap3 := nodeClass(t, d, k, "lan0/egress", "lan0", "ap-3")
	if ap3.Parent != north.Handle || ap3.Rate != 50*tbf.Mbit || ap3.Ceil != 80*tbf.Mbit {
		t.Errorf("ap-3: %s under %s, %v/%v; want under north %s, 50mbit/80mbit", ap3.Handle, ap3.Parent, ap3.Rate, ap3.Ceil, north.Handle)
	}
	if up := nodeClass(t, d, k, "lan0/ingress", "ifb-lan0", "ap-3"); up.Rate != 20*tbf.Mbit || up.Ceil != 80*tbf.Mbit {
		t.Errorf("ap-3's upload class %v/%v, want 20mbit/80mbit", up.Rate, up.Ceil)
	}
	// The tree equals what a full evaluation builds.
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.changeUser(control.UserRequest{Op: control.UserAdd, Name: "dave", Tier: "gold", Node: "north/ap-3", Addresses: []string{"198.18.1.40"}}); err != nil {
		t.Fatal(err)
	}
	if c := userClass(t, d, k, "lan0/egress", "lan0", "dave"); c.Parent != ap3.Handle || c.Ceil != 80*tbf.Mbit {
		t.Errorf("dave under %s ceil %v, want under ap-3 %s, capped to its 80mbit", c.Parent, c.Ceil, ap3.Handle)
	}
	for _, c := range []struct {
		req  control.NodeRequest
		want string
	}{
		{control.NodeRequest{Op: control.NodeRemove, Name: "ap-3"}, "node ap-3 has 1 users behind it (dave): move them first"},
		{control.NodeRequest{Op: control.NodeRemove, Name: "north"}, "node north is written in the configuration (" + filepath.Join(dir, "shaperd.toml")},
		{control.NodeRequest{Op: control.NodeRemove, Name: "ap-9"}, `unknown target "node:ap-9"`},
		{control.NodeRequest{Op: control.NodeAdd, Name: "ap-3", Rate: ratePtr(tbf.Mbit)}, "node ap-3 exists already (runtime)"},
		{control.NodeRequest{Op: control.NodeAdd, Name: "ap-4", Parent: "south", Rate: ratePtr(tbf.Mbit)}, `unknown parent node "south"`},
		{control.NodeRequest{Op: control.NodeAdd, Name: "ap-4", Rate: ratePtr(10 * tbf.Gbit)}, "rate 10gbit is above the bandwidth 1gbit of every interface it is on"},
		{control.NodeRequest{Op: control.NodeAdd, Name: "ap-4", Rate: ratePtr(tbf.Mbit), Interfaces: []string{"eth9"}}, `node ap-4 is on interface "eth9"`},
	} {
		w := k.writeCount()
		if _, err := d.changeNode(c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("node %s %s: %v, want an error containing %q", c.req.Op, c.req.Name, err, c.want)
		}
		if got := k.writeCount() - w; got != 0 {
			t.Errorf("a refused node %s %s wrote %d objects", c.req.Op, c.req.Name, got)
		}
	}
	if _, err := d.changeUser(control.UserRequest{Op: control.UserMove, Name: "dave", Node: "ap-1"}); err != nil {
		t.Fatal(err)
	}
	evals, writes = d.work.evaluations, k.writeCount()
	if resp, err := d.changeNode(control.NodeRequest{Op: control.NodeRemove, Name: "north/ap-3"}); err != nil || resp.Node != nil || resp.Name != "ap-3" {
		t.Fatalf("node remove north/ap-3: %+v, %v", resp, err)
	}
	if d.work.evaluations != evals {
		t.Errorf("removing a node evaluated the whole plan %d times", d.work.evaluations-evals)
	}
	if got := k.writeCount() - writes; got != 2 {
		t.Errorf("removing a node wrote %d objects, want 2", got)
	}
	for _, c := range k.mem.Tree("lan0").Classes {
		if c.Handle == ap3.Handle {
			t.Errorf("ap-3's class %s is still in the kernel", c.Handle)
		}
	}
}

// TestRuntimeNodesSurvive: run-time nodes, the users behind them and
// their set-rate overrides come back after a restart; a reload whose
// configuration names a run-time node keeps the configuration's (the
// run-time entry dropped from nodes.json); a reload that removes a
// run-time node's parent is refused, naming the node, and changes nothing.
func TestRuntimeNodesSurvive(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, runtimeNodesConfig(), nodesUsers)
	k := newFakeKernel("lan0", "ifb-lan0")
	clk := newFakeClock()
	d, _ := newTestDaemon(t, k, clk, dir)
	if err := d.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, req := range []control.NodeRequest{
		{Op: control.NodeAdd, Name: "ap-3", Parent: "north", Rate: ratePtr(50 * tbf.Mbit)},
		{Op: control.NodeAdd, Name: "ap-4", Parent: "ap-2", Rate: ratePtr(10 * tbf.Mbit)},
	} {
		if _, err := d.changeNode(req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.changeUser(control.UserRequest{Op: control.UserAdd, Name: "dave", Tier: "gold", Node: "ap-3", Addresses: []string{"198.18.1.40"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.setRate(control.SetRateRequest{Target: "node:ap-3", Rate: 30 * tbf.Mbit, Ramp: control.DurationPtr(0), Direction: "download"}, nil); err != nil {
		t.Fatal(err)
	}
	d.Close()

	d2, _ := newTestDaemon(t, k, clk, dir)
	defer d2.Close()
	w := k.writeCount()
	if err := d2.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := k.writeCount() - w; got != 0 {
		t.Errorf("the restart wrote %d objects, want 0", got)
	}
	ap3 := nodeClass(t, d2, k, "lan0/egress", "lan0", "ap-3")
	if ap3.Rate != 30*tbf.Mbit {
		t.Errorf("ap-3 after a restart: rate %v, want its override's 30mbit", ap3.Rate)
	}
	if c := userClass(t, d2, k, "lan0/egress", "lan0", "dave"); c.Parent != ap3.Handle {
		t.Errorf("dave under %s after a restart, want ap-3 %s", c.Parent, ap3.Handle)
	}
	list := d2.nodeList()
	var got []string
	for _, n := range list.Nodes {
		src := "file"
		if n.Source == "runtime" {
			src = "runtime"
		} else if !strings.HasPrefix(n.Source, filepath.Join(dir, "shaperd.toml")+":") {
			src = n.Source
		}
		got = append(got, n.Name+"="+src)
	}
	if s := strings.Join(got, " "); s != "north=file ap-1=file ap-2=file ap-3=runtime ap-4=runtime" {
		t.Errorf("node list (name=source, parents first): %s", s)
	}

	// The configuration now names ap-3 itself: the file wins.
	cfg := runtimeNodesConfig() + "\n[nodes.ap-3]\nparent = \"north\"\nrate = \"60mbit\"\n"
	writeConfig(t, dir, cfg, nodesUsers)
	if err := d2.reload(false); err != nil {
		t.Fatal(err)
	}
	if n, _ := d2.plan.Node("ap-3"); n.Source == "runtime" || n.Rate != 60*tbf.Mbit {
		t.Errorf("ap-3 after a reload naming it: %+v", n)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state", NodesFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"ap-3"`) || !strings.Contains(string(b), `"ap-4"`) {
		t.Errorf("nodes.json after the file took ap-3: %s", b)
	}

	// ap-2 (ap-4's parent) gone from the configuration: refused.
	noAP2 := strings.Replace(cfg, "[nodes.ap-2]\nparent = \"north\"\nrate = \"100mbit\"\n", "", 1)
	writeConfig(t, dir, noAP2, strings.Replace(nodesUsers, `node = "ap-2"`, `node = "ap-1"`, 1))
	w = k.writeCount()
	err = d2.reload(false)
	if err == nil || !strings.Contains(err.Error(), "run-time node ap-4") || !strings.Contains(err.Error(), `unknown parent node "ap-2"`) {
		t.Errorf("a reload without ap-4's parent: %v, want a refusal naming ap-4 and ap-2", err)
	}
	if got := k.writeCount() - w; got != 0 || !hasNodeClass(d2, "lan0/egress", "ap-2") {
		t.Errorf("the refused reload wrote %d objects (ap-2 kept: %v)", got, hasNodeClass(d2, "lan0/egress", "ap-2"))
	}
}
