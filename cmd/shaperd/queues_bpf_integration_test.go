package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
)

// queuesBPFConfig is daemonConfig with r-lan's egress only, as 4
// per-queue trees classified by bpf.
func queuesBPFConfig(t *testing.T) string {
	head, _, ok1 := strings.Cut(daemonConfig, "[[interface]]")
	_, tiers, ok2 := strings.Cut(daemonConfig, "[tiers.bronze]")
	if !ok1 || !ok2 {
		t.Fatal("queuesBPFConfig: daemonConfig has no [[interface]] or [tiers.bronze]")
	}
	return head + "[[interface]]\nname = \"r-lan\"\nbandwidth = \"1gbit\"\ndefault_tier = \"bronze\"\nqueues = 4\nclassifier = \"bpf\"\n\n[tiers.bronze]" + tiers
}

// queueProgIDs returns the program ids of the cls_bpf filters under each
// of r-lan's 4 queue qdiscs and of the steering filter at its clsact
// egress, failing the test unless each has one.
func queueProgIDs(t *testing.T, u *unitLab) []string {
	t.Helper()
	re := regexp.MustCompile(`bpf chain 0 handle 0x1 (\S+) .*id (\d+)`)
	var ids []string
	for q := 0; q <= 4; q++ {
		args := []string{"tc", "filter", "show", "dev", "r-lan", "egress"}
		if q < 4 {
			args = []string{"tc", "filter", "show", "dev", "r-lan", "parent", model.QueueHandle(q).String()}
		}
		out := u.Router.MustRun(args...)
		m := re.FindStringSubmatch(out)
		if m == nil || strings.Contains(out, " u32 ") {
			t.Fatalf("%v: want one shaperd cls_bpf filter and no u32:\n%s", args, out)
		}
		ids = append(ids, m[2])
	}
	return ids
}

// TestDaemonQueuesBPF: with queues = 4 and classifier = "bpf" the unit's
// daemon gives every queue's HTB a cls_bpf classifier of its own (no u32),
// each user's downloads (IPv4 and IPv6) are counted by the user's class
// in its queue's tree, and a restart (once the queues' rates have settled)
// adopts the trees, the per-queue
// classifiers and the steering with zero writes and no filter replaced
// (under `ip netns exec` the bpffs dies with the daemon: everything is
// found through the attached programs).
func TestDaemonQueuesBPF(t *testing.T) {
	u := newUnitLabBefore(t, 4, queuesBPFConfig(t), labUsers, nil, unitEdit{lanQueues: 4})
	if !strings.Contains(u.Logs.String(), `interface=r-lan/egress device=r-lan classifier=bpf why=configured`) {
		t.Errorf("no log of the choice:\n%s", u.Logs.String())
	}
	ids := queueProgIDs(t, u)
	check := func(what string) {
		t.Helper()
		queues := map[uint16]bool{}
		for i := range u.Users4 {
			for _, a := range []netnslab.Flow{{User: u.Users4[i]}, {User: u.Users6[i]}} {
				c := u.classOf("r-lan", a.User)
				queues[c.Handle.Major()] = true
				u.Download(t, a.User, 1)
				if got := u.classOf("r-lan", a.User).Stats.Bytes - c.Stats.Bytes; got < 100000 {
					t.Errorf("%s: %s's class %v counted %d bytes of a 1 s download", what, a.User, c.Handle, got)
				}
			}
		}
		if len(queues) < 3 {
			t.Errorf("%s: 4 users in %d queues' trees", what, len(queues))
		}
	}
	check("first start")

	// The policy loop rebalances the queues' rates from what each sent
	// (docs/queues-mq.md); idle, they settle on the even split a new
	// process starts from. Restart once nothing has been written for 2 s.
	last, quiet := u.metric("shaperd_kernel_writes_total"), time.Now()
	waitFor(t, 30*time.Second, "the queues' rates settled", func() bool {
		time.Sleep(250 * time.Millisecond)
		if w := u.metric("shaperd_kernel_writes_total"); w != last {
			last, quiet = w, time.Now()
		}
		return time.Since(quiet) >= 2*time.Second
	})
	restartWithoutWrites(t, u, "restart")
	if now := queueProgIDs(t, u); !slices.Equal(now, ids) {
		t.Errorf("restart: program ids %v -> %v (a filter was replaced)", ids, now)
	}
	check("after the restart")
}
