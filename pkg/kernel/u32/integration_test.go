package u32

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
)

// users is a set of filters, user i classifying into userClass(i).
type users struct {
	filters []model.Filter
	taken   map[netip.Prefix]bool
}

func (u *users) add(p netip.Prefix, m model.MatchField) model.Filter {
	if u.taken == nil {
		u.taken = map[netip.Prefix]bool{}
	}
	f := model.Filter{Prefix: p, Match: m, ClassID: userClass(len(u.filters))}
	u.filters = append(u.filters, f)
	u.taken[p] = true
	return f
}

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
	var u users
	// Wide and nested IPv4 prefixes in 198.19.0.0/17; random /32s elsewhere.
	w16 := u.add(pfx("198.18.0.0/16"), model.MatchDst)    // root list
	w20 := u.add(pfx("198.19.16.0/20"), model.MatchDst)   // level 1, 16 replicas
	w24 := u.add(pfx("198.19.40.0/24"), model.MatchDst)   // level 1, 1 bucket
	in24 := u.add(pfx("198.19.40.7/32"), model.MatchDst)  // inside w24
	w25 := u.add(pfx("198.19.41.128/25"), model.MatchDst) // level 2, 128 replicas
	var w28 []model.Filter
	for len(w28) < 20 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(64 + r.IntN(64)), byte(r.IntN(16) * 16)}), 28)
		if !u.taken[p] {
			w28 = append(w28, u.add(p, model.MatchDst))
		}
	}
	var host []model.Filter
	for len(host) < 1000 {
		a := netip.AddrFrom4([4]byte{198, 18, byte(r.IntN(256)), byte(r.IntN(256))})
		if r.IntN(2) == 0 {
			a = netip.AddrFrom4([4]byte{198, 19, byte(128 + r.IntN(120)), byte(r.IntN(256))}) // below .248.0
		}
		if p := netip.PrefixFrom(a, 32); !u.taken[p] {
			host = append(host, u.add(p, model.MatchDst))
		}
	}
	// IPv6.
	var host6 []model.Filter
	for len(host6) < 50 {
		p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 14: byte(r.IntN(4)), 15: byte(r.IntN(256))}), 128)
		if !u.taken[p] {
			host6 = append(host6, u.add(p, model.MatchDst))
		}
	}
	n64 := u.add(pfx("2001:db8:2:7::/64"), model.MatchDst)
	n56 := u.add(pfx("2001:db8:3:100::/56"), model.MatchDst)
	n48 := u.add(pfx("2001:db8:4::/48"), model.MatchDst)
	in48 := u.add(pfx("2001:db8:4:0:1::1/128"), model.MatchDst)
	h120 := u.add(pfx("2001:db8:5::ab00/120"), model.MatchDst)
	h124 := u.add(pfx("2001:db8:5::cd10/124"), model.MatchDst)
	// Uploads: source prefixes.
	src4 := u.add(pfx("198.18.200.0/24"), model.MatchSrc)
	src6 := u.add(pfx("2001:db8:ff00::/64"), model.MatchSrc)
	l.shaper.MustRun("ip", "addr", "add", "198.18.200.1/32", "dev", l.dev)
	l.shaper.MustRun("ip", "addr", "add", "2001:db8:ff00::1/128", "dev", l.dev, "nodad")

	l.addClasses(len(u.filters) + 1)
	if _, err := l.c.Ensure(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	writes := 0
	for _, i := range r.Perm(len(u.filters)) { // any order must work
		w, err := l.c.Add(u.filters[i])
		if err != nil {
			t.Fatal(err)
		}
		writes += w
	}
	t.Logf("installed %d filters with %d netlink writes in %v", len(u.filters), writes, time.Since(start))

	s4, s6 := addr(labSrc4), addr(labSrc6)
	probes := []struct {
		src, dst netip.Addr
		want     model.Handle
	}{
		{s4, addr("198.18.77.77"), w16.ClassID}, // no /32 there (checked below): falls back to the /16
		{s4, addr("198.19.23.45"), w20.ClassID},
		{s4, addr("198.19.40.9"), w24.ClassID},
		{s4, addr("198.19.40.7"), in24.ClassID},
		{s4, addr("198.19.41.200"), w25.ClassID},
		{s4, addr("198.19.41.100"), model.DefaultClass},
		{s4, addr("198.19.250.1"), model.DefaultClass},
		{s6, addr("2001:db8:2:7::abcd"), n64.ClassID},
		{s6, addr("2001:db8:2:8::1"), model.DefaultClass},
		{s6, addr("2001:db8:3:1ff::9"), n56.ClassID},
		{s6, addr("2001:db8:4:9::9"), n48.ClassID},
		{s6, addr("2001:db8:4:0:1::1"), in48.ClassID},
		{s6, addr("2001:db8:5::abff"), h120.ClassID},
		{s6, addr("2001:db8:5::cd1e"), h124.ClassID},
		{s6, addr("2001:db8:5::cd20"), model.DefaultClass},
		{addr("198.18.200.1"), addr("198.19.250.1"), src4.ClassID},
		{addr("2001:db8:ff00::1"), addr("2001:db8:9::1"), src6.ClassID},
	}
	if u.taken[pfx("198.18.77.77/32")] {
		probes = probes[1:]
	}
	for _, i := range r.Perm(len(host))[:25] {
		probes = append(probes, struct {
			src, dst netip.Addr
			want     model.Handle
		}{s4, host[i].Prefix.Addr(), host[i].ClassID})
	}
	for _, f := range []model.Filter{w28[0], w28[1], w28[2]} {
		probes = append(probes, struct {
			src, dst netip.Addr
			want     model.Handle
		}{s4, randomIn(r, f.Prefix), f.ClassID})
	}
	for _, f := range host6[:5] {
		probes = append(probes, struct {
			src, dst netip.Addr
			want     model.Handle
		}{s6, f.Prefix.Addr(), f.ClassID})
	}
	for _, p := range probes {
		l.expectClass(p.src, p.dst, p.want)
	}

	// Dump returns exactly what was installed, undamaged.
	l.expectDump(u.filters, nil)

	// Idempotent: nothing to write a second time.
	if w, err := l.c.Ensure(); w != 0 || err != nil {
		t.Errorf("second Ensure: %d writes, %v", w, err)
	}
	if w, err := l.c.Add(w20); w != 0 || err != nil {
		t.Errorf("Add of an installed filter: %d writes, %v", w, err)
	}

	// A class change is made in place, one write per replica.
	moved := w20
	moved.ClassID = userClass(len(u.filters))
	if w, err := l.c.Add(moved); w != 16 || err != nil {
		t.Errorf("class change of a /20: %d writes, %v; want 16", w, err)
	}
	l.expectClass(s4, addr("198.19.23.45"), moved.ClassID)
	u.filters[slices.Index(u.filters, w20)] = moved

	// One replica deleted by hand: that filter (only) is Damaged; Add repairs it.
	victim := w28[3]
	h := l.c.st.byFilter[fkey{victim.Prefix, victim.Match}][5]
	l.shaper.MustRun("tc", "filter", "del", "dev", l.dev, "parent", "1:", "protocol", "ip", "prio", "100", "handle", tcHandle(h), "u32")
	l.expectDump(u.filters, []netip.Prefix{victim.Prefix})
	if w, err := l.c.Add(victim); w != 1 || err != nil {
		t.Errorf("repair of a /28 missing one replica: %d writes, %v; want 1", w, err)
	}
	l.expectDump(u.filters, nil)

	// A level-1 link deleted by hand: every filter behind it is Damaged;
	// Ensure relinks the table.
	third := host[0].Prefix.Addr().As4()[2]
	link := handleOf(l1HTID(0), third, l2LinkNode)
	l.shaper.MustRun("tc", "filter", "del", "dev", l.dev, "parent", "1:", "protocol", "ip", "prio", "100", "handle", tcHandle(link), "u32")
	var behind []netip.Prefix
	for _, f := range u.filters {
		if pl, _ := layoutOf(f.Prefix, f.Match); pl.level == 2 && pl.tree == 0 && pl.slots[0].htid == l2HTID(0, third) {
			behind = append(behind, f.Prefix)
		}
	}
	l.expectDump(u.filters, behind)
	if w, err := l.c.Ensure(); w != 1 || err != nil {
		t.Errorf("Ensure after a lost link: %d writes, %v; want 1", w, err)
	}
	l.expectDump(u.filters, nil)
	l.expectClass(s4, host[0].Prefix.Addr(), host[0].ClassID)

	// Delete removes every replica.
	if w, err := l.c.Delete(w25); w != 128 || err != nil {
		t.Errorf("Delete of a /25: %d writes, %v; want 128", w, err)
	}
	if w, err := l.c.Delete(w25); w != 0 || err != nil {
		t.Errorf("second Delete: %d writes, %v; want 0", w, err)
	}
	u.filters = slices.DeleteFunc(u.filters, func(f model.Filter) bool { return f == w25 })
	l.expectClass(s4, addr("198.19.41.200"), model.DefaultClass)
	l.expectDump(u.filters, nil)

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
