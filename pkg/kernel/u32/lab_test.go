package u32

import (
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/kernel/internal/clstest"
	"github.com/shaperd/shaperd/pkg/model"
)

// lab is the shared classifier lab (clstest.Lab) with the u32 Classifier
// of its device's HTB root.
type lab struct {
	*clstest.Lab
	t       testing.TB
	shaper  *netnslab.NS
	peer    *netnslab.NS
	dev     string
	ifindex uint32
	conn    *netlink.Conn
	c       *Classifier
}

const (
	labSrc4 = clstest.Src4
	labSrc6 = clstest.Src6
)

func newLab(t testing.TB) *lab {
	t.Helper()
	cl := clstest.NewLab(t, "u32")
	return &lab{Lab: cl, t: t, shaper: cl.Shaper, peer: cl.Peer, dev: cl.Dev, ifindex: cl.Ifindex, conn: cl.Conn,
		c: NewConn(cl.Conn, cl.Ifindex, model.RootQdisc)}
}

// userClass is the class id of user i.
func userClass(i int) model.Handle { return clstest.UserClass(i) }

func (l *lab) addClasses(n int)           { l.t.Helper(); l.AddClasses(n) }
func (l *lab) packets() map[string]uint64 { l.t.Helper(); return l.Packets() }
func (l *lab) expectClass(src, dst netip.Addr, want model.Handle) {
	l.t.Helper()
	l.ExpectClass(src, dst, want)
}
