package kernel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/model"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrKindUnsupported: the running kernel does not know a qdisc or
	// classifier kind (it answered "Specified qdisc kind is unknown").
	ErrKindUnsupported = errors.New("kind not supported by the running kernel")
	// ErrNoDevice: the named network device does not exist.
	ErrNoDevice = errors.New("no such device")
	// ErrDependencyRefused: Apply did not send a change because an object
	// it needs was refused (a filter or child of a class the kernel did
	// not create, anything on a device whose root qdisc was refused).
	ErrDependencyRefused = errors.New("skipped")
	// ErrForeignRoot: the device's root qdisc was not made by shaperd and
	// taking it over was not allowed (Kernel.SetTakeover).
	ErrForeignRoot = errors.New("root qdisc not created by shaperd")
)

// Error is a kernel refusal of one write during Apply.
type Error struct {
	Device string   // the device written to
	Op     model.Op // what was asked
	// Object names what was written and whom it serves, e.g.
	// "class 1:105 (user alice)" or "leaf qdisc fq_codel of class 1:105 (user alice)".
	Object string
	// Kind is the qdisc or classifier kind of the object ("htb", "fq_codel").
	Kind string
	// Labels say whom the object serves (user, tier), when known.
	Labels model.Labels
	// Message is the kernel's extended-ack text ("" if it gave none).
	Message string
	// Err is the underlying error (a unix.Errno from the kernel).
	Err error
}

// Error formats as "DEV: OP OBJECT: MESSAGE: ERRNO", plus a note when the
// kernel lacks the kind.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s", e.Device, e.Op, e.Object)
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.unsupported() {
		fmt.Fprintf(&b, " (qdisc/classifier kind %q is not available in this kernel)", e.Kind)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the kernel's error and, for an unknown kind, ErrKindUnsupported.
func (e *Error) Unwrap() []error {
	if e.unsupported() {
		return []error{e.Err, ErrKindUnsupported}
	}
	return []error{e.Err}
}

// unsupported reports whether the kernel refused because it lacks the kind:
// ENOENT on a create, with "kind is unknown"/"not found" in the ack text.
func (e *Error) unsupported() bool {
	if e.Op == model.OpDelete || !errors.Is(e.Err, unix.ENOENT) {
		return false
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "kind is unknown") || strings.Contains(m, "classifier not found") ||
		strings.Contains(m, "action not found") || strings.Contains(m, "failed to load")
}

// kernelError wraps err from a write as *Error, keeping the ack text.
func kernelError(err error, dev string, op model.Op, object, kind string) *Error {
	e := &Error{Device: dev, Op: op, Object: object, Kind: kind, Err: err}
	var oe *netlink.OpError
	if errors.As(err, &oe) {
		e.Message = oe.Message
		if direct, ok := err.(*netlink.OpError); ok && direct.Err != nil {
			e.Err = direct.Err // keep the errno; the op adds nothing
		}
	}
	return e
}

// isErrno reports whether err is (or wraps) the given errno.
func isErrno(err error, errno unix.Errno) bool { return errors.Is(err, errno) }

// labelSuffix is " (user alice)", " (tier gold)", " (default)", " (root)" or "".
func labelSuffix(l model.Labels) string {
	switch {
	case l.User != "":
		return " (user " + l.User + ")"
	case l.Tier != "" && (l.Kind == "tier" || l.Kind == ""):
		return " (tier " + l.Tier + ")"
	case l.Kind != "":
		return " (" + l.Kind + ")"
	}
	return ""
}
