package kernel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// Result says what Apply did.
type Result struct {
	// Writes is the number of write requests the kernel accepted (creates,
	// changes, deletes, including those the classifier made: u32 nodes,
	// or the bpf classifier's maps, program, filter and map updates).
	Writes int
	// Replaced describes foreign root qdiscs that were replaced by shaperd's
	// (e.g. "eth0: replaced root qdisc prio 1:"), for the daemon to log.
	Replaced []string
	// Refused lists every change the kernel refused and every change not
	// sent because of such a refusal (Err ErrDependencyRefused), in order,
	// each naming the object and whom it serves (Labels). For an OpChange
	// the kernel keeps the object as it was: its old settings stay in force.
	Refused []*Error
	// Stopped is set when Apply stopped at a failure that is not a
	// refusal (the socket, a missing device): the changes after it were
	// not tried.
	Stopped bool
}

// LeafHandle is the handle of the explicit leaf qdisc shaperd attaches to
// class c of the single tree: major = c's minor (class 1:105 gets leaf
// 105:). Under per-queue trees minors repeat across queues, so the kernel
// picks leaf handles there (from its automatic range, 8000: and up).
func LeafHandle(c model.Handle) model.Handle { return model.MakeHandle(c.Minor(), 0) }

// RedirectPref is the filter priority of shaperd's ingress redirect filter
// (u32 match-all, protocol all, mirred egress redirect to the IFB).
const RedirectPref uint16 = 0xc05d

