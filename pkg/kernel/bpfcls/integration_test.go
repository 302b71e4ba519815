package bpfcls

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/shaperd/shaperd/pkg/kernel/internal/clstest"
	"github.com/shaperd/shaperd/pkg/model"
)

// TestClassifyManyUsers runs the classification table shared with u32
// (clstest.Cases: IPv4 and IPv6 hosts, /64, /56, /48, /120, /124, /28s,
// nested prefixes, source prefixes, default class) with real packets, then
// checks Dump, idempotence, a class change, Delete and Remove (which
// leaves no filter and no pin).
func TestClassifyManyUsers(t *testing.T) {
	l := newLab(t)
	r := rand.New(rand.NewPCG(42, uint64(time.Now().UnixNano())))
	u := clstest.NewCases(r)
	start := time.Now()
	writes := u.Install(l.Lab, l.c, r)
	t.Logf("installed %d filters with %d writes in %v", len(u.Filters), writes, time.Since(start))
	if writes != len(u.Filters) {
		t.Errorf("%d writes for %d filters, want one map update each", writes, len(u.Filters))
	}
	u.Check(l.Lab)
	l.expectDump(u.Filters, false)
	for _, f := range []string{pinV4, pinV6, pinProg} {
		if _, err := os.Stat(filepath.Join(l.c.PinDir(), f)); err != nil {
			t.Errorf("pin: %v", err)
		}
	}

	if w, err := l.c.Ensure(); w != 0 || err != nil {
		t.Errorf("second Ensure: %d writes, %v", w, err)
	}
	if w, err := l.c.Add(u.W20); w != 0 || err != nil {
		t.Errorf("Add of an installed filter: %d writes, %v", w, err)
	}
	moved := u.W20
	moved.ClassID = clstest.UserClass(len(u.Filters))
	if w, err := l.c.Add(moved); w != 1 || err != nil {
		t.Errorf("class change: %d writes, %v; want 1", w, err)
	}
	l.ExpectClass(netip.MustParseAddr(clstest.Src4), netip.MustParseAddr("198.19.23.45"), moved.ClassID)
	u.Filters[slices.Index(u.Filters, u.W20)] = moved

	if w, err := l.c.Delete(u.W25); w != 1 || err != nil {
		t.Errorf("Delete of a /25: %d writes, %v; want 1", w, err)
	}
	if w, err := l.c.Delete(u.W25); w != 0 || err != nil {
		t.Errorf("second Delete: %d writes, %v; want 0", w, err)
	}
	u.Filters = slices.DeleteFunc(u.Filters, func(f model.Filter) bool { return f == u.W25 })
	l.ExpectClass(netip.MustParseAddr(clstest.Src4), netip.MustParseAddr("198.19.41.200"), model.DefaultClass)
	l.expectDump(u.Filters, false)

	if err := l.c.Remove(); err != nil {
		t.Fatal(err)
	}
	if out := l.Shaper.MustRun("tc", "filter", "show", "dev", l.Dev); strings.TrimSpace(out) != "" {
		t.Errorf("filters left after Remove:\n%.2000s", out)
	}
	if _, err := os.Stat(l.c.PinDir()); !os.IsNotExist(err) {
		t.Errorf("pin directory after Remove: %v", err)
	}
	l.ExpectClass(netip.MustParseAddr(clstest.Src4), u.Host[1].Prefix.Addr(), model.DefaultClass)
}

// TestClassifyEveryLength: every prefix length, IPv4 /0../32 and IPv6
// /0../128, classifies, nested, longest first (the chain shared with u32,
// which lacks /0 and IPv6 /65../112).
func TestClassifyEveryLength(t *testing.T) {
	l := newLab(t)
	clstest.CheckEveryLength(l.Lab, l.c, nil)
	if err := l.c.Remove(); err != nil {
		t.Fatal(err)
	}
}

// expectDump checks that Dump returns exactly want, all Damaged or none.
func (l *lab) expectDump(want []model.Filter, damaged bool) {
	l.T.Helper()
	got, err := l.c.Dump()
	if err != nil {
		l.T.Fatal(err)
	}
	type k struct {
		p netip.Prefix
		m model.MatchField
	}
	byKey := map[k]model.Filter{}
	for _, f := range got {
		byKey[k{f.Prefix, f.Match}] = f
	}
	if len(got) != len(want) {
		l.T.Errorf("Dump returned %d filters, want %d", len(got), len(want))
	}
	bad := 0
	for _, w := range want {
		g, ok := byKey[k{w.Prefix, w.Match}]
		if !ok || g.ClassID != w.ClassID || g.Damaged != damaged {
			l.T.Errorf("Dump has %+v (present %v), want %v %v class %v damaged %v", g, ok, w.Match, w.Prefix, w.ClassID, damaged)
			if bad++; bad > 10 {
				l.T.Fatal("too many differences")
			}
		}
	}
}

