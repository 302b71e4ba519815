package kernel

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel/bpfcls"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// bpfTestPinRoot is a pin root whose parent, a fresh directory, becomes a
// bpffs mount of the test's own when a classifier first needs it; the
// mount is removed on cleanup.
func bpfTestPinRoot(t *testing.T) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "bpf")
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	return filepath.Join(mnt, "shaperd")
}

// expectQueueFilters checks the filters under each of the queues' HTB
// qdiscs on the lab's lan device: some of kind want, none of kind not.
func expectQueueFilters(t *testing.T, lab *netnslab.RouterLab, queues int, want, not string) {
	t.Helper()
	for q := range queues {
		out := lab.Router.MustRun("tc", "filter", "show", "dev", netnslab.RouterLANDev, "parent", model.QueueHandle(q).String())
		if !strings.Contains(out, " "+want+" ") || strings.Contains(out, " "+not+" ") {
			t.Errorf("queue %d (qdisc %s): want %s filters and no %s:\n%.1500s", q, model.QueueHandle(q), want, not, out)
		}
	}
}

// filterProgIDs returns the program ids of the cls_bpf filters in tc's
// listing of the lan device's filters under parent (one per line that
// says " id N").
func filterProgIDs(lab *netnslab.RouterLab, args ...string) []string {
	out := lab.Router.MustRun(append([]string{"tc", "filter", "show", "dev", netnslab.RouterLANDev}, args...)...)
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		if _, id, ok := strings.Cut(line, " id "); ok {
			ids = append(ids, strings.Fields(id)[0])
		}
	}
	return ids
}

// queueProgIDs is filterProgIDs of every queue's HTB qdisc and of the
// steering filter at clsact egress, in that order.
func queueProgIDs(lab *netnslab.RouterLab, queues int) []string {
	var ids []string
	for q := range queues {
		ids = append(ids, filterProgIDs(lab, "parent", model.QueueHandle(q).String())...)
	}
	return append(ids, filterProgIDs(lab, "egress")...)
}

// mqProbe is a destination on the lan side and the class that must count
// the packets the wan host sends to it; model.DefaultClass stands for
// the default class of whichever queue the kernel's flow hash picks.
type mqProbe struct {
	dst   netip.Addr
	class model.Handle
}

// checkProbes sends 20 UDP datagrams from the wan host to each probe's
// destination and checks that its class counted them.
func checkProbes(t *testing.T, lab *netnslab.RouterLab, k *Kernel, what string, probes []mqProbe) {
	t.Helper()
	count := func(m map[model.Handle]uint64, class model.Handle) uint64 {
		if class != model.DefaultClass {
			return m[class]
		}
		var n uint64
		for h, p := range m {
			if h.Minor() == model.DefaultClass.Minor() {
				n += p
			}
		}
		return n
	}
	for _, p := range probes {
		before := count(classPackets(t, k, netnslab.RouterLANDev), p.class)
		for range 20 {
			sendUDP(t, lab, netip.AddrPortFrom(p.dst, 9), 100)
		}
		var got uint64
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if got = count(classPackets(t, k, netnslab.RouterLANDev), p.class) - before; got >= 20 {
				break
			}
		}
		if got < 20 {
			t.Errorf("%s: %s: class %s counted %d of 20 packets", what, p.dst, p.class, got)
		}
	}
}

// fakeHosts makes addrs reachable from the wan host through the router's
// lan device without a host answering (static neighbours pointing at the
// lan host, which drops what is not addressed to it): their packets pass
// the shaper like any user's.
func fakeHosts(t *testing.T, lab *netnslab.RouterLab, addrs ...string) {
	t.Helper()
	mac := strings.TrimSpace(lab.LAN.MustRun("cat", "/sys/class/net/"+netnslab.LANDev+"/address"))
	for _, r := range []struct{ dst, gw string }{{"198.18.1.0/24", "198.19.0.1"}, {"2001:db8:9::/64", "2001:db8:2::1"}} {
		lab.Router.MustRun("ip", "route", "replace", r.dst, "dev", netnslab.RouterLANDev)
		lab.WAN.AddRoute(r.dst, r.gw)
	}
	for _, a := range addrs {
		lab.Router.MustRun("ip", "neigh", "replace", a, "lladdr", mac, "dev", netnslab.RouterLANDev, "nud", "permanent")
	}
}

