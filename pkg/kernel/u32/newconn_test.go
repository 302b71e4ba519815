package u32

import (
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/model"
)

// TestNewConnStrict runs a round trip on a plain rtnetlink socket with
// strict checking (as pkg/kernel opens its socket).
func TestNewConnStrict(t *testing.T) {
	l := newLab(t)
	l.addClasses(2)
	h, err := netns.GetFromName(l.shaper.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	conn, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: int(h), Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := NewConn(conn, l.ifindex, model.RootQdisc)
	want := []model.Filter{
		{Prefix: netip.MustParsePrefix("198.18.3.0/26"), Match: model.MatchSrc, ClassID: userClass(0)},
		{Prefix: netip.MustParsePrefix("2001:db8:7::/64"), Match: model.MatchDst, ClassID: userClass(1)},
	}
	for _, f := range want {
		if _, err := c.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	l.expectClass(netip.MustParseAddr(labSrc6), netip.MustParseAddr("2001:db8:7::1"), userClass(1))
	l.c = c
	l.expectDump(want, nil)
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	l.expectDump(nil, nil)
}
