package u32

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/internal/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
)

// lab is a shaper namespace whose device dev (a veth to a peer namespace)
// has an HTB root 1: with root class 1:1, default class 1:2 and user
// classes made by addClasses. Traffic sent from the shaper namespace to
// 198.18.0.0/15 and 2001:db8::/32 leaves through dev towards the peer.
type lab struct {
	t       testing.TB
	shaper  *netnslab.NS
	peer    *netnslab.NS
	dev     string
	ifindex uint32
	conn    *netlink.Conn // rtnetlink in the shaper namespace
	c       *Classifier
}

const (
	labSrc4 = "198.19.255.1"
	labGw4  = "198.19.255.2"
	labSrc6 = "2001:db8:ffff::1"
	labGw6  = "2001:db8:ffff::2"
)

func newLab(t testing.TB) *lab {
	t.Helper()
	netnslab.Require(t)
	l := &lab{t: t, dev: "sh0"}
	l.shaper = netnslab.NewNS(t, "u32s")
	l.peer = netnslab.NewNS(t, "u32p")
	netnslab.Veth(t, l.shaper, l.dev, l.peer, "pe0")
	l.shaper.AddAddr(l.dev, labSrc4+"/30")
	l.peer.AddAddr("pe0", labGw4+"/30")
	l.shaper.AddAddr(l.dev, labSrc6+"/64")
	l.peer.AddAddr("pe0", labGw6+"/64")
	l.shaper.AddRoute("198.18.0.0/15", labGw4)
	l.shaper.AddRoute("2001:db8::/32", labGw6)
	// Static neighbours: test packets are never held back for ARP/ND, and
	// no ARP/ND traffic runs through the shaper during a test.
	mac := strings.TrimSpace(l.peer.MustRun("cat", "/sys/class/net/pe0/address"))
	l.shaper.MustRun("ip", "neigh", "replace", labGw4, "lladdr", mac, "dev", l.dev, "nud", "permanent")
	l.shaper.MustRun("ip", "neigh", "replace", labGw6, "lladdr", mac, "dev", l.dev, "nud", "permanent")
	l.shaper.MustRun("tc", "qdisc", "add", "dev", l.dev, "root", "handle", "1:", "htb", "default", "2")
	l.shaper.MustRun("tc", "class", "add", "dev", l.dev, "parent", "1:", "classid", "1:1", "htb", "rate", "20gbit", "quantum", "200000")
	l.shaper.MustRun("tc", "class", "add", "dev", l.dev, "parent", "1:1", "classid", "1:2", "htb", "rate", "1gbit", "ceil", "20gbit", "quantum", "200000")
	idx, err := strconv.ParseUint(strings.TrimSpace(l.shaper.MustRun("cat", "/sys/class/net/"+l.dev+"/ifindex")), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	l.ifindex = uint32(idx)
	h, err := netns.GetFromName(l.shaper.Name)
	if err != nil {
		t.Fatalf("open netns %s: %v", l.shaper.Name, err)
	}
	t.Cleanup(func() { h.Close() })
	l.conn, err = netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: int(h)})
	if err != nil {
		t.Fatalf("netlink in netns %s: %v", l.shaper.Name, err)
	}
	t.Cleanup(func() { l.conn.Close() })
	l.c = NewConn(l.conn, l.ifindex, model.RootQdisc)
	return l
}

// userClass is the class id of user i.
func userClass(i int) model.Handle { return model.MakeHandle(1, model.FirstUserMinor+uint16(i)) }

// addClasses makes user classes 0..n-1 with one tc -batch.
func (l *lab) addClasses(n int) {
	l.t.Helper()
	f, err := os.CreateTemp(l.t.TempDir(), "classes")
	if err != nil {
		l.t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, "class add dev %s parent 1:1 classid %v htb rate 1mbit ceil 20gbit quantum 200000\n", l.dev, userClass(i))
	}
	if err := w.Flush(); err != nil {
		l.t.Fatal(err)
	}
	f.Close()
	l.shaper.MustRun("tc", "-batch", f.Name())
}

var classStatRE = regexp.MustCompile(`(?m)^class htb (\S+) .*\n\s+Sent (\d+) bytes (\d+) pkt`)

// packets reads every class's packet counter.
func (l *lab) packets() map[string]uint64 {
	l.t.Helper()
	out := l.shaper.MustRun("tc", "-s", "class", "show", "dev", l.dev)
	m := map[string]uint64{}
	for _, s := range classStatRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.ParseUint(s[3], 10, 64)
		m[s[1]] = n
	}
	if len(m) == 0 {
		l.t.Fatalf("no class counters in:\n%s", out)
	}
	return m
}

// send sends n UDP datagrams from src to dst (port 9) out of the shaper
// namespace. src must be one of its addresses.
func (l *lab) send(src, dst netip.Addr, n int) {
	l.t.Helper()
	conn, err := l.socket(src)
	if err != nil {
		l.t.Fatalf("socket on %v in %s: %v", src, l.shaper.Name, err)
	}
	defer conn.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9))
	for range n {
		if _, err := conn.WriteTo([]byte("shaperd u32 test"), to); err != nil {
			l.t.Fatalf("send %v -> %v: %v", src, dst, err)
		}
	}
}

// socket opens a UDP socket bound to src inside the shaper namespace.
func (l *lab) socket(src netip.Addr) (net.PacketConn, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return nil, err
	}
	defer orig.Close()
	h, err := netns.GetFromName(l.shaper.Name)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		return nil, err
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("cannot return to the original netns: %v", err)) // the thread would stay in the lab
		}
	}()
	network := "udp4"
	if src.Is6() {
		network = "udp6"
	}
	return net.ListenPacket(network, netip.AddrPortFrom(src, 0).String())
}

// expectClass sends n packets from src to dst and checks that exactly class
// want counted them (want 1:2, the default, for unclassified traffic).
func (l *lab) expectClass(src, dst netip.Addr, want model.Handle) {
	l.t.Helper()
	const n = 3
	before := l.packets()
	l.send(src, dst, n)
	after := l.packets()
	// The default class also carries the namespace's own background traffic
	// (IPv6 MLD, router solicitations), so it may count more; user classes
	// must count exactly the test packets.
	def := model.DefaultClass.String()
	for cls, a := range after {
		d := a - before[cls]
		switch {
		case cls == want.String() && (d < n || d > n && cls != def):
			l.t.Errorf("%v -> %v: class %s counted %d packets, want %d", src, dst, cls, d, n)
		case cls != want.String() && cls != "1:1" && cls != def && d != 0:
			l.t.Errorf("%v -> %v: class %s counted %d packets, want them in %v", src, dst, cls, d, want)
		}
	}
	if _, ok := after[want.String()]; !ok {
		l.t.Errorf("class %v does not exist", want)
	}
}
