package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	vnl "github.com/vishvananda/netlink"

	"github.com/shaperd/shaperd/pkg/kernel/bpfcls"
	"github.com/shaperd/shaperd/pkg/kernel/filtercheck"
	"github.com/shaperd/shaperd/pkg/kernel/u32"
	"github.com/shaperd/shaperd/pkg/model"
)

// classifier is a device's filters under the HTB root qdisc: the u32
// classifier (pkg/kernel/u32) or the eBPF one (pkg/kernel/bpfcls).
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
	// again when needed) and releases what it holds open (the bpf
	// classifier's map and program descriptors); it touches neither the
	// kernel nor the socket.
	Close() error
}

// Classifier kinds (SetClassifier).
const (
	ClassifierU32 = filtercheck.ClassifierU32
	ClassifierBPF = filtercheck.ClassifierBPF
)

// SetClassifier chooses the classifier of device's HTB root, or of each
// per-queue HTB under an mq root (each has its own): ClassifierBPF or
// ClassifierU32. Without a choice, an HTB qdisc that has shaperd's cls_bpf
// filter uses the bpf classifier and any other the u32 one (so that tools
// and tests that only read see what is there). Switching makes the next
// Apply that writes a filter under a qdisc of the device remove the other
// classifier's filters there (the bpf classifier deletes the u32
// priorities; the u32 classifier's Ensure is preceded by the bpf
// classifier's Remove).
func (k *Kernel) SetClassifier(device, kind string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.clsKind == nil {
		k.clsKind = map[string]string{}
	}
	if k.clsKind[device] == kind {
		return
	}
	k.clsKind[device] = kind
	// The cached classifier of that device (by index) is of the old kind.
	if ifi, err := k.ifindex(device); err == nil {
		k.forgetClassifier(ifi)
	}
}

// classifierKind is device's classifier kind: the one chosen, or the
// one cached for ifindex (found installed).
func (k *Kernel) classifierKind(device string) string {
	if kind := k.clsKind[device]; kind != "" {
		return kind
	}
	if ifi, err := k.ifindex(device); err == nil {
		if _, ok := k.filters[ifi].(*bpfcls.Classifier); ok {
			return ClassifierBPF
		}
	}
	return ClassifierU32
}

// classifierFor returns the device's classifier, creating it on first use
// on the Kernel's socket (requests stay serialized under k.mu).
func (k *Kernel) classifierFor(ifindex uint32, device string) classifier {
	if c, ok := k.filters[ifindex]; ok {
		return c
	}
	c := k.newClassifier(ifindex, device, model.RootQdisc)
	k.filters[ifindex] = c
	return c
}

// bpfClassifier is the bpf classifier of device ifindex's HTB root.
func (k *Kernel) bpfClassifier(ifindex uint32) *bpfcls.Classifier {
	return k.bpfClassifierUnder(ifindex, model.RootQdisc)
}

// bpfClassifierUnder is the bpf classifier under HTB qdisc qdisc of device
// ifindex (the single tree's root 1:, or one queue's HTB under mq), with
// maps and program of its own pinned in bpfcls.PinDir (qdisc-MAJOR). The
// first one a Kernel makes also removes the pins of devices that no longer
// exist in its namespace (pruneBPFPins).
func (k *Kernel) bpfClassifierUnder(ifindex uint32, qdisc model.Handle) *bpfcls.Classifier {
	if !k.pinsPruned {
		k.pinsPruned = true
		k.pruneBPFPins()
	}
	return bpfcls.NewConn(k.conn, ifindex, qdisc, bpfcls.Options{
		PinRoot:  k.bpfPinRoot,
		NetNS:    k.netnsInode(),
		Replaces: []uint16{u32.PrioIPv4Dst, u32.PrioIPv4Src, u32.PrioIPv6Dst, u32.PrioIPv6Src},
	})
}

// netnsInode is the inode of k's network namespace (0 if unknown; it
// only names the bpf classifier's pin directory).
func (k *Kernel) netnsInode() uint64 {
	if k.nsIno == 0 {
		fd := -1
		if k.ns.IsOpen() {
			fd = int(k.ns)
		}
		k.nsIno, _ = bpfcls.NetNSInode(fd)
	}
	return k.nsIno
}

// u32Classifier is the u32 classifier under one HTB qdisc, whose Ensure
// first removes a bpf classifier left on that qdisc by classifier = "bpf"
// (its filter and pins).
type u32Classifier struct {
	*u32.Classifier
	k       *Kernel
	ifindex uint32
	qdisc   model.Handle
	cleaned bool
}

// newU32Classifier is the u32 classifier under qdisc of device ifindex.
func (k *Kernel) newU32Classifier(ifindex uint32, qdisc model.Handle) *u32Classifier {
	return &u32Classifier{Classifier: u32.NewConn(k.conn, ifindex, qdisc), k: k, ifindex: ifindex, qdisc: qdisc}
}

func (c *u32Classifier) Ensure() (int, error) {
	if !c.cleaned {
		if err := c.k.bpfClassifierUnder(c.ifindex, c.qdisc).Remove(); err != nil {
			return 0, err
		}
		c.cleaned = true
	}
	return c.Classifier.Ensure()
}

// forgetClassifier drops the cached classifier of a device (its root
// qdisc, and with it every filter, was deleted, or its kind changed).
func (k *Kernel) forgetClassifier(ifindex uint32) {
	if c, ok := k.filters[ifindex]; ok {
		_ = c.Close()
	}
	delete(k.filters, ifindex)
	k.forgetQueueClassifiers(ifindex)
}

