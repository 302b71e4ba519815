package kernel

import (
	"context"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// WatchTC reports traffic-control changes made by others (tc by hand) and
// none of this Kernel's own writes, with the device named.
func TestWatchTC(t *testing.T) {
	lab, k := labKernel(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := k.WatchTC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Our own apply (qdisc, classes, u32 tables and filters): no event.
	tg := model.Targets{
		Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Bandwidth: 100 * tbf.Mbit},
		Users: []model.UserTarget{user("a", "", lab.Users4[0], 10*tbf.Mbit, 20*tbf.Mbit),
			user("b", "", lab.Users4[1], 10*tbf.Mbit, 20*tbf.Mbit)},
	}
	desired, _ := reconcile(t, k, tg, nil)
	select {
	case ev := <-events:
		t.Fatalf("an event for shaperd's own writes: %+v", ev)
	case <-time.After(300 * time.Millisecond):
	}
	// A class changed by hand: one event naming the device, promptly.
	c := desired.Classes[len(desired.Classes)-1]
	start := time.Now()
	lab.Router.MustRun("tc", "class", "change", "dev", netnslab.RouterLANDev, "parent", c.Parent.String(),
		"classid", c.Handle.String(), "htb", "rate", "1mbit", "ceil", "1mbit")
	select {
	case ev := <-events:
		if ev.Device != netnslab.RouterLANDev || ev.Ifindex == 0 || ev.Overrun {
			t.Errorf("event %+v, want one naming %s", ev, netnslab.RouterLANDev)
		}
		t.Logf("tc class change reported after %v", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("no event for a class changed by hand")
	}
	// Repairing it is our write again: no event.
	reconcile(t, k, tg, nil)
	select {
	case ev := <-events:
		t.Fatalf("an event for shaperd's repair: %+v", ev)
	case <-time.After(300 * time.Millisecond):
	}
	// A filter deleted by hand, on another device a qdisc added: events.
	lab.Router.MustRun("tc", "filter", "del", "dev", netnslab.RouterLANDev, "parent", "1:", "pref", "100", "protocol", "ip")
	lab.Router.MustRun("tc", "qdisc", "add", "dev", netnslab.RouterWANDev, "root", "handle", "5:", "pfifo")
	got := map[string]bool{}
	for deadline := time.After(2 * time.Second); !got[netnslab.RouterLANDev] || !got[netnslab.RouterWANDev]; {
		select {
		case ev := <-events:
			got[ev.Device] = true
		case <-deadline:
			t.Fatalf("events for %v, want %s and %s", got, netnslab.RouterLANDev, netnslab.RouterWANDev)
		}
	}
	cancel()
	for range events { // closed once ctx is done
	}
}
