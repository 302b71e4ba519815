package u32

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel/internal/clstest"
	"github.com/shaperd/shaperd/pkg/model"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

// TestClassifyManyUsers installs 1,000 random /32s and a mix of wider and
// nested IPv4 and IPv6 prefixes (dst and src), then checks with real
// packets that each probe is counted by exactly its class, longest prefix
// first, and exercises Dump, idempotence, class changes, Damaged detection
// and repair, Delete and Remove.
func TestClassifyManyUsers(t *testing.T) {
	l := newLab(t)
	r := rand.New(rand.NewPCG(42, uint64(time.Now().UnixNano())))
	u := clstest.NewCases(r) // the table every classifier passes
	w20, w25, w28, host := u.W20, u.W25, u.W28, u.Host
	s4 := addr(labSrc4)
	start := time.Now()
	writes := u.Install(l.Lab, l.c, r)
	t.Logf("installed %d filters with %d netlink writes in %v", len(u.Filters), writes, time.Since(start))
	u.Check(l.Lab)

	// Dump returns exactly what was installed, undamaged.
	l.expectDump(u.Filters, nil)

	// Idempotent: nothing to write a second time.
	if w, err := l.c.Ensure(); w != 0 || err != nil {
		t.Errorf("second Ensure: %d writes, %v", w, err)
	}
	if w, err := l.c.Add(w20); w != 0 || err != nil {
		t.Errorf("Add of an installed filter: %d writes, %v", w, err)
	}

	// A class change is made in place, one write per replica.
	moved := w20
	moved.ClassID = userClass(len(u.Filters))
	if w, err := l.c.Add(moved); w != 16 || err != nil {
		t.Errorf("class change of a /20: %d writes, %v; want 16", w, err)
	}
	l.expectClass(s4, addr("198.19.23.45"), moved.ClassID)
	u.Filters[slices.Index(u.Filters, w20)] = moved

	// One replica deleted by hand: that filter (only) is Damaged; Add repairs it.
	victim := w28[3]
	h := l.c.st.byFilter[fkey{victim.Prefix, victim.Match}][5]
	l.shaper.MustRun("tc", "filter", "del", "dev", l.dev, "parent", "1:", "protocol", "ip", "prio", "100", "handle", tcHandle(h), "u32")
	l.expectDump(u.Filters, []netip.Prefix{victim.Prefix})
	if w, err := l.c.Add(victim); w != 1 || err != nil {
		t.Errorf("repair of a /28 missing one replica: %d writes, %v; want 1", w, err)
	}
	l.expectDump(u.Filters, nil)

	// A level-1 link deleted by hand: every filter behind it is Damaged;
	// Ensure relinks the table.
	third := host[0].Prefix.Addr().As4()[2]
	link := handleOf(l1HTID(0), third, l2LinkNode)
	l.shaper.MustRun("tc", "filter", "del", "dev", l.dev, "parent", "1:", "protocol", "ip", "prio", "100", "handle", tcHandle(link), "u32")
	var behind []netip.Prefix
	for _, f := range u.Filters {
		if pl, _ := layoutOf(f.Prefix, f.Match); pl.level == 2 && pl.tree == 0 && pl.slots[0].htid == l2HTID(0, third) {
			behind = append(behind, f.Prefix)
		}
	}
	l.expectDump(u.Filters, behind)
	if w, err := l.c.Ensure(); w != 1 || err != nil {
		t.Errorf("Ensure after a lost link: %d writes, %v; want 1", w, err)
	}
	l.expectDump(u.Filters, nil)
	l.expectClass(s4, host[0].Prefix.Addr(), host[0].ClassID)

	// Delete removes every replica.
	if w, err := l.c.Delete(w25); w != 128 || err != nil {
		t.Errorf("Delete of a /25: %d writes, %v; want 128", w, err)
	}
	if w, err := l.c.Delete(w25); w != 0 || err != nil {
		t.Errorf("second Delete: %d writes, %v; want 0", w, err)
	}
	u.Filters = slices.DeleteFunc(u.Filters, func(f model.Filter) bool { return f == w25 })
	l.expectClass(s4, addr("198.19.41.200"), model.DefaultClass)
	l.expectDump(u.Filters, nil)

	// Remove leaves no filter behind.
	if err := l.c.Remove(); err != nil {
		t.Fatal(err)
	}
	if out := l.shaper.MustRun("tc", "filter", "show", "dev", l.dev); strings.TrimSpace(out) != "" {
		t.Errorf("filters left after Remove:\n%.2000s", out)
	}
	l.expectClass(s4, host[1].Prefix.Addr(), model.DefaultClass)
	l.expectDump(nil, nil)
}

// tcHandle formats a u32 handle as tc reads it: htid:bucket:node in hex.
func tcHandle(h uint32) string {
	return fmt.Sprintf("%x:%x:%x", htidOf(h), bucketOf(h), nodeIDOf(h))
}

// expectDump checks that Dump returns want (any order), with exactly the
// prefixes in damaged marked Damaged.
func (l *lab) expectDump(want []model.Filter, damaged []netip.Prefix) {
	l.t.Helper()
	got, err := l.c.Dump()
	if err != nil {
		l.t.Fatal(err)
	}
	byKey := map[fkey]model.Filter{}
	for _, f := range got {
		byKey[fkey{f.Prefix, f.Match}] = f
	}
	if len(got) != len(want) {
		l.t.Errorf("Dump returned %d filters, want %d", len(got), len(want))
	}
	bad := 0
	for _, w := range want {
		g, ok := byKey[fkey{w.Prefix, w.Match}]
		wantDamaged := slices.Contains(damaged, w.Prefix)
		switch {
		case !ok:
			l.t.Errorf("Dump lacks %s %v", w.Match, w.Prefix)
			bad++
		case g.ClassID != w.ClassID || g.Damaged != wantDamaged:
			l.t.Errorf("Dump has %s %v class %v damaged %v, want class %v damaged %v", g.Match, g.Prefix, g.ClassID, g.Damaged, w.ClassID, wantDamaged)
			bad++
		}
		if bad > 10 {
			l.t.Fatal("too many differences")
		}
	}
	if !slices.IsSortedFunc(got, func(a, b model.Filter) int { return a.Prefix.Compare(b.Prefix) }) {
		l.t.Error("Dump is not sorted by prefix")
	}
}

// TestClassifyEveryLength: every prefix length u32 supports (IPv4 /1../32,
// IPv6 /1../64 and /113../128) classifies, nested, longest first (the
// chain shared with the bpf classifier).
func TestClassifyEveryLength(t *testing.T) {
	l := newLab(t)
	clstest.CheckEveryLength(l.Lab, l.c, func(p netip.Prefix) bool {
		_, err := layoutOf(p, model.MatchDst)
		return err == nil
	})
}
