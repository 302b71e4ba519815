package kernel

import (
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// LinkSizes reads the frame from the device's MTU and the largest
// aggregate from its GSO and every device's GRO sizes; an unknown device
// is an error.
func TestLinkSizes(t *testing.T) {
	lab, k := labKernel(t, 1)
	lab.Router.MustRun("ip", "link", "set", "dev", netnslab.RouterLANDev, "mtu", "9000")
	lab.Router.MustRun("ip", "link", "set", "dev", netnslab.RouterWANDev, "gro_max_size", "131072")
	frame, aggregate, err := k.LinkSizes(netnslab.RouterLANDev)
	if err != nil {
		t.Fatal(err)
	}
	if frame != 9000+model.FrameOverhead || aggregate != tbf.Size(131072) {
		t.Errorf("frame %s, aggregate %s; want %d and 131072 (the wan device's GRO)", frame, aggregate, 9000+model.FrameOverhead)
	}
	if _, _, err := k.LinkSizes("no-such-dev"); err == nil {
		t.Error("an unknown device has sizes")
	}
}
