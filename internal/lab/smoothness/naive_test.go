package smoothness

import (
	"slices"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

func TestNaiveArgs(t *testing.T) {
	cls := model.Class{Handle: model.MakeHandle(1, 0x100), Parent: model.RootClass}
	got, err := naiveArgs(Case{Shaper: model.ShaperHTB, From: 50 * tbf.Mbit, To: 10 * tbf.Mbit}, "r-lan", cls, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "tc class change dev r-lan parent 1:1 classid 1:100 htb rate 10000000bit"
	if strings.Join(got, " ") != want {
		t.Errorf("HTB: %q, want %q", strings.Join(got, " "), want)
	}
	to := &model.TBFParams{Rate: 50 * tbf.Mbit, Burst: 262144, Limit: 574644}
	got, err = naiveArgs(Case{Shaper: model.ShaperTBF, From: 10 * tbf.Mbit, To: 50 * tbf.Mbit}, "r-lan", model.Class{}, to)
	if err != nil {
		t.Fatal(err)
	}
	want = "tc qdisc change dev r-lan root handle 1: tbf rate 50000000bit burst 262144 limit 574644"
	if strings.Join(got, " ") != want {
		t.Errorf("TBF: %q, want %q", strings.Join(got, " "), want)
	}
	if _, err := naiveArgs(Case{Shaper: model.ShaperTBF}, "r-lan", model.Class{}, nil); err == nil {
		t.Error("TBF without parameters: no error")
	}
	if _, err := naiveArgs(Case{Shaper: "hfsc"}, "r-lan", model.Class{}, nil); err == nil {
		t.Error("unknown shaper: no error")
	}
}

func TestRequirementCases(t *testing.T) {
	cs := RequirementCases(DefaultTBFBurst)
	var names []string
	for _, c := range cs {
		names = append(names, c.String())
	}
	want := []string{"HTB 50mbit->10mbit", "HTB 10mbit->50mbit", "TBF 50mbit->10mbit burst 256kb", "TBF 10mbit->50mbit burst 256kb"}
	if !slices.Equal(names, want) {
		t.Errorf("cases %q, want %q", names, want)
	}
}
