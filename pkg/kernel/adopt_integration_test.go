package kernel

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
)

// classStats returns the dumped stats of class h.
func classStats(t *testing.T, tree model.Tree, h model.Handle) model.Stats {
	t.Helper()
	for _, c := range tree.Classes {
		if c.Handle == h {
			if c.Stats == nil {
				t.Fatalf("class %s: no stats in dump", h)
			}
			return *c.Stats
		}
	}
	t.Fatalf("class %s not in dump", h)
	return model.Stats{}
}

// A restarted daemon (a new Kernel) adopts the tree: Diff of the dump is
// empty, Apply writes nothing and the class counters keep counting.
func TestAdoption(t *testing.T) {
	lab, k := labKernel(t, 3)
	tg := threeTiers(lab)
	ids := model.NewAssignment()
	desired, _ := reconcile(t, k, tg, ids)
	lab.Download(t, lab.Users4[0], 1)
	before, err := k.Dump(desired.Device)
	if err != nil {
		t.Fatal(err)
	}
	alice := desired.Filters[0].ClassID
	for _, f := range desired.Filters {
		if f.Labels.User == "alice" {
			alice = f.ClassID
		}
	}
	sb := classStats(t, before, alice)
	if sb.Bytes == 0 || sb.Packets == 0 {
		t.Fatalf("alice's class %s counted nothing after a download: %+v", alice, sb)
	}

	k2, err := Open(Options{NetNS: lab.Router.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	actual, err := k2.Dump(desired.Device)
	if err != nil {
		t.Fatal(err)
	}
	recovered := model.AssignmentFromTree(actual, userPrefixes(tg))
	desired2, err := model.Build(tg, recovered)
	if err != nil {
		t.Fatal(err)
	}
	changes := model.Diff(actual, desired2)
	if len(changes) != 0 {
		t.Fatalf("adopting: %d changes, want none; first: %+v", len(changes), changes[0])
	}
	res, err := k2.Apply(changes)
	if err != nil || res.Writes != 0 {
		t.Fatalf("adopting: %d writes, %v", res.Writes, err)
	}
	after, err := k2.Dump(desired.Device)
	if err != nil {
		t.Fatal(err)
	}
	if sa := classStats(t, after, alice); sa.Bytes < sb.Bytes || sa.Packets < sb.Packets {
		t.Errorf("alice's counters went back after adoption: %+v -> %+v", sb, sa)
	}
	if out := lab.Router.MustRun("tc", "qdisc", "show", "dev", netnslab.RouterLANDev); len(out) == 0 {
		t.Error("no qdisc after adoption")
	}
}

// Objects removed by hand (a class, the u32 filters of a priority) are
// found by Dump and restored by Diff+Apply.
func TestDriftRepair(t *testing.T) {
	lab, k := labKernel(t, 3)
	tg := threeTiers(lab)
	ids := model.NewAssignment()
	desired, _ := reconcile(t, k, tg, ids)
	dev := netnslab.RouterLANDev
	var alice model.Handle
	for _, c := range desired.Classes {
		if c.Labels.User == "alice" {
			alice = c.Handle
		}
	}
	// alice's u32 nodes by hand (tc filter del ... handle FH), then her class.
	out := lab.Router.MustRun("tc", "filter", "show", "dev", dev, "parent", "1:")
	n := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if !strings.HasSuffix(line, "flowid "+alice.String()) && !strings.Contains(line, "flowid "+alice.String()+" ") {
			continue
		}
		if i := slices.Index(f, "fh"); i > 0 && slices.Contains(f, "pref") {
			pref := f[slices.Index(f, "pref")+1]
			lab.Router.MustRun("tc", "filter", "del", "dev", dev, "parent", "1:", "pref", pref, "protocol", "ip", "handle", f[i+1], "u32")
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no u32 node with flowid %s in:\n%s", alice, out)
	}
	// The kernel unbinds deleted filters from their class asynchronously.
	for i := 0; ; i++ {
		_, err := lab.Router.Run("tc", "class", "del", "dev", dev, "classid", alice.String())
		if err == nil {
			break
		}
		if i == 50 {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if mm, err := k.Verify(desired); err != nil || len(mm) == 0 {
		t.Fatalf("Verify after drift: %v, %v; want mismatches", mm, err)
	}
	_, res := reconcile(t, k, tg, ids)
	if res.Writes == 0 {
		t.Fatal("repair wrote nothing")
	}
	t.Logf("repair: %d writes", res.Writes)
	if res, err := apply(t, k, desired); err != nil || res.Writes != 0 {
		t.Fatalf("after repair: %d writes, %v; want 0", res.Writes, err)
	}
	// The repaired filter classifies again: alice is held to her ceil.
	want := goodput(tg.Users[0].Ceil, false)
	got := measure(t, lab, func(r []float64) bool { return within(r[0], want, 0.05) },
		netnslab.Flow{User: lab.Users4[0], Dir: netnslab.Download})
	if !within(got[0], want, 0.05) {
		t.Errorf("alice after repair: %.2f Mbit/s, want %.2f +-5%%", got[0]/1e6, want/1e6)
	}
}

// userPrefixes maps each user of tg to its prefixes.
func userPrefixes(tg model.Targets) map[string][]netip.Prefix {
	m := make(map[string][]netip.Prefix, len(tg.Users))
	for _, u := range tg.Users {
		m[u.Name] = u.Prefixes
	}
	return m
}

// A whole u32 priority deleted by hand (tc filter del ... pref N) is
// restored. The kernel keeps that priority's non-root hash tables (cls_u32
// shares them per qdisc) but no dump shows them until the priority exists
// again, so creating them fails with EEXIST ("Filter already exists");
// u32.Classifier.Ensure creates the priority first (empty), dumps, and
// reuses the tables.
func TestDriftRepairPriority(t *testing.T) {
	lab, k := labKernel(t, 3)
	tg := threeTiers(lab)
	ids := model.NewAssignment()
	desired, _ := reconcile(t, k, tg, ids)
	lab.Router.MustRun("tc", "filter", "del", "dev", netnslab.RouterLANDev, "parent", "1:", "pref", "102", "protocol", "ipv6")
	if mm, err := k.Verify(desired); err != nil || len(mm) == 0 {
		t.Fatalf("Verify after deleting priority 102: %v, %v; want mismatches", mm, err)
	}
	_, res := reconcile(t, k, tg, ids)
	t.Logf("repair: %d writes", res.Writes)
	if res, err := apply(t, k, desired); err != nil || res.Writes != 0 {
		t.Fatalf("after repair: %d writes, %v; want 0", res.Writes, err)
	}
}
