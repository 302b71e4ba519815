package steer_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	vnl "github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel/steer"
)

// mqHTB installs mq at dev's root with one HTB per queue (handles q+1:,
// parents 7fff:q+1), each sending everything to its default class 1.
func mqHTB(t *testing.T, ns *netnslab.NS, dev string, queues int) {
	t.Helper()
	ns.MustRun("tc", "qdisc", "add", "dev", dev, "root", "handle", "7fff:", "mq")
	for q := 1; q <= queues; q++ {
		h := strconv.Itoa(q + 1)
		ns.MustRun("tc", "qdisc", "add", "dev", dev, "parent", fmt.Sprintf("7fff:%x", q), "handle", h+":", "htb", "default", "1")
		ns.MustRun("tc", "class", "add", "dev", dev, "parent", h+":", "classid", h+":1", "htb", "rate", "10gbit", "quantum", "60000")
	}
}

var sentRE = regexp.MustCompile(`qdisc htb ([0-9a-f]+): parent 7fff:([0-9a-f]+)[^\n]*\n\s*Sent (\d+) bytes (\d+) pkt`)

// queuePackets returns the packets each per-queue HTB of dev has sent, by
// queue index (0-based).
func queuePackets(t *testing.T, ns *netnslab.NS, dev string) map[int]uint64 {
	t.Helper()
	out := ns.MustRun("tc", "-s", "qdisc", "show", "dev", dev)
	got := map[int]uint64{}
	for _, m := range sentRE.FindAllStringSubmatch(out, -1) {
		q, _ := strconv.ParseUint(m[2], 16, 32)
		n, _ := strconv.ParseUint(m[4], 10, 64)
		got[int(q)-1] = n
	}
	return got
}

// delta is after - before per queue.
func delta(before, after map[int]uint64) map[int]uint64 {
	d := map[int]uint64{}
	for q, n := range after {
		if n-before[q] > 0 {
			d[q] = n - before[q]
		}
	}
	return d
}

// handleIn returns a link handle in ns.
func handleIn(t *testing.T, ns *netnslab.NS) *vnl.Handle {
	t.Helper()
	h, err := netns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	l, err := vnl.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// newSteerer loads and attaches a steerer on dev in ns.
func newSteerer(t *testing.T, ns *netnslab.NS, dev string, matchSrc bool) *steer.Steerer {
	t.Helper()
	l := handleIn(t, ns)
	link, err := l.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	s, err := steer.New(l, link.Attrs().Index, matchSrc, 1024)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Attach(); err != nil {
		t.Fatal(err)
	}
	return s
}

// pingFrom sends count pings from ns (source src) to dst.
func pingFrom(t *testing.T, ns *netnslab.NS, src, dst netip.Addr, count int) {
	t.Helper()
	ns.MustRun("ping", "-q", "-c", strconv.Itoa(count), "-i", "0.01", "-W", "1", "-I", src.String(), dst.String())
}

// mostly returns the queue that carried at least 90 % of the packets in d,
// or -1.
func mostly(d map[int]uint64) int {
	var total uint64
	for _, n := range d {
		total += n
	}
	for q, n := range d {
		if total > 0 && n*10 >= total*9 {
			return q
		}
	}
	return -1
}

func xps(t *testing.T, ns *netnslab.NS, dev string, queue int) string {
	t.Helper()
	return strings.TrimSpace(ns.MustRun("cat", fmt.Sprintf("/sys/class/net/%s/queues/tx-%d/xps_cpus", dev, queue)))
}