// Per-queue trees with classifier = "bpf": every queue's HTB gets a
// cls_bpf classifier of its own (no u32), and the steering program and
// the queue's maps together classify IPv4 and IPv6 hosts (/32, /128), a
// /24 and a /64 that hold other users' hosts (longest prefix wins, in the
// steering maps and the queue's maps alike), and addresses no user has
// (the default class). Re-apply writes nothing; a user's new or removed
// address is one map update; entries changed, deleted or added behind
// shaperd's back (in a queue's maps and the steering maps) are repaired
// by Dump, Diff and Apply; a new process adopts everything (classes,
// per-queue programs and maps through their pins, the steering program)
// with zero writes and no filter replaced; switching to u32 and back
// removes the other kind's filters; Teardown leaves no pin.
func TestMQBPFClassify(t *testing.T) {
	const queues = 4
	root := bpfTestPinRoot(t)
	lab, k := mqLabPinned(t, 4, queues, root)
	dev := netnslab.RouterLANDev
	k.SetClassifier(dev, ClassifierBPF)
	fakeHosts(t, lab, "198.18.0.200", "198.18.0.201", "2001:db8:1::abcd", "198.18.1.5", "2001:db8:9::5")
	ids := model.NewAssignment()
	tg := mqTargets(lab, queues, 400*tbf.Mbit, 10*tbf.Mbit)
	// u2 holds the whole lan: 198.18.0.0/24 and 2001:db8:1::/64, which
	// cover every other user's /32 and /128.
	tg.Users[2].Prefixes = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24"), netip.MustParsePrefix("2001:db8:1::/64")}
	desired, res := reconcile(t, k, tg, ids)
	t.Logf("cold apply: %d writes", res.Writes)
	expectQueueFilters(t, lab, queues, "bpf", "u32")
	used := map[int]bool{}
	for _, u := range tg.Users {
		q, _ := ids.Queue(u.Name)
		used[q] = true
	}
	if len(used) < 3 {
		t.Errorf("4 users on %d of %d queues", len(used), queues)
	}
	if res, err := apply(t, k, desired); err != nil || res.Writes != 0 {
		t.Fatalf("re-apply over an unchanged tree: %d writes, %v", res.Writes, err)
	}
	for _, a := range append(slices.Clone(lab.Users4), lab.Users6...) { // resolve the lan hosts' neighbours first
		_, _ = lab.WAN.Run("ping", "-q", "-c", "1", "-W", "1", a.String())
	}
	probes := func(tree model.Tree) []mqProbe {
		var out []mqProbe
		for i, name := range []string{"u0", "u1", "u2", "u3"} {
			c := classOf(t, tree, name)
			out = append(out, mqProbe{lab.Users4[i], c}, mqProbe{lab.Users6[i], c})
		}
		u2 := classOf(t, tree, "u2")
		return append(out,
			mqProbe{netip.MustParseAddr("198.18.0.200"), u2},     // in u2's /24 only
			mqProbe{netip.MustParseAddr("2001:db8:1::abcd"), u2}, // in u2's /64 only
			mqProbe{netip.MustParseAddr("198.18.1.5"), model.DefaultClass},
			mqProbe{netip.MustParseAddr("2001:db8:9::5"), model.DefaultClass})
	}
	checkProbes(t, lab, k, "first apply", probes(desired))
	progs := queueProgIDs(lab, queues)
	if len(progs) != queues+1 {
		t.Fatalf("program ids %v: want one per queue and the steering one", progs)
	}

	// u0's new /32 inside u2's /24: one map update in u0's queue (the
	// steering map update is not a tc write either); removing it again:
	// one more.
	extra := netip.MustParsePrefix("198.18.0.201/32")
	tg.Users[0].Prefixes = append(tg.Users[0].Prefixes, extra)
	withExtra, err := model.Build(tg, ids)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := apply(t, k, withExtra); err != nil || res.Writes != 1 {
		t.Errorf("one new address: %d writes, %v; want 1 (a map update)", res.Writes, err)
	}
	verify(t, k, withExtra)
	checkProbes(t, lab, k, "u0's new address", []mqProbe{{extra.Addr(), classOf(t, withExtra, "u0")}})
	tg.Users[0].Prefixes = slices.DeleteFunc(tg.Users[0].Prefixes, func(p netip.Prefix) bool { return p == extra })
	if res, err := apply(t, k, desired); err != nil || res.Writes != 1 {
		t.Errorf("address removed: %d writes, %v; want 1 (a map delete)", res.Writes, err)
	}
	verify(t, k, desired)
	checkProbes(t, lab, k, "u0's address removed", []mqProbe{{extra.Addr(), classOf(t, desired, "u2")}})
	if now := queueProgIDs(lab, queues); !slices.Equal(now, progs) {
		t.Errorf("program ids %v -> %v: a filter was replaced", progs, now)
	}

	// Drift, written by another process: u0's entry points at another
	// class, u3's IPv6 entry is gone, a stray entry is added, and u1's
	// steering entry points at the wrong queue.
	ifi, err := k.ifindex(dev)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(Options{NetNS: lab.Router.Name, BPFPinRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetClassifier(dev, ClassifierBPF)
	u0 := classOf(t, desired, "u0")
	u0Filter := model.Filter{Prefix: netip.PrefixFrom(lab.Users4[0], 32), Match: model.MatchDst, ClassID: model.MakeHandle(u0.Major(), model.DefaultClass.Minor())}
	u3 := classOf(t, desired, "u3")
	stray := model.Filter{Prefix: netip.MustParsePrefix("198.18.0.128/25"), Match: model.MatchDst, ClassID: u3}
	for _, d := range []struct {
		f   model.Filter
		del bool
	}{{u0Filter, false}, {model.Filter{Prefix: netip.PrefixFrom(lab.Users6[3], 128), Match: model.MatchDst, ClassID: u3}, true}, {stray, false}} {
		c := other.classifierUnder(ifi, dev, filterQdisc(&d.f))
		var err error
		if d.del {
			_, err = c.Delete(d.f)
		} else {
			_, err = c.Add(d.f)
		}
		if err != nil {
			t.Fatalf("drift %+v: %v", d.f, err)
		}
	}
	s, created, err := other.steererFor(ifi, false)
	if err != nil || created {
		t.Fatalf("another process's steering: created %v, %v; want the pinned maps", created, err)
	}
	q1, _ := ids.Queue("u1")
	if err := s.Set(netip.PrefixFrom(lab.Users4[1], 32), uint32((q1+1)%queues)); err != nil {
		t.Fatal(err)
	}
	if mm, err := k.Verify(desired); err != nil || len(mm) == 0 {
		t.Errorf("Verify after drift: %v, %v; want mismatches", mm, err)
	} else {
		t.Logf("drift seen: %s", strings.Join(mm, "; "))
	}
	res, err = apply(t, k, desired)
	if err != nil || res.Writes == 0 {
		t.Errorf("repair: %d writes, %v", res.Writes, err)
	}
	verify(t, k, desired)
	if res, err := apply(t, k, desired); err != nil || res.Writes != 0 {
		t.Errorf("re-apply after the repair: %d writes, %v", res.Writes, err)
	}
	checkProbes(t, lab, k, "after the repair", probes(desired))

	// A new process adopts everything: no write, no filter replaced.
	k2, err := Open(Options{NetNS: lab.Router.Name, BPFPinRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	k2.SetClassifier(dev, ClassifierBPF)
	if res, err := apply(t, k2, desired); err != nil || res.Writes != 0 {
		t.Errorf("adoption by a new process: %d writes, %v", res.Writes, err)
	}
	verify(t, k2, desired)
	if now := queueProgIDs(lab, queues); !slices.Equal(now, progs) {
		t.Errorf("program ids %v -> %v after adoption: a filter was replaced", progs, now)
	}
	_ = k.Close()
	checkProbes(t, lab, k2, "after adoption", probes(desired))

	// u32 and back: each switch removes the other kind's filters.
	k2.SetClassifier(dev, ClassifierU32)
	reconcile(t, k2, tg, ids)
	expectQueueFilters(t, lab, queues, "u32", "bpf")
	checkProbes(t, lab, k2, "switched to u32", probes(desired))
	for _, f := range pinFiles(root) {
		if strings.Contains(f, "/qdisc-") {
			t.Errorf("bpf classifier pin %s left after the switch to u32", f)
		}
	}
	k2.SetClassifier(dev, ClassifierBPF)
	reconcile(t, k2, tg, ids)
	expectQueueFilters(t, lab, queues, "bpf", "u32")
	checkProbes(t, lab, k2, "switched back to bpf", probes(desired))

	// Teardown (another process) leaves no filter and no pin.
	k3, err := Open(Options{NetNS: lab.Router.Name, BPFPinRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	defer k3.Close()
	if err := k3.Teardown(dev, ""); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	if out := lab.Router.MustRun("tc", "filter", "show", "dev", dev, "egress"); out != "" {
		t.Errorf("after teardown the steering filter is still there:\n%s", out)
	}
	if left := pinFiles(root); len(left) != 0 {
		t.Errorf("pins left after Teardown: %v", left)
	}
}

// Changing queues with classifier = "bpf" (one tree -> 4 queues -> one
// tree) converges in one apply each time and classifies every user in its
// new class: a new root starts with empty maps (the old root's pinned
// maps, whose entries name classes that are gone, are removed with the
// steering); the last single tree leaves no steering filter and no pins
// but its own.
func TestMQBPFQueuesChange(t *testing.T) {
	const queues = 4
	root := bpfTestPinRoot(t)
	lab, k := mqLabPinned(t, 4, queues, root)
	dev := netnslab.RouterLANDev
	k.SetClassifier(dev, ClassifierBPF)
	for _, a := range append(slices.Clone(lab.Users4), lab.Users6...) {
		_, _ = lab.WAN.Run("ping", "-q", "-c", "1", "-W", "1", a.String())
	}
	for _, n := range []int{1, queues, 1} {
		tg := mqTargets(lab, n, 400*tbf.Mbit, 10*tbf.Mbit)
		desired, res := reconcile(t, k, tg, model.NewAssignment())
		t.Logf("queues = %d: %d writes", n, res.Writes)
		var probes []mqProbe
		for i, u := range tg.Users {
			c := classOf(t, desired, u.Name)
			probes = append(probes, mqProbe{lab.Users4[i], c}, mqProbe{lab.Users6[i], c})
		}
		checkProbes(t, lab, k, "queues = "+strconv.Itoa(n), probes)
	}
	if out := lab.Router.MustRun("tc", "filter", "show", "dev", dev, "egress"); out != "" {
		t.Errorf("one tree again, and the steering filter is still there:\n%s", out)
	}
	ino := inodeOf(t, lab.Router.Name)
	ifi, err := k.ifindex(dev)
	if err != nil {
		t.Fatal(err)
	}
	own := strings.TrimPrefix(bpfcls.PinDir(root, ino, ifi, model.RootQdisc), root)
	for _, f := range pinFiles(root) {
		if filepath.Dir(f) != own {
			t.Errorf("pin %s left from the per-queue trees (the single tree's are in %s)", f, own)
		}
	}
}
