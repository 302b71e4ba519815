package steer_test

import (
	"net/netip"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// TestSteerResearch measures which queue's HTB carries a user's packets
// under mq, with and without the steering program, with XPS, for
// locally generated TCP, and through an IFB device (docs/queues-mq.md).
func TestSteerResearch(t *testing.T) {
	netnslab.Require(t)
	l := netnslab.NewRouterLab(t, netnslab.RouterLabOptions{Users: 2, LANQueues: 4})
	r := l.Router
	mqHTB(t, r, l.RouterLAN, 4)
	for q := 0; q < 4; q++ {
		t.Logf("xps_cpus tx-%d = %s", q, xps(t, r, l.RouterLAN, q))
	}
	measure := func(name string, dst netip.Addr) int {
		src := l.WAN4
		if dst.Is6() {
			src = l.WAN6
		}
		before := queuePackets(t, r, l.RouterLAN)
		pingFrom(t, l.WAN, src, dst, 50)
		d := delta(before, queuePackets(t, r, l.RouterLAN))
		t.Logf("%s: forwarded to %s: packets per queue %v", name, dst, d)
		return mostly(d)
	}
	expect := func(got, want int, what string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: most packets on queue %d, want %d", what, got, want)
		}
	}
	measure("no steering", l.Users4[0])
	measure("no steering", l.Users4[1])
	s := newSteerer(t, r, l.RouterLAN, false)
	set := func(a netip.Addr, q uint32) {
		if err := s.Set(netip.PrefixFrom(a, a.BitLen()), q); err != nil {
			t.Fatal(err)
		}
	}
	set(l.Users4[0], 2)
	set(l.Users4[1], 3)
	set(l.Users6[0], 1)
	expect(measure("steered user0->2", l.Users4[0]), 2, "forwarded IPv4")
	expect(measure("steered user1->3", l.Users4[1]), 3, "forwarded IPv4")
	expect(measure("steered user0 v6->1", l.Users6[0]), 1, "forwarded IPv6")

	// Local TCP from the router itself.
	srv := netnslab.StartServer(t, l.LAN, l.Users4[0])
	before := queuePackets(t, r, l.RouterLAN)
	if _, err := netnslab.RunClient(r, netip.MustParseAddr("198.18.0.1"), srv, netnslab.ClientOptions{Seconds: 1}); err != nil {
		t.Fatal(err)
	}
	d := delta(before, queuePackets(t, r, l.RouterLAN))
	t.Logf("local TCP router->user0 (steered to 2): packets per queue %v", d)
	expect(mostly(d), 2, "local TCP")
	set(l.Users4[0], 1)
	srv = netnslab.StartServer(t, l.LAN, l.Users4[0])
	before = queuePackets(t, r, l.RouterLAN)
	if _, err := netnslab.RunClient(r, netip.MustParseAddr("198.18.0.1"), srv, netnslab.ClientOptions{Seconds: 1}); err != nil {
		t.Fatal(err)
	}
	d = delta(before, queuePackets(t, r, l.RouterLAN))
	t.Logf("local TCP router->user0 (steered to 1): packets per queue %v", d)
	expect(mostly(d), 1, "local TCP after a queue change")
	set(l.Users4[0], 2)

	// XPS: every CPU transmits on tx-0.
	r.MustRun("sh", "-c", "echo 3 > /sys/class/net/"+l.RouterLAN+"/queues/tx-0/xps_cpus")
	expect(measure("steered user0->2 with xps all->0", l.Users4[0]), 0, "XPS overrides the program")
	r.MustRun("sh", "-c", "echo 0 > /sys/class/net/"+l.RouterLAN+"/queues/tx-0/xps_cpus")
	expect(measure("steered user0->2 with xps cleared", l.Users4[0]), 2, "after clearing XPS")

	// Uploads through an IFB device with 4 queues.
	r.MustRun("ip", "link", "add", "r-ifb", "numtxqueues", "4", "numrxqueues", "4", "type", "ifb")
	r.MustRun("ip", "link", "set", "r-ifb", "up")
	mqHTB(t, r, "r-ifb", 4)
	// The steerer added clsact to the lan device already.
	r.MustRun("tc", "filter", "add", "dev", l.RouterLAN, "ingress", "prio", "50000", "protocol", "all", "u32", "match", "u32", "0", "0",
		"action", "mirred", "egress", "redirect", "dev", "r-ifb")
	up := func(name string, src netip.Addr) int {
		dst := l.WAN4
		if src.Is6() {
			dst = l.WAN6
		}
		before := queuePackets(t, r, "r-ifb")
		pingFrom(t, l.LAN, src, dst, 50)
		d := delta(before, queuePackets(t, r, "r-ifb"))
		t.Logf("%s: upload from %s: ifb packets per queue %v", name, src, d)
		return mostly(d)
	}
	up("ifb no steering", l.Users4[0])
	ing := newSteerer(t, r, l.RouterLAN, true)
	if err := ing.AttachIngress(); err != nil {
		t.Fatal(err)
	}
	if err := ing.Set(netip.PrefixFrom(l.Users4[0], 32), 1); err != nil {
		t.Fatal(err)
	}
	expect(up("ifb steered at lan ingress user0->1", l.Users4[0]), 1, "IFB, steered before mirred")
	ing.Close()
	r.MustRun("tc", "filter", "del", "dev", l.RouterLAN, "ingress", "prio", "49152")
	eg := newSteerer(t, r, "r-ifb", true)
	if err := eg.Set(netip.PrefixFrom(l.Users4[0], 32), 3); err != nil {
		t.Fatal(err)
	}
	expect(up("ifb steered at ifb egress user0->3", l.Users4[0]), 3, "IFB, steered at the IFB's egress")
	t.Log(r.MustRun("tc", "-s", "filter", "show", "dev", "r-ifb", "egress"))
}
