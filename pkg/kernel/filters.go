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
	Remove() error
	// Close forgets the classifier's picture of the kernel (it dumps
	// again when next needed); it touches neither the kernel nor the socket.
	Close() error
}

// classifierFor returns the device's classifier, creating it on first use.
// It returns nil when no classifier implementation is available.
func (k *Kernel) classifierFor(ifindex uint32) (classifier, error) {
	if c, ok := k.filters[ifindex]; ok {
		return c, nil
	}
	c, err := newClassifier(k, ifindex)
	if err != nil || c == nil {
		return nil, err
	}
	k.filters[ifindex] = c
	return c, nil
}

// forgetClassifier drops the cached classifier of a device (its root qdisc,
// and with it every filter, was deleted).
func (k *Kernel) forgetClassifier(ifindex uint32) {
	delete(k.filters, ifindex)
}

// newClassifier makes the u32 classifier of a device's HTB root qdisc, on
// the Kernel's socket (requests stay serialized under k.mu).
func newClassifier(k *Kernel, ifindex uint32) (classifier, error) {
	return u32.NewConn(k.conn, ifindex, model.RootQdisc), nil
}
