package kernel

import (
	"testing"

	"github.com/shaperd/shaperd/internal/netnslab"
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