// Apply performs changes in order, one kernel write per object (the u32
// classifier may need several per filter), and stops at the first refusal
// with an *Error naming the device, object, op and the kernel's text.
// Result counts the writes the kernel accepted until then (see Pipelining
// for the requests already sent after a refused one).
//
//   - Root qdisc add: create-or-replace at the root with handle 1:, so a
//     pfifo_fast/mq/noqueue/fq_codel or any other root is replaced. A foreign
//     root that already has handle 1: but another kind is deleted first; both
//     cases are listed in Result.Replaced. After an HTB root is added the
//     device's u32 hash tables are created. Change modifies in place (TBF
//     refills its bucket; the kernel cannot change an HTB qdisc in place and
//     refuses). Delete removes the tree with its classes and filters.
//   - Class add: create (exclusive), then its explicit leaf qdisc if any
//     (handle LeafHandle). Change: an in-place change request (HTB keeps the
//     class's tokens and counters), skipped when only the leaf differs from
//     FromClass; a different leaf is replaced (a leaf of another kind is
//     deleted first; nil returns the class to the kernel's default pfifo).
//     Delete removes the class and its leaf.
//   - Filter add/delete: through the device's classifier (SetClassifier:
//     u32 or bpf), whose tables (or maps, program and filter)
//     are ensured once per Apply before the first filter change of a device.
//   - Redirect add: the IFB link is created and set up if needed, a
//     clsact qdisc ffff: is added unless it or an ingress qdisc is present,
//     and the redirect filter (priority RedirectPref) is (re)installed at
//     its ingress hook. Delete removes the filter, and the qdisc when no
//     other filter is left on either hook.
//
// Deleting an object that is already gone is not an error. A change for a
// device that does not exist fails with ErrNoDevice.
//
// Pipelining: runs of consecutive class changes (classes with their leaf
// qdiscs: adds, changes, deletes) are sent pipelineDepth (64) requests per
// sendmsg, each with its own sequence number and ack, and the acks are read
// after the run; every other change (root qdiscs, filters, redirects) is
// sent alone and awaits its ack, after the pending run is answered. The
// kernel processes the requests of a run in order, so a class is created
// before its leaf qdisc and before any later change. When the kernel refuses
// a request of a run, Apply returns the *Error of that request (the earliest
// refused one of the run), but the requests after it in the same run (at
// most a run's length) have been processed too, each accepted or refused on
// its own: the leaf qdisc of a class the kernel refused to create is
// normally refused too (no parent), other classes are created or changed.
// Result.Writes counts exactly the requests the kernel accepted, including
// those; the next reconcile (Dump, Diff) sees them and converges. If the
// run cannot be sent or its acks cannot be read (a socket error, not a
// refusal), Apply returns that error and the run's outcome is unknown
// until the next Dump.
//
// The Kernel's lock is taken per change or per run, not for the whole
// Apply: creating 10,000 classes takes seconds of kernel time, and
// Dump/Verify/link calls from other goroutines may run in between (they
// then see a partial tree).
func (k *Kernel) Apply(changes []model.Change) (Result, error) {
	a := applier{k: k, idx: map[string]uint32{}, ensured: map[uint32]bool{}, queueEnsured: map[classifierKey]bool{}, mq: map[uint32]bool{}, pipe: pipeline{conn: k.conn, timeout: k.timeout, progress: k.progress},
		blocked: map[string]string{}, blockedClass: map[devClass]string{}, blockedFilters: map[string]string{}}
	locked := false // k.mu held for a run in a.pipe
	single := false // k.mu held for one change
	defer func() {
		// A panic (a bug) must not leave the lock held or a classifier
		// with a broken picture: unlock, forget the classifiers (they dump
		// afresh) and let the caller recover.
		if r := recover(); r != nil {
			if !locked && !single {
				k.mu.Lock()
			}
			for ifi := range k.filters {
				k.forgetClassifier(ifi)
			}
			for key := range k.queueFilters {
				k.forgetClassifier(key.ifindex)
			}
			k.mu.Unlock()
			panic(r)
		}
	}()
	// endRun flushes the run; it returns only errors that are not
	// refusals (the refusals are in a.res.Refused).
	endRun := func() error {
		w, err := a.pipe.flush()
		a.res.Writes += w
		k.mu.Unlock()
		locked = false
		for i, ke := range a.pipe.refused {
			a.refused(ke, a.pipe.refusedReq[i])
		}
		if a.pipe.failed {
			return err
		}
		return nil
	}
	for i := range changes {
		c := &changes[i]
		if why := a.blockedBy(c); why != "" {
			a.skip(c, why)
			continue
		}
		a.cur = c
		if c.Class == nil {
			if locked {
				if err := endRun(); err != nil {
					return a.finish(err)
				}
				if why := a.blockedBy(c); why != "" { // by a refusal in the run
					a.skip(c, why)
					continue
				}
			}
			k.mu.Lock()
			single = true
			err := a.apply(c)
			single = false
			k.mu.Unlock()
			if err != nil && !a.refusal(c, err) {
				return a.finish(err)
			}
			continue
		}
		if !locked {
			k.mu.Lock()
			locked = true
		}
		a.queue = true
		err := a.apply(c)
		a.queue = false
		if err != nil {
			if ferr := endRun(); ferr != nil {
				return a.finish(ferr)
			}
			if !a.refusal(c, err) {
				return a.finish(err)
			}
			continue
		}
		if a.pipe.full() {
			if err := endRun(); err != nil {
				return a.finish(err)
			}
		}
	}
	if locked {
		if err := endRun(); err != nil {
			return a.finish(err)
		}
	}
	return a.finish(nil)
}

// devClass names a class on a device.
type devClass struct {
	dev string
	h   model.Handle
}

// finish is Apply's return: the result and a.result(err).
func (a *applier) finish(err error) (Result, error) {
	err = a.result(err)
	return a.res, err
}

// maxJoined is how many refusals Apply's error spells out (Result.Refused
// has them all).
const maxJoined = 5

