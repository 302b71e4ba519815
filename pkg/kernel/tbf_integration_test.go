package kernel

import (
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// A TBF root at 20 Mbit/s shapes a download to 20 Mbit/s of frames (+-5%),
// and re-applying the same tree writes nothing.
func TestTBFRate(t *testing.T) {
	lab, k := labKernel(t, 1)
	rate := 20 * tbf.Mbit
	tg := model.Targets{Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Shaper: model.ShaperTBF, Bandwidth: rate}}
	desired, res := reconcile(t, k, tg, nil)
	if res.Writes != 1 {
		t.Errorf("first apply: %d writes, want 1 (the root qdisc)", res.Writes)
	}
	actual, err := k.Dump(desired.Device)
	if err != nil {
		t.Fatal(err)
	}
	if actual.Root == nil || actual.Root.TBF == nil || actual.Root.TBF.Rate != rate || actual.Root.TBF.Limit != desired.Root.TBF.Limit {
		t.Fatalf("dumped root %+v, want tbf rate %s limit %s", actual.Root, rate, desired.Root.TBF.Limit)
	}
	if res, err := k.Apply(model.Diff(actual, desired)); err != nil || res.Writes != 0 {
		t.Fatalf("re-apply: %d writes, %v; want 0, nil", res.Writes, err)
	}
	want := goodput(rate, false)
	got := measure(t, lab, func(r []float64) bool { return within(r[0], want, 0.05) },
		netnslab.Flow{User: lab.Users4[0], Dir: netnslab.Download})
	t.Logf("tbf %s: download %.2f Mbit/s, expected goodput %.2f", rate, got[0]/1e6, want/1e6)
	if !within(got[0], want, 0.05) {
		t.Errorf("download through tbf %s: %.2f Mbit/s, want %.2f +-5%%", rate, got[0]/1e6, want/1e6)
	}
	// Changing the rate is an in-place change.
	tg.Interface.Bandwidth = 10 * tbf.Mbit
	_, res = reconcile(t, k, tg, nil)
	if res.Writes != 1 {
		t.Errorf("rate change: %d writes, want 1", res.Writes)
	}
}

// TBF roots with 64-bit rates and with a peak bucket round-trip through the
// kernel: Verify finds no mismatch and re-applying writes nothing.
func TestTBFParams(t *testing.T) {
	_, k := labKernel(t, 1)
	for _, spec := range []model.InterfaceSpec{
		{Bandwidth: 40 * tbf.Gbit},
		{Bandwidth: 20 * tbf.Mbit, PeakRate: 100 * tbf.Mbit},
		{Bandwidth: 50 * tbf.Gbit, PeakRate: 60 * tbf.Gbit, Burst: 8 * tbf.Mebibyte},
	} {
		spec.Name, spec.Shaper = netnslab.RouterLANDev, model.ShaperTBF
		desired, _ := reconcile(t, k, model.Targets{Interface: spec}, nil)
		if res, err := apply(t, k, desired); err != nil || res.Writes != 0 {
			t.Errorf("%s peak %s: re-apply %d writes, %v; want 0", spec.Bandwidth, spec.PeakRate, res.Writes, err)
		}
		actual, err := k.Dump(desired.Device)
		if err != nil {
			t.Fatal(err)
		}
		if got := actual.Root.TBF; got.Rate != spec.Bandwidth || got.PeakRate != spec.PeakRate {
			t.Errorf("dumped tbf %+v, want rate %s peak %s", got, spec.Bandwidth, spec.PeakRate)
		}
	}
}
