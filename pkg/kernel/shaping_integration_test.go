package kernel

import (
	"net/netip"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// threeTiers is the egress plan of the shaping tests: a 50mbit link, three
// users whose ceilings (10+20+30) add up to more than the link.
func threeTiers(lab *netnslab.RouterLab) model.Targets {
	carol := user("carol", "gold", lab.Users4[2], 15*tbf.Mbit, 30*tbf.Mbit)
	carol.Prefixes = append(carol.Prefixes, netip.PrefixFrom(lab.Users6[2], 128))
	return model.Targets{
		Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Shaper: model.ShaperHTB, Bandwidth: 50 * tbf.Mbit},
		Users: []model.UserTarget{
			user("alice", "bronze", lab.Users4[0], 5*tbf.Mbit, 10*tbf.Mbit),
			user("bob", "silver", lab.Users4[1], 10*tbf.Mbit, 20*tbf.Mbit),
			carol,
		},
	}
}

// Each user alone reaches its ceil (+-5%); all three together each get at
// least their guaranteed rate (-5%); an IPv6 address of a user is shaped
// by the same class.
func TestHTBUsersShaped(t *testing.T) {
	lab, k := labKernel(t, 3)
	tg := threeTiers(lab)
	reconcile(t, k, tg, nil)

	for i, u := range tg.Users {
		want := goodput(u.Ceil, false)
		got := measure(t, lab, func(r []float64) bool { return within(r[0], want, 0.05) },
			netnslab.Flow{User: lab.Users4[i], Dir: netnslab.Download})
		t.Logf("%s alone: %.2f Mbit/s (ceil %s: goodput %.2f)", u.Name, got[0]/1e6, u.Ceil, want/1e6)
		if !within(got[0], want, 0.05) {
			t.Errorf("%s alone: %.2f Mbit/s, want its ceil %s = %.2f Mbit/s goodput +-5%%", u.Name, got[0]/1e6, u.Ceil, want/1e6)
		}
	}

	want6 := goodput(tg.Users[2].Ceil, true)
	got6 := measure(t, lab, func(r []float64) bool { return within(r[0], want6, 0.05) },
		netnslab.Flow{User: lab.Users6[2], Dir: netnslab.Download})
	t.Logf("carol over IPv6: %.2f Mbit/s (goodput %.2f)", got6[0]/1e6, want6/1e6)
	if !within(got6[0], want6, 0.05) {
		t.Errorf("carol over IPv6: %.2f Mbit/s, want %.2f +-5%%", got6[0]/1e6, want6/1e6)
	}

	flows := make([]netnslab.Flow, len(tg.Users))
	for i := range tg.Users {
		flows[i] = netnslab.Flow{User: lab.Users4[i], Dir: netnslab.Download}
	}
	guaranteed := func(r []float64) bool {
		for i, u := range tg.Users {
			if r[i] < goodput(u.Rate, false)*0.95 {
				return false
			}
		}
		return true
	}
	got := measure(t, lab, guaranteed, flows...)
	var sum float64
	for i, u := range tg.Users {
		sum += got[i]
		t.Logf("%s together: %.2f Mbit/s (rate %s, ceil %s)", u.Name, got[i]/1e6, u.Rate, u.Ceil)
		if got[i] < goodput(u.Rate, false)*0.95 {
			t.Errorf("%s together: %.2f Mbit/s, below its guaranteed %s (goodput %.2f) -5%%", u.Name, got[i]/1e6, u.Rate, goodput(u.Rate, false)/1e6)
		}
	}
	if link := goodput(tg.Interface.Bandwidth, false); sum > link*1.05 {
		t.Errorf("together: %.2f Mbit/s in total, more than the link's %.2f", sum/1e6, link/1e6)
	}
}

// Uploads are shaped on an IFB device: the ingress redirect is created,
// detected by Dump (re-apply writes nothing) and the user's upload runs at
// its ceil.
func TestIngressIFB(t *testing.T) {
	lab, k := labKernel(t, 2)
	tg := model.Targets{
		Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Direction: model.Ingress, IFB: netnslab.RouterIFB,
			Bandwidth: 100 * tbf.Mbit},
		Users: []model.UserTarget{
			user("alice", "bronze", lab.Users4[0], 5*tbf.Mbit, 15*tbf.Mbit),
			user("bob", "silver", lab.Users6[1], 5*tbf.Mbit, 25*tbf.Mbit),
		},
	}
	desired, _ := reconcile(t, k, tg, nil)
	actual, err := k.Dump(desired.Device)
	if err != nil {
		t.Fatal(err)
	}
	if actual.Redirect == nil || *actual.Redirect != *desired.Redirect {
		t.Fatalf("dumped redirect %+v, want %+v", actual.Redirect, desired.Redirect)
	}
	if res, err := k.Apply(model.Diff(actual, desired)); err != nil || res.Writes != 0 {
		t.Fatalf("re-apply: %d writes, %v; want 0, nil", res.Writes, err)
	}
	// An IFB set down by hand drops all arrivals: Dump reports the redirect
	// missing and re-applying sets the IFB up again.
	lab.Router.MustRun("ip", "link", "set", netnslab.RouterIFB, "down")
	if _, res := reconcile(t, k, tg, nil); res.Writes == 0 {
		t.Error("IFB down: nothing written")
	}
	if up, err := k.LinkUp(netnslab.RouterIFB); err != nil || !up {
		t.Errorf("IFB after repair: up %v, %v", up, err)
	}
	for i, u := range tg.Users {
		addr := u.Prefixes[0].Addr()
		want := goodput(u.Ceil, addr.Is6())
		got := measure(t, lab, func(r []float64) bool { return within(r[0], want, 0.05) },
			netnslab.Flow{User: addr, Dir: netnslab.Upload})
		t.Logf("%s upload: %.2f Mbit/s (ceil %s: goodput %.2f)", u.Name, got[0]/1e6, u.Ceil, want/1e6)
		if !within(got[0], want, 0.05) {
			t.Errorf("user %d %s upload: %.2f Mbit/s, want %.2f +-5%%", i, u.Name, got[0]/1e6, want/1e6)
		}
	}
	// Teardown removes the tree, the redirect and the IFB.
	if err := k.Teardown(desired.Device, netnslab.RouterLANDev); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	if ok, err := k.LinkExists(netnslab.RouterIFB); err != nil || ok {
		t.Errorf("after Teardown: IFB exists=%v (%v)", ok, err)
	}
	out := lab.Router.MustRun("tc", "qdisc", "show", "dev", netnslab.RouterLANDev, "ingress")
	if out != "" {
		t.Errorf("after Teardown: ingress qdisc left on %s: %s", netnslab.RouterLANDev, out)
	}
}
