package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// evaluate loads p as the daemon would (its files in a temporary
// directory) and returns the policy's result at now.
func evaluate(t *testing.T, p daemonPlan) (*config.Plan, *policy.Result) {
	t.Helper()
	dir := t.TempDir()
	main := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(main, []byte(p.main), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(p.files), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := config.Load(main)
	if err != nil {
		t.Fatalf("the bench's configuration does not load: %v", err)
	}
	return plan, policy.Evaluate(plan, policy.Overrides{}, nil, time.Now())
}

// buildTree is the tree the daemon builds for p on a fresh device (what
// Daemon.DiffPlan gives planTree, without a kernel).
func buildTree(t *testing.T, p daemonPlan) model.Tree {
	t.Helper()
	_, res := evaluate(t, p)
	tr, err := model.Build(res.Targets()[0], model.NewAssignment())
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func buildPlan(t *testing.T, n int) model.Tree {
	t.Helper()
	return buildTree(t, flatPlan("sd0", n, 0, ""))
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func lines(t *testing.T, batch func(model.Tree) (string, error), tr model.Tree) []string {
	t.Helper()
	s, err := batch(tr)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(s), "\n")
}

// classOf returns the class for prefix's filter.
func classOf(t *testing.T, tr model.Tree, prefix string) model.Class {
	t.Helper()
	for _, f := range tr.Filters {
		if f.Prefix.String() == prefix {
			for _, c := range tr.Classes {
				if c.Handle == f.ClassID {
					return c
				}
			}
		}
	}
	t.Fatalf("no filter of %s with a class", prefix)
	return model.Class{}
}

func TestUserAddr(t *testing.T) {
	for i, want := range map[int]string{0: "198.18.0.0", 257: "198.18.1.1", 65536: "198.19.0.0"} {
		if got := userAddr(i); got != netip.MustParseAddr(want) {
			t.Errorf("userAddr(%d) = %v, want %s", i, got, want)
		}
	}
}

func TestFlatPlan(t *testing.T) {
	tr := buildPlan(t, 300)
	users := 0
	for _, c := range tr.Classes {
		if c.Labels.Kind == "user" {
			users++
			if c.Leaf != nil {
				t.Errorf("user %s has leaf %+v, want the kernel's default", c.Labels.User, c.Leaf)
			}
		}
	}
	if users != 300 || len(tr.Filters) != 300 {
		t.Errorf("%d user classes, %d filters; want 300 each", users, len(tr.Filters))
	}
}

func TestFlatBatch(t *testing.T) {
	tr := buildPlan(t, 300)
	ls := lines(t, flatBatch, tr)
	if got, want := len(ls), 1+len(tr.Classes)+len(tr.Filters); got != want {
		t.Fatalf("%d lines, want %d", got, want)
	}
	if want := "qdisc add dev sd0 root handle 1: htb default " + strconv.FormatUint(uint64(tr.Root.DefaultMinor), 16) + " r2q 10"; ls[0] != want {
		t.Errorf("root line %q, want %q", ls[0], want)
	}
	// User 299's class with shaperd's own burst, cburst and quantum.
	c := classOf(t, tr, "198.18.1.43/32")
	want := "class add dev sd0 parent " + c.Parent.String() + " classid " + c.Handle.String() + " htb rate " + itoa(uint64(c.Rate)) +
		"bit ceil 10000000bit burst " + itoa(uint64(c.Burst)) + " cburst " + itoa(uint64(c.CBurst)) + " quantum " + itoa(uint64(c.Quantum)) + " prio 0"
	if countPrefix(ls, want) != 1 {
		t.Errorf("no class line\n%q", want)
	}
	if got := ls[len(ls)-1]; got != "filter add dev sd0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.1.43/32 flowid "+c.Handle.String() {
		t.Errorf("last filter line %q", got)
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func TestHashedBatch(t *testing.T) {
	tr := buildPlan(t, 600) // 3rd octets 0, 1, 2: three level-2 tables
	ls := lines(t, hashedBatch, tr)
	if got := countPrefix(ls, "filter add dev sd0 parent 1: protocol ip prio 100 handle 10:"); got != 1+3 {
		t.Errorf("%d lines make table 10: or link from it, want 4 (the table, 3 links)", got)
	}
	for _, want := range []string{
		"filter add dev sd0 parent 1: protocol ip prio 100 u32",
		"filter add dev sd0 parent 1: protocol ipv6 prio 103 u32",
		"filter add dev sd0 parent 1: protocol ip prio 100 handle 800::1 u32 ht 800:: link 10: hashkey mask 0x0000ff00 at 16 match u32 0 0",
		"filter add dev sd0 parent 1: protocol ipv6 prio 102 handle 802::2 u32 ht 802:: link 12: hashkey mask 0x0000ff00 at 28 match u32 0 0",
		"filter add dev sd0 parent 1: protocol ip prio 100 handle 102: u32 divisor 256",
		"filter add dev sd0 parent 1: protocol ip prio 100 handle 10:2:1 u32 ht 10:2: link 102: hashkey mask 0x000000ff at 16 match u32 0 0",
		"filter add dev sd0 parent 1: protocol ip prio 100 handle 101:2b:10 u32 ht 101:2b: match ip dst 198.18.1.43/32 flowid " +
			classOf(t, tr, "198.18.1.43/32").Handle.String(),
	} {
		if countPrefix(ls, want) != 1 {
			t.Errorf("missing or repeated line %q", want)
		}
	}
	// 600 filter nodes plus table 10: and its 3 links and the 3 level-2 tables.
	if got := countPrefix(ls, "filter add dev sd0 parent 1: protocol ip prio 100 handle 1") - 7; got != 600 {
		t.Errorf("%d filter nodes in level-2 tables, want 600", got)
	}
}

func TestHashedBatchUncovered(t *testing.T) {
	tr := buildPlan(t, 3)
	tr.Filters[1].Prefix = netip.MustParsePrefix("198.18.0.0/24")
	if _, err := hashedBatch(tr); err == nil {
		t.Error("hashedBatch of a /24 filter: no error")
	}
	tr = buildPlan(t, 3)
	tr.Filters[1].Prefix = netip.MustParsePrefix("198.19.0.0/32") // same bucket as 198.18.0.0
	if _, err := hashedBatch(tr); err == nil {
		t.Error("hashedBatch with two filters in one bucket: no error")
	}
}

func TestBatchRefusesLeaves(t *testing.T) {
	tr := buildPlan(t, 3)
	tr.Classes[len(tr.Classes)-1].Leaf = &model.LeafQdisc{Kind: model.LeafFQCodel}
	if _, err := flatBatch(tr); err == nil {
		t.Error("flatBatch of a tree with a leaf qdisc: no error")
	}
}

func TestThroughputPlanTargetLast(t *testing.T) {
	many := buildTree(t, throughputPlan("sd0", 300, 300, ""))
	one := buildTree(t, throughputPlan("sd0", 1, 300, ""))
	last := many.Filters[len(many.Filters)-1]
	if last.Labels.User != "target" || last.Prefix != one.Filters[0].Prefix {
		t.Errorf("last filter of 300 is %s (user %q); want the target's, %s as in the 1-user plan",
			last.Prefix, last.Labels.User, one.Filters[0].Prefix)
	}
}

func TestQueuePlans(t *testing.T) {
	tr := buildTree(t, flatPlan("sd0", 100, 4, "u32"))
	if len(tr.Queues) != 4 {
		t.Errorf("%d queue qdiscs, want 4", len(tr.Queues))
	}
	if _, err := flatBatch(tr); err == nil {
		t.Error("flatBatch of per-queue trees: no error")
	}
	tp := buildTree(t, queueTPPlan(4, 4, ""))
	if len(tp.Queues) != 4 || len(tp.Filters) != 2 {
		t.Errorf("(g)'s plan: %d queues, %d filters", len(tp.Queues), len(tp.Filters))
	}
}

func TestHierarchyPlan(t *testing.T) {
	h := Hierarchy{Sites: 5, Buildings: 50, APs: 500, Users: 2000}
	plan, res := evaluate(t, hierarchyPlan("sd0", h, ""))
	if len(plan.Nodes) != 555 {
		t.Errorf("%d nodes, want 555", len(plan.Nodes))
	}
	if n, ok := plan.Node(apName(17)); !ok || n.Path != "site-0/bldg-1/ap-17" {
		t.Errorf("ap-17: %+v", n)
	}
	if over := res.Interfaces[0].Oversubscriptions; len(over) > 0 {
		t.Errorf("guarantees oversubscribed: %v", over)
	}
	tr, err := model.Build(res.Targets()[0], model.NewAssignment())
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(t, flatBatch, tr)
	// Every class line's parent is the root class or made on a line before.
	made := map[string]bool{"1:": true, "1:0": true}
	classes := 0
	for _, l := range ls[1:] {
		f := strings.Fields(l)
		if f[0] != "class" {
			continue
		}
		classes++
		if !made[f[5]] {
			t.Fatalf("class %s before its parent %s", f[7], f[5])
		}
		made[f[7]] = true
	}
	if classes != len(tr.Classes) || classes < 555+2000 {
		t.Errorf("%d class lines for %d classes", classes, len(tr.Classes))
	}
	// User 45 is behind ap-11 (4 users per AP).
	c := classOf(t, tr, userAddr(45).String()+"/32")
	if c.Labels.Node != "ap-11" {
		t.Errorf("user 45's class is under %q, want ap-11", c.Labels.Node)
	}
}

func TestHierarchyShape(t *testing.T) {
	h := Hierarchy{Sites: 5, Buildings: 50, APs: 500, Users: 10000}
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
	if err := (Hierarchy{Sites: 5, Buildings: 3, APs: 500, Users: 10000}).check(); err == nil {
		t.Error("3 buildings at 5 sites: no error")
	}
	if h.apOf(0) != 0 || h.apOf(19) != 0 || h.apOf(20) != 1 || h.apOf(9999) != 499 {
		t.Errorf("apOf: %d %d %d %d", h.apOf(0), h.apOf(19), h.apOf(20), h.apOf(9999))
	}
	for cur, i := 0, 0; i < 1000; i++ {
		next := h.moveTarget(cur, i)
		if next == cur || next < 0 || next >= h.APs {
			t.Fatalf("move %d from %d to %d", i, cur, next)
		}
		cur = next
	}
	if h.nodeTarget() != "ap-17" || (Hierarchy{Sites: 1, Buildings: 1, APs: 3, Users: 3}).nodeTarget() != "ap-2" {
		t.Error("nodeTarget")
	}
}