// TestAdoptAndRepair: a second Classifier (a restarted daemon) adopts the
// pinned maps and program and the attached filter with zero writes; so
// does a third after the pins are gone (through the attached program's
// id), which pins them again. Entries changed, added and deleted behind
// its back are what Dump shows; a filter deleted by hand makes every entry
// Damaged until Ensure re-attaches the program (one write).
func TestAdoptAndRepair(t *testing.T) {
	l := newLab(t)
	l.AddClasses(4)
	fs := []model.Filter{
		{Prefix: netip.MustParsePrefix("198.18.1.0/24"), Match: model.MatchDst, ClassID: clstest.UserClass(0)},
		{Prefix: netip.MustParsePrefix("2001:db8:1::/48"), Match: model.MatchDst, ClassID: clstest.UserClass(1)},
		{Prefix: netip.MustParsePrefix("198.18.2.0/24"), Match: model.MatchSrc, ClassID: clstest.UserClass(2)},
	}
	for _, f := range fs {
		if _, err := l.c.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	l.c.Close()

	again := NewConn(l.Conn, l.Ifindex, model.RootQdisc, l.opts)
	defer again.Close()
	l.c = again
	l.expectDump(fs, false)
	if w, err := again.Ensure(); w != 0 || err != nil {
		t.Errorf("Ensure of a restarted classifier: %d writes, %v; want 0", w, err)
	}
	for _, f := range fs {
		if w, err := again.Add(f); w != 0 || err != nil {
			t.Errorf("Add %v after restart: %d writes, %v; want 0", f.Prefix, w, err)
		}
	}

	// Pins gone (a bpffs of another mount namespace): adopted by id.
	again.Close()
	if err := removePins(l.opts.PinRoot, again.PinDir()); err != nil {
		t.Fatal(err)
	}
	third := NewConn(l.Conn, l.Ifindex, model.RootQdisc, l.opts)
	defer third.Close()
	l.c = third
	l.expectDump(fs, false)
	if w, err := third.Ensure(); w != 0 || err != nil {
		t.Errorf("Ensure without pins: %d writes, %v; want 0", w, err)
	}
	if _, err := os.Stat(filepath.Join(third.PinDir(), pinV4)); err != nil {
		t.Errorf("not pinned again: %v", err)
	}

	// Drift, written with cilium/ebpf as bpftool would: a class changed,
	// an entry deleted, one added.
	m, err := ebpf.LoadPinnedMap(filepath.Join(third.PinDir(), pinV4), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	k0, _, _ := key(fs[0].Prefix, fs[0].Match)
	if err := m.Put(k0, value(clstest.UserClass(3))); err != nil {
		t.Fatal(err)
	}
	k2, _, _ := key(fs[2].Prefix, fs[2].Match)
	if err := m.Delete(k2); err != nil {
		t.Fatal(err)
	}
	extra := model.Filter{Prefix: netip.MustParsePrefix("198.18.9.0/25"), Match: model.MatchDst, ClassID: clstest.UserClass(3)}
	kx, _, _ := key(extra.Prefix, extra.Match)
	if err := m.Put(kx, value(extra.ClassID)); err != nil {
		t.Fatal(err)
	}
	drifted := []model.Filter{{Prefix: fs[0].Prefix, Match: fs[0].Match, ClassID: clstest.UserClass(3)}, fs[1], extra}
	l.expectDump(drifted, false)

	// An entry no shaperd key looks like, that every lookup would hit (a
	// /4 of the match byte): hidden from the filters, which are all
	// Damaged, and deleted by Ensure.
	junk := make([]byte, v4KeySize)
	binary.NativeEndian.PutUint32(junk, 4)
	if err := m.Put(junk, value(clstest.UserClass(3))); err != nil {
		t.Fatal(err)
	}
	l.expectDump(drifted, true)
	third.Close() // as Kernel.Dump does after each dump
	if w, err := third.Ensure(); w != 1 || err != nil {
		t.Errorf("Ensure with a foreign entry: %d writes, %v; want 1", w, err)
	}
	l.expectDump(drifted, false)

	// The tc filter deleted by hand: everything is Damaged; Ensure
	// re-attaches with one write.
	l.Shaper.MustRun("tc", "filter", "del", "dev", l.Dev, "parent", "1:", "pref", "99")
	l.expectDump(drifted, true)
	if w, err := third.Ensure(); w != 1 || err != nil {
		t.Errorf("Ensure after the filter was deleted: %d writes, %v; want 1", w, err)
	}
	l.expectDump(drifted, false)
	l.ExpectClass(netip.MustParseAddr(clstest.Src4), netip.MustParseAddr("198.18.9.3"), extra.ClassID)
	if err := third.Remove(); err != nil {
		t.Fatal(err)
	}
}

// TestReplacesU32: Ensure deletes the u32 classifier's priorities (a
// switch from classifier = "u32") and leaves other filters alone, listing
// them as foreign.
func TestReplacesU32(t *testing.T) {
	l := newLab(t)
	l.AddClasses(2)
	l.Shaper.MustRun("tc", "filter", "add", "dev", l.Dev, "parent", "1:", "protocol", "ip", "prio", "100", "u32", "match", "ip", "dst", "198.18.1.1/32", "flowid", "1:100")
	l.Shaper.MustRun("tc", "filter", "add", "dev", l.Dev, "parent", "1:", "protocol", "ip", "prio", "7", "u32", "match", "ip", "dst", "198.18.1.2/32", "flowid", "1:100")
	w, err := l.c.Ensure()
	if err != nil || w != 5 { // 2 maps, the program, the u32 priority, the filter
		t.Errorf("Ensure: %d writes, %v; want 5", w, err)
	}
	out := l.Shaper.MustRun("tc", "filter", "show", "dev", l.Dev)
	if strings.Contains(out, "pref 100 ") || !strings.Contains(out, "pref 7 ") || !strings.Contains(out, "pref 99 bpf") {
		t.Errorf("filters after Ensure:\n%s", out)
	}
	if f := l.c.Foreign(); len(f) == 0 || slices.ContainsFunc(f, func(s string) bool { return !strings.Contains(s, "pref 7 ") }) {
		t.Errorf("Foreign = %q, want the u32 objects of pref 7", f)
	}
	if err := l.c.Remove(); err != nil {
		t.Fatal(err)
	}
}
