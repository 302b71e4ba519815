package u32

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/kernel/internal/clstest"
	"github.com/shaperd/shaperd/pkg/model"
)

// TestRepairDeletedPriority: a u32 priority deleted by hand (tc filter del
// ... pref N) leaves its non-root hash tables hidden in the kernel. Ensure
// (and Add, for the tree it needs) creates the priority again, reuses the
// hidden tables with the filters still in them, and relinks them; only
// the filters of the deleted root list have to be added again. The same
// holds for all four priorities after Remove while a foreign u32 priority
// keeps the qdisc's tables alive.
func TestRepairDeletedPriority(t *testing.T) {
	l := newLab(t)
	l.addClasses(6)
	s6 := addr(labSrc6)
	var u clstest.Cases
	h128 := u.Add(pfx("2001:db8:1::7/128"), model.MatchDst)   // host hierarchy, level 2
	h120 := u.Add(pfx("2001:db8:1::100/120"), model.MatchDst) // host hierarchy, level 1
	n64 := u.Add(pfx("2001:db8:2:5::/64"), model.MatchDst)    // network hierarchy, level 2
	n48 := u.Add(pfx("2001:db8:3::/48"), model.MatchDst)      // root list
	// An upload source that the peer never answers (no route back), so no
	// neighbour advertisement of the shaper's is counted by its class.
	srcAddr := addr("2001:db8:ff00::1")
	src := u.Add(netip.PrefixFrom(srcAddr, 128), model.MatchSrc) // prio 103, host level 2
	v4 := u.Add(pfx("198.18.9.9/32"), model.MatchDst)            // prio 100
	l.shaper.MustRun("ip", "addr", "add", srcAddr.String()+"/128", "dev", l.dev, "nodad")
	if _, err := l.c.Ensure(); err != nil {
		t.Fatal(err)
	}
	for _, f := range u.Filters {
		if _, err := l.c.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	l.expectDump(u.Filters, nil)
	without := func(fs ...model.Filter) []model.Filter {
		return slices.DeleteFunc(slices.Clone(u.Filters), func(f model.Filter) bool { return slices.Contains(fs, f) })
	}

	// Priority 102 (IPv6 dst) deleted by hand: its filters are gone from
	// the dump and from classification.
	l.shaper.MustRun("tc", "filter", "del", "dev", l.dev, "parent", "1:", "pref", "102", "protocol", "ipv6")
	l.expectDump(without(h128, h120, n64, n48), nil)
	l.expectClass(s6, h128.Prefix.Addr(), model.DefaultClass)

	// Ensure: the priority and its two root links, nothing else; the
	// tables come back with the level-1 and level-2 filters in them.
	if w, err := l.c.Ensure(); w != 3 || err != nil {
		t.Fatalf("Ensure after deleting prio 102: %d writes, %v; want 3 (priority, 2 root links)", w, err)
	}
	l.expectDump(without(n48), nil)
	if w, err := l.c.Ensure(); w != 0 || err != nil {
		t.Errorf("second Ensure: %d writes, %v; want 0", w, err)
	}
	for _, f := range u.Filters {
		want := 0
		if f == n48 {
			want = 1 // the root list went with the priority
		}
		if w, err := l.c.Add(f); w != want || err != nil {
			t.Errorf("Add(%v) after the repair: %d writes, %v; want %d", f.Prefix, w, err, want)
		}
	}
	l.expectDump(u.Filters, nil)
	l.expectClass(s6, h128.Prefix.Addr(), h128.ClassID)
	l.expectClass(s6, addr("2001:db8:1::1ab"), h120.ClassID)
	l.expectClass(s6, addr("2001:db8:2:5::99"), n64.ClassID)
	l.expectClass(s6, addr("2001:db8:3:7::1"), n48.ClassID)

	// Add alone repairs the priority it needs (103, IPv6 src).
	l.shaper.MustRun("tc", "filter", "del", "dev", l.dev, "parent", "1:", "pref", "103", "protocol", "ipv6")
	l.expectDump(without(src), nil)
	if w, err := l.c.Add(src); w != 3 || err != nil {
		t.Fatalf("Add of the src filter after deleting prio 103: %d writes, %v; want 3 (priority, 2 root links; the node was kept)", w, err)
	}
	l.expectDump(u.Filters, nil)
	l.expectClass(srcAddr, addr("2001:db8:9::1"), src.ClassID)

	// Remove while a foreign u32 priority (50) holds the qdisc's tables:
	// Ensure brings back all four priorities and their links in one go,
	// and the filters outside root lists reappear.
	l.shaper.MustRun("tc", "filter", "add", "dev", l.dev, "parent", "1:", "prio", "50", "protocol", "ip", "u32",
		"match", "ip", "dst", "198.19.200.0/24", "flowid", model.DefaultClass.String())
	if err := l.c.Remove(); err != nil {
		t.Fatal(err)
	}
	l.expectDump(nil, nil)
	if w, err := l.c.Ensure(); w != 10 || err != nil {
		t.Fatalf("Ensure after Remove with a foreign priority: %d writes, %v; want 10 (4 priorities, 6 root links)", w, err)
	}
	l.expectDump(without(n48), nil)
	l.expectClass(addr(labSrc4), v4.Prefix.Addr(), v4.ClassID)

	// Without the foreign priority, Remove leaves nothing behind.
	l.shaper.MustRun("tc", "filter", "del", "dev", l.dev, "parent", "1:", "pref", "50", "protocol", "ip")
	if err := l.c.Remove(); err != nil {
		t.Fatal(err)
	}
	if out := l.shaper.MustRun("tc", "filter", "show", "dev", l.dev); strings.TrimSpace(out) != "" {
		t.Errorf("filters left after Remove:\n%.2000s", out)
	}
}
