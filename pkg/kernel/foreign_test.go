package kernel

import (
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
)

func TestIsForeignRoot(t *testing.T) {
	for _, tc := range []struct {
		kind   string
		handle model.Handle
		want   bool
	}{
		{"htb", model.RootQdisc, false},                    // shaperd's
		{"tbf", model.RootQdisc, false},                    // shaperd's
		{"noqueue", 0, false},                              // the kernel's default
		{"mq", 0, false},                                   // the kernel's default on multi-queue devices
		{"fq_codel", 0, false},                             // net.core.default_qdisc
		{"pfifo_fast", model.MakeHandle(0x8002, 0), false}, // holds nothing
		{"tbf", model.MakeHandle(0x8001, 0), true},
		{"bfifo", model.RootQdisc, true}, // shaperd's handle, another kind
		{"htb", model.MakeHandle(5, 0), true},
		{"mq", model.MakeHandle(7, 0), true},
	} {
		if got := IsForeignRoot(tc.kind, tc.handle); got != tc.want {
			t.Errorf("IsForeignRoot(%s %v) = %v, want %v", tc.kind, tc.handle, got, tc.want)
		}
	}
}
