package kernel

import (
	"errors"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// A class above 2^32 bytes/s (40gbit) round-trips with its 64-bit rate and
// a non-zero buffer; tc shows 40Gbit too.
func Test64BitRates(t *testing.T) {
	lab, k := labKernel(t, 1)
	tg := model.Targets{
		Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Bandwidth: 100 * tbf.Gbit},
		Users:     []model.UserTarget{user("big", "", lab.Users4[0], 40*tbf.Gbit, 40*tbf.Gbit)},
	}
	desired, _ := reconcile(t, k, withoutFilters(tg), nil)
	actual, err := k.Dump(desired.Device)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, c := range actual.Classes {
		if c.Rate == 40*tbf.Gbit {
			found = true
			if c.Ceil != 40*tbf.Gbit || c.Buffer == 0 || c.CBuffer == 0 {
				t.Errorf("class %s: ceil %s buffer %d cbuffer %d; want 40gbit and non-zero buffers", c.Handle, c.Ceil, c.Buffer, c.CBuffer)
			}
		}
	}
	if !found {
		t.Fatalf("no 40gbit class in dump: %+v", actual.Classes)
	}
	out := lab.Router.MustRun("tc", "class", "show", "dev", netnslab.RouterLANDev)
	if !strings.Contains(out, "rate 40Gbit ceil 40Gbit") || strings.Contains(out, "burst 0b") {
		t.Errorf("tc shows:\n%s\nwant a 40Gbit class without a 0b burst", out)
	}
}

// A leaf qdisc kind the kernel lacks (fq_codel here) is refused with an
// *Error that names the class, the kind and ErrKindUnsupported.
func TestUnsupportedLeafKind(t *testing.T) {
	lab, k := labKernel(t, 1)
	tg := model.Targets{
		Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Bandwidth: 100 * tbf.Mbit, Leaf: &model.LeafQdisc{Kind: "fq_codel"}},
		Users:     []model.UserTarget{user("alice", "", lab.Users4[0], 5*tbf.Mbit, 10*tbf.Mbit)},
	}
	desired, err := model.Build(withoutFilters(tg), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := apply(t, k, desired)
	if err == nil {
		t.Skip("this kernel has fq_codel; nothing to refuse")
	}
	var ke *Error
	if !errors.As(err, &ke) || !errors.Is(err, ErrKindUnsupported) {
		t.Fatalf("Apply error %v (%T); want *Error wrapping ErrKindUnsupported", err, err)
	}
	if ke.Kind != "fq_codel" || !strings.Contains(ke.Object, "class 1:") || ke.Device != netnslab.RouterLANDev || ke.Message == "" {
		t.Errorf("error %+v: want device %s, kind fq_codel, a class in Object and the kernel's message", ke, netnslab.RouterLANDev)
	}
	msg := err.Error()
	for _, want := range []string{"fq_codel", "class 1:", "unknown"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if res.Writes == 0 {
		t.Errorf("Result.Writes = 0; the root qdisc and classes before the refusal were written")
	}
	t.Logf("refusal: %v", err)
}

// withoutFilters keeps users but gives them no prefixes (tests that do not
// need classification).
func withoutFilters(tg model.Targets) model.Targets {
	us := make([]model.UserTarget, len(tg.Users))
	copy(us, tg.Users)
	for i := range us {
		us[i].Prefixes = nil
	}
	tg.Users = us
	return tg
}