// result is Apply's error: err (a failure that stopped it) joined with
// the first refusals, or nil when there was neither.
func (a *applier) result(err error) error {
	errs := make([]error, 0, maxJoined+2)
	for i, e := range a.res.Refused {
		if i == maxJoined {
			errs = append(errs, fmt.Errorf("... and %d more refused or skipped changes", len(a.res.Refused)-maxJoined))
			break
		}
		errs = append(errs, e)
	}
	if err != nil {
		a.res.Stopped = true
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// refusal records err from change c when it is a kernel refusal (*Error)
// and reports whether it was; other errors stop Apply.
func (a *applier) refusal(c *model.Change, err error) bool {
	var ke *Error
	if !errors.As(err, &ke) {
		return false
	}
	q := queued{dev: c.Device, op: c.Op, object: ke.Object}
	switch {
	case c.Class != nil:
		q.class, q.isClass, q.labels = c.Class.Handle, strings.HasPrefix(ke.Object, "class "), c.Class.Labels
	case c.Filter != nil:
		q.labels = c.Filter.Labels
	}
	a.refused(ke, q)
	return true
}

// refused records a refusal and what it blocks: a class that was not
// created blocks its children and filters, a root qdisc that was not
// added blocks its device, u32 tables that could not be made block the
// device's filters.
func (a *applier) refused(ke *Error, q queued) {
	if ke.Labels == (model.Labels{}) {
		ke.Labels = q.labels
	}
	a.res.Refused = append(a.res.Refused, ke)
	why := fmt.Sprintf("%s %s was refused", ke.Op, ke.Object)
	switch {
	case q.isClass && q.op == model.OpAdd:
		a.blockedClass[devClass{q.dev, q.class}] = why
	case strings.HasPrefix(ke.Object, "root qdisc") && ke.Op == model.OpAdd:
		a.blocked[ke.Device] = why
	case ke.Object == "u32 hash tables":
		a.blockedFilters[ke.Device] = why
	}
}

// blockedBy says why change c cannot be applied after earlier refusals,
// or "".
func (a *applier) blockedBy(c *model.Change) string {
	if why := a.blocked[c.Device]; why != "" && c.Op != model.OpDelete {
		return why
	}
	switch {
	case c.Class != nil && c.Op != model.OpDelete:
		return a.blockedClass[devClass{c.Device, c.Class.Parent}]
	case c.Filter != nil && c.Op == model.OpAdd:
		if why := a.blockedFilters[c.Device]; why != "" {
			return why
		}
		return a.blockedClass[devClass{c.Device, c.Filter.ClassID}]
	}
	return ""
}

// skip records change c as not applied because of why; a class that is
// not created blocks its own dependants in turn.
func (a *applier) skip(c *model.Change, why string) {
	e := &Error{Device: c.Device, Op: c.Op, Message: "not applied: " + why, Err: ErrDependencyRefused}
	switch {
	case c.Qdisc != nil:
		e.Object, e.Kind = fmt.Sprintf("root qdisc %s %s", c.Qdisc.Handle, c.Qdisc.Kind), string(c.Qdisc.Kind)
	case c.Class != nil:
		e.Object, e.Kind, e.Labels = classObject(c.Class), "htb", c.Class.Labels
		if c.Op == model.OpAdd {
			a.blockedClass[devClass{c.Device, c.Class.Handle}] = why
		}
	case c.Filter != nil:
		e.Object, e.Kind, e.Labels = filterObject(c.Filter), "u32", c.Filter.Labels
	case c.Redirect != nil:
		e.Object = fmt.Sprintf("redirect %s -> %s", c.Redirect.Interface, c.Redirect.IFB)
	}
	a.res.Refused = append(a.res.Refused, e)
}

// applier is the state of one Apply: ifindexes and ensured classifiers are
// looked up once per device.
type applier struct {
	k       *Kernel
	res     Result
	idx     map[string]uint32
	ensured map[uint32]bool
	// queueEnsured: the u32 tables under each per-queue qdisc.
	queueEnsured map[classifierKey]bool
	// mq: whether each device's root is mq (per-queue trees), looked up
	// once per Apply before its first filter change.
	mq map[uint32]bool
	// pipe holds the current run; while queue is set, write queues its
	// request there instead of sending it and awaiting the ack.
	pipe  pipeline
	queue bool
	// cur is the change being applied.
	cur *model.Change
	// tookOver: a foreign root qdisc was taken over (and listed).
	tookOver bool
	// What earlier refusals block: whole devices (root qdisc), classes
	// (not created: their children and filters), filters of a device
	// (u32 tables); each says why.
	blocked        map[string]string
	blockedClass   map[devClass]string
	blockedFilters map[string]string
}

func (a *applier) ifindex(dev string) (uint32, error) {
	if i, ok := a.idx[dev]; ok {
		return i, nil
	}
	i, err := a.k.ifindex(dev)
	if err != nil {
		return 0, err
	}
	a.idx[dev] = i
	return i, nil
}

func (a *applier) apply(c *model.Change) error {
	switch {
	case c.Redirect != nil:
		return a.redirect(c)
	case c.Qdisc != nil:
		return a.qdisc(c)
	case c.Class != nil:
		return a.class(c)
	case c.Filter != nil:
		return a.filter(c)
	}
	return fmt.Errorf("%s: %s: change without an object", c.Device, c.Op)
}

// write sends one request and counts it; a refusal becomes *Error. While
// a run is being collected (a.queue) the request is queued instead and its
// answer is counted or turned into *Error when the run is flushed.
func (a *applier) write(typ netlink.HeaderType, flags netlink.HeaderFlags, m tcwire.Tcmsg, fn func(*tcwire.Attrs) error,
	dev string, op model.Op, object, kind string) error {
	return a.send(typ, flags, m, fn, queued{dev: dev, op: op, object: object, kind: kind})
}

// writeGone is write for a delete: an object that is already gone
// (ENOENT, ENODEV) is success without a write.
func (a *applier) writeGone(typ netlink.HeaderType, flags netlink.HeaderFlags, m tcwire.Tcmsg, fn func(*tcwire.Attrs) error,
	dev string, op model.Op, object, kind string) error {
	return a.send(typ, flags, m, fn, queued{dev: dev, op: op, object: object, kind: kind, gone: true})
}

func (a *applier) send(typ netlink.HeaderType, flags netlink.HeaderFlags, m tcwire.Tcmsg, fn func(*tcwire.Attrs) error, q queued) error {
	if c := a.cur; c != nil && c.Class != nil {
		q.labels, q.class = c.Class.Labels, c.Class.Handle
		q.isClass = typ == tcwire.RTMNewTClass || typ == tcwire.RTMDelTClass
	}
	if a.queue {
		at := tcwire.Attrs{B: m.AppendTo(make([]byte, 0, 128))}
		if fn != nil {
			if err := fn(&at); err != nil {
				return kernelError(err, q.dev, q.op, q.object, q.kind)
			}
		}
		a.pipe.add(typ, flags, at.B, q)
		return nil
	}
	if err := a.k.write(typ, flags, m, fn); err != nil {
		if q.gone {
			if err = a.ignoreGone(err); err == nil {
				return nil
			}
		}
		return kernelError(err, q.dev, q.op, q.object, q.kind)
	}
	a.res.Writes++
	return nil
}

func (a *applier) qdisc(c *model.Change) error {
	q := c.Qdisc
	ifi, err := a.ifindex(c.Device)
	if err != nil {
		return fmt.Errorf("%s root qdisc: %w", c.Op, err)
	}
	if q.Parent != 0 {
		return a.queueQdisc(c, ifi)
	}
	m := tcwire.Tcmsg{Ifindex: ifi, Handle: uint32(q.Handle), Parent: uint32(model.HandleRoot)}
	object := fmt.Sprintf("root qdisc %s %s", q.Handle, q.Kind)
	encode := func(at *tcwire.Attrs) error {
		switch q.Kind {
		case model.ShaperMQ:
			at.String(tcwire.TCAKind, string(model.ShaperMQ))
			return nil
		case model.ShaperHTB:
			if c.Op == model.OpChange {
				// HTB has no change operation for its options: an
				// in-place change sends the kind and the size table only.
				at.String(tcwire.TCAKind, string(model.ShaperHTB))
			} else {
				encodeHTBQdisc(at, q)
			}
		case model.ShaperTBF:
			if q.TBF == nil {
				return fmt.Errorf("%s: %s without TBF parameters", c.Device, object)
			}
			if err := encodeTBFQdisc(at, q.TBF); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: %s: unknown shaper kind", c.Device, object)
		}
		// Every write carries the size table: a change without one removes it.
		encodeSizeTable(at, q.SizeOverhead)
		return nil
	}
	switch c.Op {
	case model.OpAdd:
		if err := a.foreignRoot(ifi, c.Device, object, string(q.Kind)); err != nil {
			return err
		}
		err := a.write(tcwire.RTMNewQdisc, netlink.Create|netlink.Replace, m, encode, c.Device, c.Op, object, string(q.Kind))
		if err != nil {
			// A foreign root with our handle and another kind cannot be
			// replaced in place: delete it and try once more.
			root, derr := a.k.rootQdisc(ifi)
			if derr != nil || root == nil || root.msg.Handle != uint32(q.Handle) || root.kind == string(q.Kind) {
				return err
			}
			if derr := a.write(tcwire.RTMDelQdisc, 0, tcwire.Tcmsg{Ifindex: ifi, Handle: root.msg.Handle, Parent: uint32(model.HandleRoot)},
				nil, c.Device, model.OpDelete, "foreign root qdisc "+root.kind, root.kind); derr != nil {
				return derr
			}
			if !a.tookOver {
				a.res.Replaced = append(a.res.Replaced, fmt.Sprintf("%s: replaced root qdisc %s %s", c.Device, root.kind, model.Handle(root.msg.Handle)))
			}
			if err := a.write(tcwire.RTMNewQdisc, netlink.Create|netlink.Replace, m, encode, c.Device, c.Op, object, string(q.Kind)); err != nil {
				return err
			}
		}
		// A new root drops the old one's steering and bpf maps (pinned,
		// they outlive the qdiscs): they describe a tree that is gone,
		// and the new one starts with empty maps.
		if err := a.k.forgetRoot(ifi); err != nil {
			return kernelError(err, c.Device, c.Op, "bpf pins and steering of the old root", "bpf")
		}
		a.mq[ifi] = q.Kind == model.ShaperMQ
		if q.Kind == model.ShaperHTB {
			return a.ensureFilters(ifi, c.Device)
		}
		return nil
	case model.OpChange:
		return a.write(tcwire.RTMNewQdisc, 0, m, encode, c.Device, c.Op, object, string(q.Kind))
	case model.OpDelete:
		if err := a.ignoreGone(a.write(tcwire.RTMDelQdisc, 0, m, nil, c.Device, c.Op, object, string(q.Kind))); err != nil {
			return err
		}
		delete(a.mq, ifi)
		if err := a.k.forgetRoot(ifi); err != nil {
			return kernelError(err, c.Device, c.Op, "bpf pins and steering of the old root", "bpf")
		}
		return nil
	}
	return fmt.Errorf("%s: %s: unknown op %s", c.Device, object, c.Op)
}

// foreignRoot refuses to replace a root qdisc of another tool on the
// device (IsForeignRoot) unless SetTakeover allowed it; an allowed
// takeover is listed in Result.Replaced.
func (a *applier) foreignRoot(ifi uint32, dev, object, kind string) error {
	root, err := a.k.rootQdisc(ifi)
	if err != nil {
		return fmt.Errorf("%s: look at the root qdisc: %w", dev, err)
	}
	if root == nil || !IsForeignRoot(root.kind, model.Handle(root.msg.Handle)) {
		return nil
	}
	found := fmt.Sprintf("root qdisc %s %s", root.kind, model.Handle(root.msg.Handle))
	if !a.k.takeover[dev] {
		return &Error{Device: dev, Op: model.OpAdd, Object: object, Kind: kind, Err: ErrForeignRoot,
			Message: found + " was not created by shaperd; set takeover = true on the interface or run shaperd --takeover to replace it"}
	}
	a.res.Replaced = append(a.res.Replaced, fmt.Sprintf("%s: took over %s", dev, found))
	a.tookOver = true
	return nil
}

// ignoreGone turns "already gone" answers to deletes into success.
func (a *applier) ignoreGone(err error) error {
	if err != nil && (isErrno(err, unix.ENOENT) || isErrno(err, unix.ENODEV)) {
		return nil
	}
	return err
}

func classObject(c *model.Class) string {
	return fmt.Sprintf("class %s%s", c.Handle, labelSuffix(c.Labels))
}

func (a *applier) class(c *model.Change) error {
	cl := c.Class
	ifi, err := a.ifindex(c.Device)
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.Op, classObject(cl), err)
	}
	m := tcwire.Tcmsg{Ifindex: ifi, Handle: uint32(cl.Handle), Parent: uint32(cl.Parent)}
	encode := func(at *tcwire.Attrs) error { encodeHTBClass(at, cl); return nil }
	switch c.Op {
	case model.OpAdd:
		if err := a.write(tcwire.RTMNewTClass, netlink.Create|netlink.Excl, m, encode, c.Device, c.Op, classObject(cl), "htb"); err != nil {
			return err
		}
		return a.leaf(ifi, c.Device, cl, nil, cl.Leaf)
	case model.OpChange:
		var from *model.LeafQdisc
		if f := c.FromClass; f != nil {
			from = f.Leaf
		}
		if c.FromClass == nil || !classParamsEqualNoLeaf(*c.FromClass, *cl) {
			if err := a.write(tcwire.RTMNewTClass, 0, m, encode, c.Device, c.Op, classObject(cl), "htb"); err != nil {
				return err
			}
		}
		if c.FromClass != nil && model.LeafEqual(from, cl.Leaf) {
			return nil
		}
		return a.leaf(ifi, c.Device, cl, from, cl.Leaf)
	case model.OpDelete:
		return a.writeGone(tcwire.RTMDelTClass, 0, m, nil, c.Device, c.Op, classObject(cl), "htb")
	}
	return fmt.Errorf("%s: %s: unknown op %s", c.Device, classObject(cl), c.Op)
}

