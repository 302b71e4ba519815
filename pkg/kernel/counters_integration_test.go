package kernel

import (
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Counters reads the same classes and counters as Dump, without filters.
func TestCounters(t *testing.T) {
	lab, k := labKernel(t, 2)
	tg := model.Targets{
		Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Bandwidth: 100 * tbf.Mbit},
		Users: []model.UserTarget{user("a", "", lab.Users4[0], 10*tbf.Mbit, 20*tbf.Mbit),
			user("b", "", lab.Users4[1], 10*tbf.Mbit, 20*tbf.Mbit)},
	}
	reconcile(t, k, tg, nil)
	lab.Download(t, lab.Users4[0], 1)
	full, err := k.Dump(netnslab.RouterLANDev)
	if err != nil {
		t.Fatal(err)
	}
	c, err := k.Counters(netnslab.RouterLANDev)
	if err != nil {
		t.Fatal(err)
	}
	if c.Root == nil || c.Root.Kind != model.ShaperHTB || len(c.Filters) != 0 || len(c.Classes) != len(full.Classes) {
		t.Fatalf("Counters: root %+v, %d classes, %d filters; Dump has %d classes", c.Root, len(c.Classes), len(c.Filters), len(full.Classes))
	}
	for i, cl := range c.Classes {
		f := full.Classes[i]
		if cl.Handle != f.Handle || cl.Rate != f.Rate || cl.Stats == nil || cl.Stats.Bytes < f.Stats.Bytes {
			t.Errorf("class %s: %+v, Dump %+v", cl.Handle, cl, f)
		}
	}
	if _, err := k.Counters("nope0"); err == nil {
		t.Error("Counters of a missing device: no error")
	}
}

// ClassCounters reads the asked classes one by one (here each tier's class
// in per-queue trees, as the policy loop does every tick) with the same
// counters as a dump; a class the kernel does not have is left out.
func TestClassCounters(t *testing.T) {
	lab, k := mqLab(t, 2, 2)
	tg := mqTargets(lab, 2, 100*tbf.Mbit, tbf.Mbit)
	tg.Tiers = []model.TierTarget{{Name: "gold", Rate: 2 * tbf.Mbit, Ceil: 50 * tbf.Mbit}}
	for i := range tg.Users {
		tg.Users[i].Tier = "gold"
	}
	desired, _ := reconcile(t, k, tg, nil)
	lab.Download(t, lab.Users4[0], 1)
	var want []model.Class
	for _, c := range desired.Classes {
		if c.Labels.Kind == "tier" {
			want = append(want, c)
		}
	}
	if len(want) != 2 {
		t.Fatalf("%d tier classes in the desired tree, want one per queue", len(want))
	}
	missing := model.MakeHandle(model.QueueHandle(1).Major(), 0xfe)
	got, err := k.ClassCounters(netnslab.RouterLANDev, []model.Handle{want[0].Handle, missing, want[1].Handle})
	if err != nil {
		t.Fatal(err)
	}
	full, err := k.Counters(netnslab.RouterLANDev)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Handle != want[0].Handle || got[1].Handle != want[1].Handle {
		t.Fatalf("ClassCounters: %d classes %v, want %s and %s", len(got), got, want[0].Handle, want[1].Handle)
	}
	var sent uint64
	for _, g := range got {
		for _, f := range full.Classes {
			if f.Handle == g.Handle && (g.Stats == nil || g.Stats.Bytes > f.Stats.Bytes || g.Ceil != f.Ceil) {
				t.Errorf("class %s: %+v; Counters %+v", g.Handle, g, f)
			}
		}
		sent += g.Stats.Bytes
	}
	if sent < 100_000 {
		t.Errorf("the tier classes counted %d bytes after a 1 s download", sent)
	}
	if _, err := k.ClassCounters("nope0", nil); err == nil {
		t.Error("ClassCounters of a missing device: no error")
	}
}
