package kernel

import (
	"fmt"

	vnl "github.com/vishvananda/netlink"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// LinkSizes returns the largest frame and the largest GSO or GRO aggregate
// that can reach the qdiscs shaping device name in k's namespace, from the
// kernel's link attributes:
//   - frame: the device's MTU plus model.FrameOverhead (the Ethernet
//     header and two VLAN tags);
//   - aggregate: the largest of the device's gso_max_size and
//     gso_ipv4_max_size (what TCP sent by the router itself builds) and of
//     gro_max_size and gro_ipv4_max_size of every device in the namespace
//     (what forwarded traffic, and uploads arriving on name, are merged
//     into). 0 where the kernel reports none of them (then the model's
//     default, 64 KiB, applies).
func (k *Kernel) LinkSizes(name string) (frame, aggregate tbf.Size, err error) {
	return linkSizes(k.link, name)
}

// LinkSizesHere is Kernel.LinkSizes in the calling thread's namespace
// (for `shaperd --check`, which opens no Kernel).
func LinkSizesHere(name string) (frame, aggregate tbf.Size, err error) {
	h, err := vnl.NewHandle()
	if err != nil {
		return 0, 0, fmt.Errorf("link sizes of %s: %w", name, err)
	}
	defer h.Close()
	return linkSizes(h, name)
}

// linkSizes is LinkSizes on handle h, from one dump of the links.
func linkSizes(h *vnl.Handle, name string) (frame, aggregate tbf.Size, err error) {
	links, err := h.LinkList()
	if err != nil {
		return 0, 0, fmt.Errorf("link sizes of %s: list links: %w", name, err)
	}
	found := false
	for _, l := range links {
		a := l.Attrs()
		if a.Name == name {
			found = true
			frame = tbf.Size(a.MTU) + model.FrameOverhead
			aggregate = max(aggregate, tbf.Size(max(a.GSOMaxSize, a.GSOIPv4MaxSize)))
		}
		aggregate = max(aggregate, tbf.Size(max(a.GROMaxSize, a.GROIPv4MaxSize)))
	}
	if !found {
		return 0, 0, fmt.Errorf("link sizes of %s: no such link", name)
	}
	return frame, aggregate, nil
}