// classParamsEqualNoLeaf is model.ClassParamsEqual ignoring the leaf.
func classParamsEqualNoLeaf(x, y model.Class) bool {
	x.Leaf, y.Leaf = nil, nil
	return model.ClassParamsEqual(x, y)
}

// leaf moves class cl's leaf qdisc from `from` (nil: the kernel default,
// or unknown) to `to` (nil: the kernel default).
func (a *applier) leaf(ifi uint32, dev string, cl *model.Class, from, to *model.LeafQdisc) error {
	if to == nil {
		if from == nil {
			return nil
		}
		// Deleting the leaf makes HTB graft its default pfifo.
		m := tcwire.Tcmsg{Ifindex: ifi, Parent: uint32(cl.Handle)}
		return a.writeGone(tcwire.RTMDelQdisc, 0, m, nil, dev, model.OpDelete,
			fmt.Sprintf("leaf qdisc %s of %s", from.Kind, classObject(cl)), from.Kind)
	}
	object := fmt.Sprintf("leaf qdisc %s of %s", to.Kind, classObject(cl))
	if from != nil && from.Kind != to.Kind {
		// The kernel cannot change a qdisc's kind in place.
		m := tcwire.Tcmsg{Ifindex: ifi, Parent: uint32(cl.Handle)}
		if err := a.writeGone(tcwire.RTMDelQdisc, 0, m, nil, dev, model.OpDelete,
			fmt.Sprintf("leaf qdisc %s of %s", from.Kind, classObject(cl)), from.Kind); err != nil {
			return err
		}
	}
	m := tcwire.Tcmsg{Ifindex: ifi, Handle: uint32(LeafHandle(cl.Handle)), Parent: uint32(cl.Handle)}
	mq, err := a.isMQ(ifi)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", dev, object, err)
	}
	if mq {
		m.Handle = 0 // the kernel picks it: minors repeat across queue trees
	}
	op := model.OpAdd
	if from != nil {
		op = model.OpChange
	}
	return a.write(tcwire.RTMNewQdisc, netlink.Create|netlink.Replace, m, func(at *tcwire.Attrs) error { return encodeLeaf(at, to) },
		dev, op, object, to.Kind)
}

