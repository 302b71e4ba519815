package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// A 4-queue lan device at 40mbit with one node, campus, whose ceil (20mbit)
// is more than a queue's share (10mbit): it is split over the queues as a
// tier is.
const splitNodeConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
metrics = "` + metricsAddr + `"
reconcile_interval = "2s"

[policy]
interval = "1s"
ramp = "0s"
timezone = "UTC"

[[interface]]
name = "r-lan"
bandwidth = "40mbit"
queues = "auto"

[tiers.free]
rate = "250kbit"
ceil = "40mbit"

[nodes.campus]
rate = "10mbit"
ceil = "20mbit"
`

// campusUsers puts every lab user right under campus.
func campusUsers(lab *netnslab.RouterLab) string {
	var b strings.Builder
	for i, a := range lab.Users4 {
		fmt.Fprintf(&b, "[[user]]\nname = \"u%d\"\ntier = \"free\"\nnode = \"campus\"\naddresses = [%q, %q]\n", i, a, lab.Users6[i])
	}
	return b.String()
}

// TestNodeSplitOverQueues: the daemon, started as the unit runs it, gives
// a node too big for one queue a class in every queue's tree and spreads
// its users over the queues; its policy tick moves the node's shares to
// where its traffic is, so one user alone gets the node's ceil and users
// busy on four queues together stay within it (3 %) and use it (90 %).
func TestNodeSplitOverQueues(t *testing.T) {
	u := newUnitLabBefore(t, 4, splitNodeConfig, campusUsers, nil, unitEdit{lanQueues: 4})
	// The kernel's classes carry no names: campus's class in a queue is
	// the parent of its users' classes there, itself under the queue's
	// root class.
	campus := map[int]model.Handle{}
	for i, a := range u.Users4 {
		c := u.classOf("r-lan", a)
		q := model.QueueOf(c.Handle)
		if _, dup := campus[q]; dup {
			t.Fatalf("u%d on queue %d with another user; the test needs one per queue\n%s", i, q, u.mustCtl("status"))
		}
		if c.Parent.Minor() == model.RootClass.Minor() || model.QueueOf(c.Parent) != q {
			t.Fatalf("u%d: class %s under %s, want under campus's class in queue %d", i, c.Handle, c.Parent, q)
		}
		campus[q] = c.Parent
	}
	if len(campus) != 4 {
		t.Fatalf("campus's users on %d of 4 queues\n%s", len(campus), u.mustCtl("status"))
	}
	tr, err := u.k.Dump("r-lan")
	if err != nil {
		t.Fatal(err)
	}
	for q, h := range campus {
		for _, c := range tr.Classes {
			if c.Handle == h && c.Parent != model.MakeHandle(model.QueueHandle(q).Major(), model.RootClass.Minor()) {
				t.Errorf("campus's class %s in queue %d under %s, want the queue's root class", h, q, c.Parent)
			}
		}
	}
	var handles []model.Handle
	for q := 0; q < 4; q++ {
		handles = append(handles, campus[q])
	}
	for _, c := range []struct {
		name  string
		users []int
		alone bool // the users should get the ceil (within 5%), else at most +3% and at least 90%
	}{
		{"one campus user alone gets the node's ceil", []int{0}, true},
		{"four campus users on four queues share the node's ceil", []int{0, 1, 2, 3}, false},
	} {
		var flows []netnslab.Flow
		for _, i := range c.users {
			flows = append(flows, netnslab.Flow{User: u.Users4[i], Dir: netnslab.Download})
		}
		// As in TestQueuesHoldInterfaceAndTier: measured over 5 s once the
		// policy ticks have moved the shares to the busy queues.
		done := make(chan []float64, 1)
		go func() { done <- u.Measure(t, 11, flows...) }()
		time.Sleep(5 * time.Second)
		got := classRates(t, u, "r-lan", 5*time.Second, handles...)
		goodput := <-done
		total, want := 0.0, float64(20*tbf.Mbit)
		for _, v := range got {
			total += v
		}
		t.Logf("%s: campus's classes %v Mbit/s, total %.2f (ceil %.2f); iperf3 %v", c.name, mbitOf(got), total/1e6, want/1e6, mbitOf(goodput))
		low := 0.9
		if c.alone {
			low = 0.95
		}
		if total > want*1.03 || total < want*low {
			t.Errorf("%s: campus sent %.2f Mbit/s, want %.2f (-%.0f%%..+3%%)\n%s", c.name, total/1e6, want/1e6, (1-low)*100, u.mustCtl("status"))
		}
	}
}
