package kernel

import (
	"errors"
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// Actual is Dump(desired.Device) for the reconcile loop: when desired is an
// ingress tree (Redirect set) whose IFB device does not exist yet, it
// returns the empty Tree{Device: desired.Device} without error, since Apply
// of the redirect creates the IFB. A missing device otherwise is an error
// wrapping ErrNoDevice.
func (k *Kernel) Actual(desired model.Tree) (model.Tree, error) {
	t, err := k.Dump(desired.Device)
	if err != nil && desired.Redirect != nil && desired.Redirect.IFB == desired.Device && errors.Is(err, ErrNoDevice) {
		return model.Tree{Device: desired.Device}, nil
	}
	return t, err
}

// Verify dumps desired.Device and returns model.Mismatches(actual,
// desired): one line per difference, none when the kernel holds desired.
func (k *Kernel) Verify(desired model.Tree) ([]string, error) {
	actual, err := k.Dump(desired.Device)
	if err != nil {
		return nil, err
	}
	return model.Mismatches(actual, desired), nil
}

// Teardown removes what shaperd installed for one managed interface:
// the root qdisc of device if it is shaperd's (htb or tbf with handle 1:;
// any other root is left alone) with its classes and filters and, when
// redirectFrom is not "" (ingress shaping: device is the IFB), the redirect
// filter on redirectFrom, its ingress qdisc if no other filter is left on
// it, and the IFB device itself. Missing objects are not errors.
func (k *Kernel) Teardown(device, redirectFrom string) error {
	var errs []error
	if err := k.teardownRoot(device); err != nil {
		errs = append(errs, err)
	}
	if redirectFrom != "" {
		if _, err := k.Apply([]model.Change{{Op: model.OpDelete, Device: redirectFrom,
			Redirect: &model.Redirect{Interface: redirectFrom, IFB: device}}}); err != nil && !errors.Is(err, ErrNoDevice) {
			errs = append(errs, err)
		}
		if err := k.DeleteIFB(device); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (k *Kernel) teardownRoot(device string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	ifi, err := k.ifindex(device)
	if errors.Is(err, ErrNoDevice) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	root, err := k.rootQdisc(ifi)
	if err != nil {
		return fmt.Errorf("teardown %s: %w", device, err)
	}
	if root == nil || !isShaperRoot(*root) {
		return nil
	}
	k.forgetClassifier(ifi)
	if isMQRoot(*root) {
		// The steering program of per-queue trees, also when another
		// process attached it.
		if err := k.forgetSteerer(ifi); err != nil {
			return fmt.Errorf("teardown %s: %w", device, err)
		}
	}
	// The bpf classifiers' pins outlive the qdiscs: remove them (and
	// their filters first), whichever classifier the device uses now: the
	// root's and every per-queue qdisc's.
	if err := k.removeBPFClassifiers(ifi); err != nil {
		return fmt.Errorf("teardown %s: %w", device, err)
	}
	// The kernel destroys the whole tree in this one request, in time
	// that grows faster than the number of classes: its deadline grows
	// with the tree (treeDestroyTime).
	classes, err := k.countClasses(ifi)
	if err != nil {
		return fmt.Errorf("teardown %s: %w", device, err)
	}
	saved := k.timeout
	k.timeout = saved + treeDestroyTime(classes)
	err = k.write(tcwire.RTMDelQdisc, 0, tcwire.Tcmsg{Ifindex: ifi, Handle: root.msg.Handle, Parent: uint32(model.HandleRoot)}, nil)
	k.timeout = saved
	if err != nil {
		return kernelError(err, device, model.OpDelete, fmt.Sprintf("root qdisc %s %s (%d classes)", model.Handle(root.msg.Handle), root.kind, classes), root.kind)
	}
	return nil
}

// countClasses counts the classes of device ifi (every per-queue tree's
// too), without decoding them.
func (k *Kernel) countClasses(ifi uint32) (int, error) {
	n := 0
	err := k.dumpEach(tcwire.RTMGetTClass, tcwire.Tcmsg{Ifindex: ifi}, nil, func(object) error {
		n++
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count classes: %w", err)
	}
	return n, nil
}

// treeDestroyTime is the time the kernel is given, beyond the request
// timeout, to destroy a tree of n classes in one request: (n/10,000)^3
// seconds, at most 30 minutes. Measured on this project's machines
// (docs/perf-class-creation.md), deleting an HTB root took 0.15 s with
// 10,000 classes and leaves and 0.99 s with 20,000 (each class's
// destruction searches lists that grow with the tree), so the bound
// covers the growth with a wide margin: 1 s at 10,000, 8 s at 20,000,
// 1,000 s at 100,000.
func treeDestroyTime(n int) time.Duration {
	x := float64(n) / 10_000
	return min(time.Duration(x*x*x*float64(time.Second)), 30*time.Minute)
}
