package u32

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// classifierOn returns a Classifier on a fake kernel holding objs.
func classifierOn(t testing.TB, objs []object) (*Classifier, *fakeKernel) {
	t.Helper()
	f := newFakeKernel(objs)
	conn := f.conn()
	t.Cleanup(func() { conn.Close() })
	return NewConn(conn, 1, model.RootQdisc), f
}

// expectFilters dumps c and compares with want (none Damaged).
func expectFilters(t *testing.T, c *Classifier, want []model.Filter) {
	t.Helper()
	got, err := c.Dump()
	if err != nil {
		t.Fatalf("Dump: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Dump:\n%v\nwant\n%v", got, want)
	}
}

// TestEnsureRecreatedTableWithForeignNode (no kernel state may panic the
// classifier): a shaperd table of
// the wrong size holding a foreign node is recreated by Ensure; the
// foreign node went with it and must not be looked at (or deleted) again.
// It panicked with a nil node dereference in Ensure's foreign loop.
func TestEnsureRecreatedTableWithForeignNode(t *testing.T) {
	fs := dumpTestFilters()
	objs := kernelObjects(fs)
	i := slices.IndexFunc(objs, func(o object) bool { return o.handle == handleOf(l1HTID(0), 0, 0) && o.prio == PrioIPv4Dst })
	objs[i].divisor = 16
	objs = append(objs, object{prio: PrioIPv4Dst, proto: ethPIPv4, kind: "u32", handle: handleOf(l1HTID(0), 3, 0x20),
		classID: 0x10300, hasSel: true, sel: tcwire.U32Sel{Flags: tcwire.U32Terminal, Keys: []tcwire.U32Key{{Mask: 0xff00ff00, Val: 0x01000100, Off: 16}}}})
	c, fk := classifierOn(t, objs)
	if _, err := c.Dump(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ensure(); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if fk.find(PrioIPv4Dst, ethPIPv4, handleOf(l1HTID(0), 3, 0x20)) >= 0 {
		t.Errorf("the foreign node in the recreated table is still there")
	}
	if i := fk.find(PrioIPv4Dst, ethPIPv4, handleOf(l1HTID(0), 0, 0)); i < 0 || fk.objs[i].divisor != divisor {
		t.Errorf("table %x not recreated with divisor %d", l1HTID(0), divisor)
	}
	// The level-1 filters of that table are gone; Add brings them back.
	for _, f := range fs {
		if _, err := c.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	expectFilters(t, c, fs)
}

// TestEnsureKeepsLinkReplacingForeignNode: a node at 800::1
// that is not a link is replaced by the link, and Ensure's foreign loop
// must not then delete the link it just created (it sent DEL 800::1, NEW
// 800::1, DEL 800::1, and IPv4 destinations fell to the default class).
func TestEnsureKeepsLinkReplacingForeignNode(t *testing.T) {
	fs := dumpTestFilters()
	objs := kernelObjects(fs)
	link := handleOf(0x800, 0, 1)
	i := slices.IndexFunc(objs, func(o object) bool { return o.handle == link && o.prio == PrioIPv4Dst })
	objs[i].link, objs[i].sel = 0, tcwire.U32Sel{} // neither link nor filter
	c, fk := classifierOn(t, objs)
	if _, err := c.Dump(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ensure(); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if want := []string{"DEL 80000001", "NEW 80000001"}; !slices.Equal(fk.reqs, want) {
		t.Errorf("requests %v, want %v", fk.reqs, want)
	}
	if i := fk.find(PrioIPv4Dst, ethPIPv4, link); i < 0 || fk.objs[i].link != uint32(l1HTID(0))<<20 {
		t.Fatalf("no link at %x after Ensure", link)
	}
	expectFilters(t, c, fs)
}

// TestDuplicateHandlesInDump (no kernel state may panic the classifier): a
// dump that lists one node twice
// (it raced with outside changes) must not make Delete or Add dereference
// a node that is gone.
func TestDuplicateHandlesInDump(t *testing.T) {
	fs := dumpTestFilters()
	objs := kernelObjects(fs)
	f32 := fs[slices.IndexFunc(fs, func(f model.Filter) bool {
		return f.Prefix == netip.MustParsePrefix("198.18.5.7/32") && f.Match == model.MatchDst
	})]
	dup := encodeObject(tcwire.Tcmsg{Ifindex: 1, Parent: uint32(model.RootQdisc)}, objs[findObj(objs, f32, l2HTID(0, 5), 7)])
	// dumpTwice dumps with the node listed twice (the kernel holds it once).
	dumpTwice := func(fk *fakeKernel, c *Classifier) {
		fk.extra = [][]byte{dup}
		if _, err := c.Dump(); err != nil {
			t.Fatal(err)
		}
		fk.extra = nil
	}
	// Delete of a filter whose node is listed twice.
	c, fk := classifierOn(t, objs)
	dumpTwice(fk, c)
	if _, err := c.Delete(f32); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	expectFilters(t, c, slices.DeleteFunc(slices.Clone(fs), func(f model.Filter) bool { return f == f32 }))
	// Add (place) of a filter whose node is listed twice, with another class.
	c, fk = classifierOn(t, objs)
	dumpTwice(fk, c)
	moved := f32
	moved.ClassID = 0x10999
	if _, err := c.Add(moved); err != nil {
		t.Fatalf("Add: %v", err)
	}
	want := slices.Clone(fs)
	want[slices.Index(want, f32)] = moved
	expectFilters(t, c, want)
}

// TestDumpSkipsForeignKindsBeforeDecoding (other tools' filters must not
// break a dump): filters of other
// kinds (cls_bpf's TCA_BPF_OPS_LEN is a u16 where u32 has TCA_U32_LINK)
// and u32 filters in other priorities with attributes shaperd does not
// use are skipped before their options are decoded: they made every dump
// fail with "u32 attribute of 2 bytes, want 4".
func TestDumpSkipsForeignKindsBeforeDecoding(t *testing.T) {
	fs := dumpTestFilters()
	c, fk := classifierOn(t, kernelObjects(fs))
	opsLen := []byte{6, 0, 3, 0, 1, 0, 0, 0} // TCA_BPF_OPS_LEN = 1 (u16)
	odd := []byte{6, 0, 1, 0, 7, 0, 0, 0}    // a 2-byte attribute 1 (TCA_U32_CLASSID in u32)
	fk.extra = [][]byte{
		rawFilter(49, ethPIPv4, 1, "bpf", opsLen),
		rawFilter(PrioIPv4Dst, ethPIPv4, 0x1, "bpf", opsLen), // another kind in shaperd's priority
		rawFilter(7, ethPIPv4, handleOf(0x900, 0, 1), "u32", odd),
		rawFilter(50, ethPIPv4, 1, "matchall", odd),
	}
	expectFilters(t, c, fs)
	if got := c.Foreign(); len(got) != 4 {
		t.Errorf("Foreign() = %q, want the 4 filters of other kinds or priorities", got)
	} else if !strings.Contains(got[0], "bpf") || !strings.Contains(got[0], "pref 49") || !strings.Contains(got[0], "(1 objects)") {
		t.Errorf("Foreign()[0] = %q, want the kind and priority", got[0])
	}
	if _, err := c.Ensure(); err != nil {
		t.Errorf("Ensure with foreign filters: %v", err)
	}
	if len(fk.reqs) != 0 {
		t.Errorf("Ensure wrote %v; foreign filters outside shaperd's nodes are left alone", fk.reqs)
	}
}

// TestDumpBadAttributeInShaperdPrio: a node in one of shaperd's
// priorities whose attributes do not decode is a foreign node (Ensure
// deletes it), not a failed dump.
func TestDumpBadAttributeInShaperdPrio(t *testing.T) {
	fs := dumpTestFilters()
	c, fk := classifierOn(t, kernelObjects(fs))
	bad := handleOf(0x800, 0, 0x700)
	fk.extra = [][]byte{rawFilter(PrioIPv4Dst, ethPIPv4, bad, "u32", []byte{6, 0, 1, 0, 7, 0, 0, 0})}
	expectFilters(t, c, fs)
	fk.extra = nil
	if _, err := c.Ensure(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"DEL " + hexs(bad)}; !slices.Equal(fk.reqs, want) {
		t.Errorf("requests %v, want %v", fk.reqs, want)
	}
}
