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

// classifierFor returns the device's u32 classifier, creating it on first
// use on the Kernel's socket (requests stay serialized under k.mu).
func (k *Kernel) classifierFor(ifindex uint32) classifier {
	if c, ok := k.filters[ifindex]; ok {
		return c
	}
	c := u32.NewConn(k.conn, ifindex, model.RootQdisc)
	k.filters[ifindex] = c
	return c
}

// forgetClassifier drops the cached classifier of a device (its root qdisc,
// and with it every filter, was deleted).
func (k *Kernel) forgetClassifier(ifindex uint32) {
	delete(k.filters, ifindex)
}
