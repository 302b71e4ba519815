package kernel

import (
	"github.com/shaperd/shaperd/pkg/kernel/u32"
	"github.com/shaperd/shaperd/pkg/model"
)

// classifier is the per-device u32 classifier (pkg/kernel/u32) that holds
// every user filter under the HTB root qdisc.
type classifier interface {
	Ensure() (writes int, err error)
	Add(f model.Filter) (writes int, err error)
	Delete(f model.Filter) (writes int, err error)
	Dump() ([]model.Filter, error)
	// Foreign describes the filters of the last Dump that shaperd did not
	// make.
	Foreign() []string
	Remove() error
	// Close forgets the classifier's picture of the kernel (it dumps
	// again when next needed); it touches neither the kernel nor the socket.
	Close() error
}

// classifierKey names the classifier under one HTB qdisc of a device: the
// root (model.RootQdisc) or a queue's under mq (model.QueueHandle).
type classifierKey struct {
	ifindex uint32
	qdisc   model.Handle
}

// classifierFor returns the device's u32 classifier under the single
// tree's root qdisc, creating it on first use on the Kernel's socket
// (requests stay serialized under k.mu).
func (k *Kernel) classifierFor(ifindex uint32) classifier {
	return k.classifierUnder(ifindex, model.RootQdisc)
}

// classifierUnder returns the u32 classifier under the HTB qdisc qdisc of
// the device (the root, or one queue's under mq).
func (k *Kernel) classifierUnder(ifindex uint32, qdisc model.Handle) classifier {
	key := classifierKey{ifindex, qdisc}
	if c, ok := k.filters[key]; ok {
		return c
	}
	c := u32.NewConn(k.conn, ifindex, qdisc)
	k.filters[key] = c
	return c
}

// filterQdisc is the HTB qdisc whose classifier holds filter f: the one
// its class lives in.
func filterQdisc(f *model.Filter) model.Handle {
	return model.MakeHandle(f.ClassID.Major(), 0)
}

// forgetClassifier drops the cached classifiers of a device (its root
// qdisc, and with it every filter, was deleted).
func (k *Kernel) forgetClassifier(ifindex uint32) {
	for key := range k.filters {
		if key.ifindex == ifindex {
			delete(k.filters, key)
		}
	}
}
