package kernel

import (
	"testing"

	"github.com/shaperd/shaperd/internal/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestSmokeHTB(t *testing.T) {
	lab, k := labKernel(t, 3)
	tg := model.Targets{
		Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Shaper: model.ShaperHTB, Bandwidth: 100 * tbf.Mbit},
		Users: []model.UserTarget{
			user("alice", "bronze", lab.Users4[0], 5*tbf.Mbit, 10*tbf.Mbit),
			user("bob", "silver", lab.Users4[1], 10*tbf.Mbit, 20*tbf.Mbit),
			user("carol", "gold", lab.Users4[2], 15*tbf.Mbit, 30*tbf.Mbit),
		},
	}
	desired, err := model.Build(tg, model.NewAssignment())
	if err != nil {
		t.Fatal(err)
	}
	desired.Filters = nil
	res, err := apply(t, k, desired)
	if err != nil {
		t.Fatal(err)
	}
	verify(t, k, desired)
	t.Logf("writes %d", res.Writes)
	res, err = apply(t, k, desired)
	t.Logf("again: writes %d %v", res.Writes, err)
	out := lab.Router.MustRun("tc", "-s", "class", "show", "dev", netnslab.RouterLANDev)
	t.Log(out)
	_ = desired
}