func filterObject(f *model.Filter) string {
	return fmt.Sprintf("filter %s %s -> %s%s", f.Match, f.Prefix, f.ClassID, labelSuffix(f.Labels))
}

// ensureFilters makes sure the device's classifier skeleton exists (u32
// hash tables; bpf maps, program and filter), once per Apply.
func (a *applier) ensureFilters(ifi uint32, dev string) error {
	if a.ensured[ifi] {
		return nil
	}
	n, err := a.k.classifierFor(ifi, dev).Ensure()
	a.res.Writes += n
	if err != nil {
		if a.k.classifierKind(dev) == ClassifierBPF {
			return kernelError(err, dev, model.OpAdd, "bpf classifier (maps, program, filter)", "bpf")
		}
		return kernelError(err, dev, model.OpAdd, "u32 hash tables", "u32")
	}
	a.ensured[ifi] = true
	return nil
}

// ensureQueueFilters makes sure the classifier skeleton under the
// per-queue HTB qdisc qdisc of the device exists (u32 hash tables; bpf
// maps, program and filter), once per Apply.
func (a *applier) ensureQueueFilters(ifi uint32, qdisc model.Handle, dev string) error {
	key := classifierKey{ifi, qdisc}
	if a.queueEnsured[key] {
		return nil
	}
	n, err := a.k.classifierUnder(ifi, dev, qdisc).Ensure()
	a.res.Writes += n
	if err != nil {
		if a.k.queueKind(ifi, dev, qdisc) == ClassifierBPF {
			return kernelError(err, dev, model.OpAdd, "bpf classifier (maps, program, filter) of queue qdisc "+qdisc.String(), "bpf")
		}
		return kernelError(err, dev, model.OpAdd, "u32 hash tables of queue qdisc "+qdisc.String(), "u32")
	}
	a.queueEnsured[key] = true
	return nil
}

