package kernel

import (
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// foreignFilters are filters another tool adds by hand on a shaped device
// (kinds this kernel has: u32 with an action, a u32 hash table in its own
// priority, cls_bpf with classic BPF bytecode).
var foreignFilters = [][]string{
	{"prio", "5", "protocol", "ip", "u32", "match", "ip", "dst", "198.18.250.1/32", "action", "mirred", "egress", "mirror", "dev", netnslab.RouterWANDev},
	{"prio", "6", "protocol", "ip", "handle", "5:", "u32", "divisor", "1"},
	{"prio", "7", "protocol", "all", "bpf", "bytecode", "1,6 0 0 0,", "classid", "1:2"},
}

// TestForeignFiltersCoexist (other tools' objects are left alone): filters
// of other tools on a
// shaped device do not stop dumps, drift repair or adoption; the dump
// lists them, and repairs leave them alone.
func TestForeignFiltersCoexist(t *testing.T) {
	lab, k := labKernel(t, 2)
	dev := netnslab.RouterLANDev
	tg := model.Targets{Interface: model.InterfaceSpec{Name: dev, Bandwidth: 100 * tbf.Mbit},
		Users: []model.UserTarget{
			user("alice", "", lab.Users4[0], 5*tbf.Mbit, 10*tbf.Mbit),
			user("bob", "", lab.Users4[1], 5*tbf.Mbit, 10*tbf.Mbit),
		}}
	desired, _ := reconcile(t, k, tg, nil)
	for _, f := range foreignFilters {
		lab.Router.MustRun(append([]string{"tc", "filter", "add", "dev", dev, "parent", "1:"}, f...)...)
	}
	actual, err := k.Dump(dev)
	if err != nil {
		t.Fatalf("Dump with foreign filters: %v", err)
	}
	if cs := model.Diff(actual, desired); len(cs) != 0 {
		t.Errorf("foreign filters make changes: %v", cs)
	}
	if len(actual.Foreign) != 3 {
		t.Errorf("Foreign = %q; want the 3 foreign filters", actual.Foreign)
	}
	for i, kind := range []string{"u32 filter pref 5", "u32 filter pref 6", "bpf filter pref 7"} {
		if i < len(actual.Foreign) && !strings.HasPrefix(actual.Foreign[i], kind) {
			t.Errorf("Foreign[%d] = %q, want %q...", i, actual.Foreign[i], kind)
		}
	}
	// Drift repair: a class changed and a shaperd filter deleted by hand.
	lab.Router.MustRun("tc", "class", "change", "dev", dev, "parent", "1:1", "classid", desired.Classes[len(desired.Classes)-1].Handle.String(),
		"htb", "rate", "1mbit", "ceil", "1mbit")
	lab.Router.MustRun("tc", "filter", "del", "dev", dev, "parent", "1:", "prio", "100", "protocol", "ip")
	res, err := apply(t, k, desired)
	if err != nil || len(res.Refused) != 0 {
		t.Fatalf("repair with foreign filters: %v", err)
	}
	verify(t, k, desired)
	// Adoption: a new Kernel (a restart) dumps the same tree.
	k2, err := Open(Options{NetNS: lab.Router.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	if mm, err := k2.Verify(desired); err != nil || len(mm) != 0 {
		t.Errorf("adopting with foreign filters: %v %v", mm, err)
	}
	out := lab.Router.MustRun("tc", "filter", "show", "dev", dev, "parent", "1:")
	for _, want := range []string{"pref 5 u32", "pref 6 u32", "pref 7 bpf"} {
		if !strings.Contains(out, want) {
			t.Errorf("foreign filter %q gone after the repair:\n%s", want, out)
		}
	}
}
