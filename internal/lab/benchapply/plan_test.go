package main

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
)

func buildPlan(t *testing.T, n int) model.Tree {
	t.Helper()
	tr, err := model.Build(plan("sd0", n), nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
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

func TestUserAddr(t *testing.T) {
	for i, want := range map[int]string{0: "198.18.0.0", 257: "198.18.1.1", 65536: "198.19.0.0"} {
		if got := userAddr(i); got != netip.MustParseAddr(want) {
			t.Errorf("userAddr(%d) = %v, want %s", i, got, want)
		}
	}
}

func TestFlatBatch(t *testing.T) {
	tr := buildPlan(t, 300)
	lines := strings.Split(strings.TrimSpace(flatBatch(tr)), "\n")
	if got, want := len(lines), 1+len(tr.Classes)+len(tr.Filters); got != want {
		t.Fatalf("%d lines, want %d", got, want)
	}
	if lines[0] != "qdisc add dev sd0 root handle 1: htb default 2 r2q 10" {
		t.Errorf("root line %q", lines[0])
	}
	// The user class 1:100 with shaperd's own burst, cburst and quantum.
	c := tr.Classes[2]
	want := "class add dev sd0 parent 1:1 classid 1:100 htb rate 1000000bit ceil 10000000bit burst " +
		itoa(uint64(c.Burst)) + " cburst " + itoa(uint64(c.CBurst)) + " quantum " + itoa(uint64(c.Quantum)) + " prio 0"
	if lines[3] != want {
		t.Errorf("class line\n%q, want\n%q", lines[3], want)
	}
	if got := lines[len(lines)-1]; got != "filter add dev sd0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.1.43/32 flowid 1:22b" {
		t.Errorf("last filter line %q", got)
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func TestHashedBatch(t *testing.T) {
	tr := buildPlan(t, 600) // 3rd octets 0, 1, 2: three level-2 tables
	lines := strings.Split(strings.TrimSpace(hashedBatch(tr)), "\n")
	if got := countPrefix(lines, "filter add dev sd0 parent 1: protocol ip prio 100 handle 10:"); got != 1+3 {
		t.Errorf("%d lines make table 10: or link from it, want 4 (the table, 3 links)", got)
	}
	for _, want := range []string{
		"filter add dev sd0 parent 1: protocol ip prio 100 u32",
		"filter add dev sd0 parent 1: protocol ipv6 prio 103 u32",
		"filter add dev sd0 parent 1: protocol ip prio 100 handle 800::1 u32 ht 800:: link 10: hashkey mask 0x0000ff00 at 16 match u32 0 0",
		"filter add dev sd0 parent 1: protocol ipv6 prio 102 handle 802::2 u32 ht 802:: link 12: hashkey mask 0x0000ff00 at 28 match u32 0 0",
		"filter add dev sd0 parent 1: protocol ip prio 100 handle 102: u32 divisor 256",
		"filter add dev sd0 parent 1: protocol ip prio 100 handle 10:2:1 u32 ht 10:2: link 102: hashkey mask 0x000000ff at 16 match u32 0 0",
		"filter add dev sd0 parent 1: protocol ip prio 100 handle 101:2b:10 u32 ht 101:2b: match ip dst 198.18.1.43/32 flowid 1:22b",
	} {
		if countPrefix(lines, want) != 1 {
			t.Errorf("missing or repeated line %q", want)
		}
	}
	// 600 filter nodes plus table 10: and its 3 links and the 3 level-2 tables.
	if got := countPrefix(lines, "filter add dev sd0 parent 1: protocol ip prio 100 handle 1") - 7; got != 600 {
		t.Errorf("%d filter nodes in level-2 tables, want 600", got)
	}
}

func TestHashedBatchUncovered(t *testing.T) {
	tr := buildPlan(t, 3)
	tr.Filters[1].Prefix = netip.MustParsePrefix("198.18.0.0/24")
	if got := hashedBatch(tr); got != "" {
		t.Errorf("hashedBatch of a /24 filter = %d bytes, want \"\"", len(got))
	}
	tr = buildPlan(t, 3)
	tr.Filters[1].Prefix = netip.MustParsePrefix("198.19.0.0/32") // same bucket as 198.18.0.0
	if got := hashedBatch(tr); got != "" {
		t.Errorf("hashedBatch with two filters in one bucket = %d bytes, want \"\"", len(got))
	}
}

func TestThroughputPlanTargetLast(t *testing.T) {
	many, err := model.Build(throughputPlan(300, 300), nil)
	if err != nil {
		t.Fatal(err)
	}
	one, err := model.Build(throughputPlan(1, 300), nil)
	if err != nil {
		t.Fatal(err)
	}
	last := many.Filters[len(many.Filters)-1]
	if last.Labels.User != "target" || last.Prefix != one.Filters[0].Prefix {
		t.Errorf("last filter of 300 is %s (user %q); want the target's, %s as in the 1-user plan",
			last.Prefix, last.Labels.User, one.Filters[0].Prefix)
	}
}
