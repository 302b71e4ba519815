package model_test

import (
	"slices"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

func TestLeafEqual(t *testing.T) {
	fq := &model.LeafQdisc{Kind: "fq_codel"}
	tests := []struct {
		a, b *model.LeafQdisc
		want bool
	}{
		{nil, nil, true},
		{nil, fq, false},
		{fq, nil, false},
		{fq, &model.LeafQdisc{Kind: "fq_codel"}, true},
		{&model.LeafQdisc{Kind: "pfifo", Limit: 100}, &model.LeafQdisc{Kind: "pfifo", Limit: 200}, false},
		{&model.LeafQdisc{Kind: "pfifo", Limit: 1000}, &model.LeafQdisc{Kind: "pfifo"}, true}, // 0: the kernel's default limit
		{&model.LeafQdisc{Kind: "pfifo"}, &model.LeafQdisc{Kind: "bfifo"}, false},
	}
	for _, tt := range tests {
		if got := model.LeafEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("LeafEqual(%+v, %+v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestClassParamsEqualComparesBytesPerSecond(t *testing.T) {
	c := model.Class{Rate: 10 * tbf.Mbit, Ceil: 10 * tbf.Mbit, Buffer: 100, CBuffer: 100, Quantum: 1000}
	d := c
	d.Rate += 7 // same bytes/s
	d.Burst, d.Labels, d.Stats = 99, model.Labels{User: "x"}, &model.Stats{Bytes: 1}
	if !model.ClassParamsEqual(c, d) {
		t.Error("classes differing below a byte per second, or in burst/labels/stats, are unequal")
	}
	for name, mod := range map[string]func(*model.Class){
		"rate":    func(x *model.Class) { x.Rate += 8 },
		"ceil":    func(x *model.Class) { x.Ceil += 8 },
		"buffer":  func(x *model.Class) { x.Buffer++ },
		"cbuffer": func(x *model.Class) { x.CBuffer++ },
		"quantum": func(x *model.Class) { x.Quantum++ },
		"prio":    func(x *model.Class) { x.Prio++ },
		"leaf":    func(x *model.Class) { x.Leaf = &model.LeafQdisc{Kind: "fq_codel"} },
	} {
		e := c
		mod(&e)
		if model.ClassParamsEqual(c, e) {
			t.Errorf("a different %s compares equal", name)
		}
		if m := model.ClassParamMismatches(c, e); len(m) != 1 {
			t.Errorf("%s: mismatches %q, want one", name, m)
		}
	}
}

func TestTBFBurstComparedInKernelTicks(t *testing.T) {
	rate := 10 * tbf.Gbit // 1.25e9 B/s: one tick is 80 bytes
	w := model.TBFParams{Rate: rate, Burst: 6250000, Limit: 1 << 20}
	rc := psched.NewRateConfig(rate.BytesPerSecond(), 0, 0)
	ticks := psched.TBFFromBurst(rc, uint32(w.Burst)).DumpTicks()
	// What pkg/kernel reads back from the dumped ticks, by either formula.
	for _, back := range []tbf.Size{tbf.Size(psched.XmitSize(rate.BytesPerSecond(), ticks)), tbf.BurstFromTicks(rate, ticks)} {
		a := w
		a.Burst = back
		if !model.TBFParamsEqual(a, w) {
			t.Errorf("burst %d read back from %d ticks differs from the %d it was set from", back, ticks, w.Burst)
		}
	}
	a := w
	a.Burst = w.Burst + 1000 // 12 ticks more
	if model.TBFParamsEqual(a, w) {
		t.Error("a burst 1000 bytes larger compares equal")
	}
	a = w
	a.Limit++
	if model.TBFParamsEqual(a, w) {
		t.Error("a different limit compares equal")
	}
}

func TestMismatchesMissingAndUnexpected(t *testing.T) {
	ids := model.NewAssignment()
	a := mustBuild(t, base(t), ids)
	tg := base(t)
	tg.Users = tg.Users[:2]
	w := mustBuild(t, tg, ids)
	if m := model.Mismatches(a, w); !slices.Equal(m, []string{
		"class 1:102 (user carol): unexpected",
		"filter 198.18.1.30/32 dst (user carol): unexpected",
	}) {
		t.Errorf("mismatches %q", m)
	}
	if m := model.Mismatches(w, a); !slices.Equal(m, []string{
		"class 1:102 (user carol): missing",
		"filter 198.18.1.30/32 dst (user carol): missing",
	}) {
		t.Errorf("mismatches %q", m)
	}
	if m := model.Mismatches(model.Tree{Device: "lan0"}, w); !slices.Equal(m, []string{"qdisc htb 1: on lan0: missing"}) {
		t.Errorf("mismatches %q", m)
	}
	if !model.Equal(w, w) || model.Equal(a, w) {
		t.Error("Equal disagrees with Diff")
	}
}

// HTB keeps an inner class's quantum from its creation (it updates it for
// leaves only): a tier or root class whose rate moved compares equal to
// the kernel's despite the quantum; a user class does not.
func TestClassParamsEqualInnerQuantum(t *testing.T) {
	for _, kind := range []string{"root", "tier", "user"} {
		want := model.Class{Rate: 64 * tbf.Kbit, Ceil: 2 * tbf.Mbit, Quantum: 1000, Labels: model.Labels{Kind: kind}}
		dumped := want
		dumped.Quantum, dumped.Labels = 25000, model.Labels{} // as created at 2mbit
		if got, inner := model.ClassParamsEqual(dumped, want), kind != "user"; got != inner {
			t.Errorf("%s class: equal %v with another quantum, want %v", kind, got, inner)
		}
	}
}
