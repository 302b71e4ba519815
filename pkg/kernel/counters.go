package kernel

import (
	"fmt"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// Counters reads what a stats refresh needs of device, and no more: its
// root qdisc (kind, handle, counters) and, under an HTB root, its classes
// with their counters (leaf qdiscs are not read: Leaf is nil). It skips
// what Dump reads besides (the qdiscs of every device, the u32 filters,
// the redirect), which is most of a dump's cost with many users. A missing
// device wraps ErrNoDevice; a root that is not shaperd's gives a tree
// without Root.
func (k *Kernel) Counters(device string) (model.Tree, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := model.Tree{Device: device}
	ifi, err := k.ifindex(device)
	if err != nil {
		return t, fmt.Errorf("counters: %w", err)
	}
	// Strict checking makes the kernel answer for this device alone.
	qs, err := k.dump(tcwire.RTMGetQdisc, tcwire.Tcmsg{Ifindex: ifi}, nil)
	if err != nil {
		return t, fmt.Errorf("counters of %s: qdiscs: %w", device, err)
	}
	var root *object
	for i := range qs {
		if qs[i].msg.Ifindex == ifi && qs[i].msg.Parent == uint32(model.HandleRoot) {
			root = &qs[i]
		}
	}
	if root == nil || !isShaperRoot(*root) {
		return t, nil
	}
	t.Root = &model.Qdisc{Kind: model.ShaperKind(root.kind), Handle: model.Handle(root.msg.Handle), Stats: root.stats}
	if t.Root.Kind != model.ShaperHTB {
		return t, nil
	}
	if t.Classes, err = k.dumpClasses(ifi, device, nil); err != nil {
		return t, err
	}
	for i := range t.Classes {
		t.Classes[i].Leaf = nil // not read (no leaves map)
	}
	t.Sort()
	return t, nil
}
