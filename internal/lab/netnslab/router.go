package netnslab

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
)

// The router lab's topology (scripts/netns-test.sh builds the same one):
//
//	lan [LANDev] ---- [RouterLAN] router [RouterWAN] ---- [WANDev] wan
//	users 198.18.0.10+i/24       198.18.0.1/24   198.19.0.1/24     198.19.0.2/24
//	      2001:db8:1::10+i/64    2001:db8:1::1   2001:db8:2::1     2001:db8:2::2
const (
	RouterLANDev = "r-lan" // the router's lan-facing device: shaperd shapes here
	RouterWANDev = "r-wan" // the router's wan-facing device
	LANDev       = "l-eth" // the users' device in the lan namespace
	WANDev       = "w-eth" // the internet's device in the wan namespace
	RouterIFB    = "r-ifb" // a suggested IFB name for ingress shaping in the router
)

// RouterLabOptions configure NewRouterLab.
type RouterLabOptions struct {
	// Users is the number of user hosts on the lan; each gets one IPv4 and one
	// IPv6 address on LANDev. 0 means 3.
	Users int
	// LANQueues, when above 1, gives the router's lan device (and its peer)
	// that many transmit and receive queues, for per-queue trees under mq.
	LANQueues int
	// Prefix, when set, goes before each namespace's role ("sd-PREFIXrouter-..."),
	// so that a long-running lab (the soak) is told apart from the tests'
	// labs in `ip netns list` and its names cannot clash with theirs.
	Prefix string
}

// RouterLab is a router namespace forwarding between a lan and a wan namespace.
type RouterLab struct {
	Router, LAN, WAN *NS
	// RouterLAN and RouterWAN are the router's devices (RouterLANDev, RouterWANDev).
	RouterLAN, RouterWAN string
	// Users4[i] and Users6[i] are user i's addresses in the lan namespace.
	Users4, Users6 []netip.Addr
	// WAN4 and WAN6 are the wan host's addresses (the far end of every test).
	WAN4, WAN6 netip.Addr
	t          testing.TB
}

// NewRouterLab builds the lab, with forwarding on in the router and routes so
// every user address reaches the wan addresses and back. Everything is
// removed on test cleanup.
func NewRouterLab(t testing.TB, o RouterLabOptions) *RouterLab {
	t.Helper()
	if o.Users <= 0 {
		o.Users = 3
	}
	if o.Users > 200 {
		t.Fatalf("netnslab: at most 200 users, not %d", o.Users)
	}
	l := &RouterLab{
		Router: NewNS(t, o.Prefix+"router"), LAN: NewNS(t, o.Prefix+"lan"), WAN: NewNS(t, o.Prefix+"wan"),
		RouterLAN: RouterLANDev, RouterWAN: RouterWANDev,
		WAN4: netip.MustParseAddr("198.19.0.2"), WAN6: netip.MustParseAddr("2001:db8:2::2"),
		t: t,
	}
	if o.LANQueues > 1 {
		VethQueues(t, l.Router, RouterLANDev, l.LAN, LANDev, o.LANQueues)
	} else {
		Veth(t, l.Router, RouterLANDev, l.LAN, LANDev)
	}
	Veth(t, l.Router, RouterWANDev, l.WAN, WANDev)
	l.Router.Forwarding()
	l.Router.AddAddr(RouterLANDev, "198.18.0.1/24")
	l.Router.AddAddr(RouterLANDev, "2001:db8:1::1/64")
	l.Router.AddAddr(RouterWANDev, "198.19.0.1/24")
	l.Router.AddAddr(RouterWANDev, "2001:db8:2::1/64")
	l.WAN.AddAddr(WANDev, "198.19.0.2/24")
	l.WAN.AddAddr(WANDev, "2001:db8:2::2/64")
	l.WAN.AddRoute("198.18.0.0/24", "198.19.0.1")
	l.WAN.AddRoute("2001:db8:1::/64", "2001:db8:2::1")
	for i := 0; i < o.Users; i++ {
		a4 := netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)})
		a6 := netip.MustParseAddr(fmt.Sprintf("2001:db8:1::%x", 0x10+i))
		l.LAN.AddAddr(LANDev, a4.String()+"/24")
		l.LAN.AddAddr(LANDev, a6.String()+"/64")
		l.Users4 = append(l.Users4, a4)
		l.Users6 = append(l.Users6, a6)
	}
	l.LAN.AddRoute("default", "198.18.0.1")
	l.LAN.AddRoute("default", "2001:db8:1::1")
	return l
}

// Direction of a measured flow.
type Direction int

// Directions.
const (
	Download Direction = iota // wan -> user: leaves the router through RouterLAN (egress)
	Upload                    // user -> wan: arrives at the router on RouterLAN (ingress)
)

// Flow is one measurement: a TCP transfer between User (a lan address) and
// the wan host of the same address family.
type Flow struct {
	User    netip.Addr
	Dir     Direction
	Streams int // parallel TCP streams; 0 means 1
}

// Measure runs all flows at once for seconds (plus one omitted second), and
// returns each flow's receiver-side throughput in bits per second, in the
// order given. It fails the test if any transfer fails.
func (l *RouterLab) Measure(t testing.TB, seconds int, flows ...Flow) []float64 {
	t.Helper()
	type run struct {
		client  *NS
		src     netip.Addr
		server  *Server
		streams int
	}
	runs := make([]run, len(flows))
	for i, f := range flows {
		wan := l.WAN4
		if f.User.Is6() {
			wan = l.WAN6
		}
		switch f.Dir {
		case Download:
			runs[i] = run{l.WAN, wan, StartServer(t, l.LAN, f.User), f.Streams}
		case Upload:
			runs[i] = run{l.LAN, f.User, StartServer(t, l.WAN, wan), f.Streams}
		default:
			t.Fatalf("netnslab: unknown direction %d", f.Dir)
		}
	}
	rates := make([]float64, len(flows))
	errs := make([]error, len(flows))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rates[i], errs[i] = RunClient(r.client, r.src, r.server, ClientOptions{Seconds: seconds, Streams: r.streams})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return rates
}

// Download measures one download (wan -> user) for seconds; bits per second.
func (l *RouterLab) Download(t testing.TB, user netip.Addr, seconds int) float64 {
	t.Helper()
	return l.Measure(t, seconds, Flow{User: user, Dir: Download})[0]
}

// Upload measures one upload (user -> wan) for seconds; bits per second.
func (l *RouterLab) Upload(t testing.TB, user netip.Addr, seconds int) float64 {
	t.Helper()
	return l.Measure(t, seconds, Flow{User: user, Dir: Upload})[0]
}
