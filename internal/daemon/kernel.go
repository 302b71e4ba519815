package daemon

import (
	"context"

	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// Kernel is what the daemon needs from the kernel's traffic control.
// *kernel.Kernel implements it (made by kernel.Open); unit tests use a fake
// built on modeltest.MemKernel.
type Kernel interface {
	// Actual dumps desired.Device with counters; an ingress tree whose IFB
	// does not exist yet is empty, not an error. A missing device wraps
	// kernel.ErrNoDevice.
	Actual(desired model.Tree) (model.Tree, error)
	// Dump returns the actual tree of device; a missing device wraps
	// kernel.ErrNoDevice.
	Dump(device string) (model.Tree, error)
	// Counters returns device's root qdisc and classes with their
	// counters, without filters (cheaper than Dump); a missing device
	// wraps kernel.ErrNoDevice.
	Counters(device string) (model.Tree, error)
	// Apply performs changes in order; Result counts the kernel writes
	// done, also when it fails (a *kernel.Error names the refusal).
	Apply(changes []model.Change) (kernel.Result, error)
	// Verify returns the differences between the kernel and desired.
	Verify(desired model.Tree) ([]string, error)
	// LinkExists reports whether the network device exists.
	LinkExists(name string) (bool, error)
	// WatchLinks reports link changes until ctx is done, then closes the
	// channel.
	WatchLinks(ctx context.Context) (<-chan kernel.LinkEvent, error)
	// WatchTC reports qdisc, class and filter changes made by others (not
	// through this Kernel) until ctx is done, then closes the channel.
	WatchTC(ctx context.Context) (<-chan kernel.TCEvent, error)
	// Teardown removes what shaperd installed on device (and, for ingress,
	// the redirect on redirectFrom and the IFB device).
	Teardown(device, redirectFrom string) error
	// Close releases the kernel connection.
	Close() error
}

var _ Kernel = (*kernel.Kernel)(nil)