// isMQ reports whether the device's root qdisc is shaperd's mq (filters
// then also steer), asking the kernel once per Apply.
func (a *applier) isMQ(ifi uint32) (bool, error) {
	if v, ok := a.mq[ifi]; ok {
		return v, nil
	}
	root, err := a.k.getRoot(ifi)
	if err != nil {
		return false, err
	}
	v := root != nil && isMQRoot(*root)
	a.mq[ifi] = v
	return v, nil
}

func (a *applier) filter(c *model.Change) error {
	f := c.Filter
	ifi, err := a.ifindex(c.Device)
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.Op, filterObject(f), err)
	}
	mq, err := a.isMQ(ifi)
	if err != nil {
		return fmt.Errorf("%s: %s: root qdisc: %w", c.Device, filterObject(f), err)
	}
	var cls classifier
	qdisc := filterQdisc(f)
	if mq {
		if err := a.ensureQueueFilters(ifi, qdisc, c.Device); err != nil {
			return err
		}
		cls = a.k.classifierUnder(ifi, c.Device, qdisc)
	} else {
		if err := a.ensureFilters(ifi, c.Device); err != nil {
			return err
		}
		cls = a.k.classifierFor(ifi, c.Device)
	}
	var n int
	switch c.Op {
	case model.OpAdd:
		n, err = cls.Add(*f)
	case model.OpDelete:
		n, err = cls.Delete(*f)
	default:
		return fmt.Errorf("%s: %s: unsupported op %s (filters are added or deleted)", c.Device, filterObject(f), c.Op)
	}
	a.res.Writes += n
	if err != nil {
		kind := a.k.classifierKind(c.Device)
		if mq {
			kind = a.k.queueKind(ifi, c.Device, qdisc)
		}
		return kernelError(err, c.Device, c.Op, filterObject(f), kind)
	}
	if mq {
		if err := a.k.steerFilter(ifi, c.Op, f); err != nil {
			return kernelError(err, c.Device, c.Op, "steering of "+filterObject(f), "bpf")
		}
	}
	return nil
}

