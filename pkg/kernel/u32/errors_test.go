package u32

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/model"
)

// TestKernelErrorsKeepExtack: a refusal by the kernel (no qdisc 7:) keeps
// the netlink error with the kernel's extended-ack message reachable, and
// the message names the device, qdisc, prefix and class.
func TestKernelErrorsKeepExtack(t *testing.T) {
	l := newLab(t)
	c := NewConn(l.conn, l.ifindex, model.MakeHandle(7, 0))
	f := model.Filter{Prefix: netip.MustParsePrefix("198.18.1.1/32"), Match: model.MatchDst, ClassID: userClass(0)}
	_, err := c.Add(f)
	var oe *netlink.OpError
	if !errors.As(err, &oe) || oe.Message == "" {
		t.Fatalf("error %v: want a *netlink.OpError with the kernel's message", err)
	}
	for _, want := range []string{"ifindex " + strconv.Itoa(int(l.ifindex)), "qdisc 7:)", "198.18.1.1/32", "class 1:100", oe.Message} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	t.Logf("error: %v", err)
}

// TestNoConnection: without a socket every method that needs the kernel
// fails, saying so, and Close still works.
func TestNoConnection(t *testing.T) {
	c := NewConn(nil, 1, model.RootQdisc)
	if _, err := c.Ensure(); err == nil || !strings.Contains(err.Error(), "no netlink connection") {
		t.Errorf("Ensure: %v", err)
	}
	if _, err := c.Dump(); err == nil || !strings.Contains(err.Error(), "no netlink connection") {
		t.Errorf("Dump: %v", err)
	}
	if err := c.Remove(); err == nil || !strings.Contains(err.Error(), "no netlink connection") {
		t.Errorf("Remove: %v", err)
	}
	f := model.Filter{Prefix: netip.MustParsePrefix("198.18.0.1/32"), Match: model.MatchDst, ClassID: userClass(0)}
	if _, err := c.Delete(f); err == nil || !strings.Contains(err.Error(), "no netlink connection") {
		t.Errorf("Delete: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestAddRejectsBeforeTouchingTheKernel(t *testing.T) {
	c := NewConn(nil, 1, model.RootQdisc) // any kernel access would fail differently
	for _, f := range []model.Filter{
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Match: model.MatchDst, ClassID: userClass(0)},
		{Prefix: netip.MustParsePrefix("2001:db8::/80"), Match: model.MatchSrc, ClassID: userClass(0)},
		{Prefix: netip.MustParsePrefix("198.18.0.1/32"), Match: model.MatchDst, ClassID: model.MakeHandle(1, 0)},
	} {
		_, err := c.Add(f)
		if err == nil || strings.Contains(err.Error(), "no netlink connection") || !strings.Contains(err.Error(), f.Prefix.String()) {
			t.Errorf("Add(%v): %v", f.Prefix, err)
		}
	}
}
