package kernel

import (
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Per-queue trees for uploads: the IFB shaperd creates gets one transmit
// queue per tree, the steering program at its clsact egress puts each
// user's arrivals into the user's queue, and each user's upload is shaped
// by its class there; a second apply writes nothing.
func TestMQIngressIFB(t *testing.T) {
	lab, k := labKernel(t, 2)
	tg := model.Targets{
		Interface: model.InterfaceSpec{Name: netnslab.RouterLANDev, Direction: model.Ingress, IFB: netnslab.RouterIFB,
			Bandwidth: 100 * tbf.Mbit, Queues: 2},
		Users: []model.UserTarget{
			user("alice", "bronze", lab.Users4[0], tbf.Mbit, 10*tbf.Mbit),
			user("bob", "silver", lab.Users4[1], tbf.Mbit, 20*tbf.Mbit),
		},
	}
	ids := model.NewAssignment()
	desired, _ := reconcile(t, k, tg, ids)
	if n, err := k.TxQueues(netnslab.RouterIFB); err != nil || n != 2 {
		t.Fatalf("IFB made by shaperd: %d transmit queues (%v), want 2", n, err)
	}
	qa, _ := ids.Queue("alice")
	qb, _ := ids.Queue("bob")
	if qa == qb {
		t.Fatalf("alice and bob on queue %d both: the test needs them apart", qa)
	}
	actual, err := k.Dump(desired.Device)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := k.Apply(model.Diff(actual, desired)); err != nil || res.Writes != 0 {
		t.Fatalf("re-apply: %d writes, %v; want 0, nil", res.Writes, err)
	}
	for _, u := range tg.Users {
		addr := u.Prefixes[0].Addr()
		want := goodput(u.Ceil, false)
		got := measure(t, lab, func(r []float64) bool { return within(r[0], want, 0.05) },
			netnslab.Flow{User: addr, Dir: netnslab.Upload})
		t.Logf("%s upload: %.2f Mbit/s (ceil %s: goodput %.2f)", u.Name, got[0]/1e6, u.Ceil, want/1e6)
		if !within(got[0], want, 0.05) {
			t.Errorf("%s upload: %.2f Mbit/s, want %.2f +-5%%", u.Name, got[0]/1e6, want/1e6)
		}
	}
	// Each upload went through its own queue's tree.
	sent, err := k.QueueCounters(netnslab.RouterIFB)
	if err != nil || len(sent) != 2 {
		t.Fatalf("QueueCounters: %d queues, %v", len(sent), err)
	}
	for q, qd := range sent {
		if qd.Stats == nil || qd.Stats.Bytes < 1_000_000 {
			t.Errorf("queue %d of the IFB sent %+v, want an upload's worth", q, qd.Stats)
		}
	}
	if err := k.Teardown(desired.Device, netnslab.RouterLANDev); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
}