// queueQdisc adds or deletes the HTB qdisc of one queue under the mq
// root (grafted onto mq's class q.Parent, replacing the kernel's default
// child there), then its classifier (u32 tables, or bpf maps, program and
// filter; a deleted qdisc's bpf pins are removed).
func (a *applier) queueQdisc(c *model.Change, ifi uint32) error {
	q := c.Qdisc
	m := tcwire.Tcmsg{Ifindex: ifi, Handle: uint32(q.Handle), Parent: uint32(q.Parent)}
	object := fmt.Sprintf("queue qdisc %s %s under %s", q.Handle, q.Kind, q.Parent)
	switch c.Op {
	case model.OpAdd:
		encode := func(at *tcwire.Attrs) error {
			encodeHTBQdisc(at, q)
			encodeSizeTable(at, q.SizeOverhead)
			return nil
		}
		if err := a.write(tcwire.RTMNewQdisc, netlink.Create|netlink.Replace, m, encode, c.Device, c.Op, object, string(q.Kind)); err != nil {
			return err
		}
		return a.ensureQueueFilters(ifi, q.Handle, c.Device)
	case model.OpDelete:
		if err := a.ignoreGone(a.write(tcwire.RTMDelQdisc, 0, m, nil, c.Device, c.Op, object, string(q.Kind))); err != nil {
			return err
		}
		if err := a.k.removeQueueClassifier(ifi, q.Handle); err != nil {
			return kernelError(err, c.Device, model.OpDelete, "bpf classifier pins of queue qdisc "+q.Handle.String(), "bpf")
		}
		return nil
	}
	return fmt.Errorf("%s: %s: unsupported op %s (queue qdiscs are added or deleted)", c.Device, object, c.Op)
}