// classifierKey names the classifier under one per-queue HTB qdisc of a
// device (model.QueueHandle).
type classifierKey struct {
	ifindex uint32
	qdisc   model.Handle
}

// classifierUnder returns the classifier under the per-queue HTB qdisc
// qdisc of device (an mq root: per-queue trees), creating it on first use:
// of the kind chosen for the device (SetClassifier), or without a choice
// the kind installed under that qdisc (shaperd's cls_bpf filter: bpf, else
// u32). Each queue's qdisc has a classifier of its own (a bpf one has its
// own maps and program, pinned in bpfcls.PinDir of that qdisc).
func (k *Kernel) classifierUnder(ifindex uint32, device string, qdisc model.Handle) classifier {
	key := classifierKey{ifindex, qdisc}
	if c, ok := k.queueFilters[key]; ok {
		return c
	}
	c := k.newClassifier(ifindex, device, qdisc)
	k.queueFilters[key] = c
	return c
}

// queueKind is the classifier kind under per-queue qdisc qdisc of device:
// the cached classifier's, else kindUnder's.
func (k *Kernel) queueKind(ifindex uint32, device string, qdisc model.Handle) string {
	if c, ok := k.queueFilters[classifierKey{ifindex, qdisc}]; ok {
		if _, bpf := c.(*bpfcls.Classifier); bpf {
			return ClassifierBPF
		}
		return ClassifierU32
	}
	return k.kindUnder(ifindex, device, qdisc)
}

// kindUnder is the classifier kind for HTB qdisc qdisc of device: the one
// chosen for the device (SetClassifier), else the one installed there
// (bpf when shaperd's cls_bpf filter is, else u32).
func (k *Kernel) kindUnder(ifindex uint32, device string, qdisc model.Handle) string {
	if kind := k.clsKind[device]; kind != "" {
		return kind
	}
	if on, err := bpfcls.Attached(k.conn, ifindex, qdisc); err == nil && on {
		return ClassifierBPF
	}
	return ClassifierU32
}

// newClassifier makes the classifier under HTB qdisc qdisc of device, of
// kindUnder's kind.
func (k *Kernel) newClassifier(ifindex uint32, device string, qdisc model.Handle) classifier {
	if k.kindUnder(ifindex, device, qdisc) == ClassifierBPF {
		return k.bpfClassifierUnder(ifindex, qdisc)
	}
	return k.newU32Classifier(ifindex, qdisc)
}

// forgetQueueClassifiers drops the cached per-queue classifiers of a
// device (its kind changed, or another process may have switched it).
func (k *Kernel) forgetQueueClassifiers(ifindex uint32) {
	for key, c := range k.queueFilters {
		if key.ifindex == ifindex {
			_ = c.Close()
			delete(k.queueFilters, key)
		}
	}
}

// removeQueueClassifier forgets the classifier under a per-queue qdisc
// that was deleted and removes the pins of a bpf classifier there (they
// outlive the qdisc; a missing filter or qdisc is not an error).
func (k *Kernel) removeQueueClassifier(ifindex uint32, qdisc model.Handle) error {
	key := classifierKey{ifindex, qdisc}
	if c, ok := k.queueFilters[key]; ok {
		_ = c.Close()
		delete(k.queueFilters, key)
	}
	return k.bpfClassifierUnder(ifindex, qdisc).Remove()
}

// filterQdisc is the HTB qdisc whose classifier holds filter f: the one
// its class lives in.
func filterQdisc(f *model.Filter) model.Handle {
	return model.MakeHandle(f.ClassID.Major(), 0)
}

// forgetRoot forgets (and removes from the kernel) what belonged to the
// root qdisc of device ifindex that was just replaced or deleted: the
// cached classifiers, the bpf classifiers' pins (their maps hold the old
// tree's entries) and the queue steering.
func (k *Kernel) forgetRoot(ifindex uint32) error {
	k.forgetClassifier(ifindex)
	return errors.Join(k.removeBPFClassifiers(ifindex), k.forgetSteerer(ifindex))
}

// removeBPFClassifiers removes the bpf classifiers of device ifindex: the
// one of the HTB root 1: and one per pin directory (qdisc-MAJOR) found
// for the device, i.e. those of per-queue qdiscs (each filter deleted
// when its qdisc is still there, then the pins).
func (k *Kernel) removeBPFClassifiers(ifindex uint32) error {
	errs := []error{k.bpfClassifier(ifindex).Remove()}
	dir := bpfcls.DevicePinDir(k.bpfPinRoot, k.netnsInode(), ifindex)
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("bpf pins of ifindex %d: %w", ifindex, err))
	}
	for _, e := range ents {
		var major uint16
		if _, err := fmt.Sscanf(e.Name(), "qdisc-%x", &major); err != nil || major == model.RootQdisc.Major() {
			continue
		}
		errs = append(errs, k.bpfClassifierUnder(ifindex, model.MakeHandle(major, 0)).Remove())
	}
	return errors.Join(errs...)
}

// pruneBPFPins removes the pin directories (bpfcls.PinDir) of devices of
// k's namespace that no longer exist: a device deleted with its qdisc
// leaves its classifier's maps and program pinned, and a device made
// again gets another index. Errors are ignored (best effort; nothing
// depends on it).
func (k *Kernel) pruneBPFPins() {
	dir := bpfcls.NetNSPinDir(k.bpfPinRoot, k.netnsInode())
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		var ifi int
		if _, err := fmt.Sscanf(e.Name(), "ifindex-%d", &ifi); err != nil || ifi <= 0 {
			continue
		}
		if _, err := k.link.LinkByIndex(ifi); err != nil && errors.As(err, new(vnl.LinkNotFoundError)) {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}
