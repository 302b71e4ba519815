package kernel

import (
	"errors"
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/model"
)

// pipelineDepth is how many write requests Apply collects into one run
// (one sendmsg) before it reads their acks. A run holds whole changes, so
// it may end up to two requests longer (a class change that also replaces
// its leaf qdisc is three requests). 1 sends every request alone. A
// variable only for the benchmark, which compares depths.
var pipelineDepth = 64

// queued is one request of a run and what the kernel's answer to it means.
type queued struct {
	dev    string
	op     model.Op
	object string // for *Error, e.g. "class 1:105 (user alice)"
	kind   string
	// gone: ENOENT/ENODEV is success without a write (a delete of an
	// object that is already gone).
	gone bool
	// labels say whom the object serves; class is the class the request
	// writes (the class itself when isClass, else the class of a leaf).
	labels  model.Labels
	class   model.Handle
	isClass bool
}

// pipeline collects write requests into runs: each request carries
// NLM_F_ACK and its own sequence number (mdlayher/netlink numbers them),
// a run goes out in one sendmsg, and the acks are read afterwards and
// matched to the requests by sequence number. rtnetlink processes the
// messages of one socket in order and answers each one, also after a
// refusal, so a run keeps the order of its requests (a class before its
// leaf qdisc) and every request gets an answer.
//
// The Kernel's lock must be held from the first add of a run until its
// flush returns: no other request may use the socket while acks are
// outstanding.
type pipeline struct {
	conn *netlink.Conn
	msgs []netlink.Message
	reqs []queued
	// timeout bounds one run (send and acks; 0: no deadline); progress,
	// when set, is called after each answered run.
	timeout  time.Duration
	progress func()
	// After a flush: refused holds every refusal of the run in request
	// order, with the request it answers (refusedReq); failed is set when
	// the run could not be sent or its acks not all read.
	refused    []*Error
	refusedReq []queued
	failed     bool
}

// add queues one request: header type typ, flags besides
// NLM_F_REQUEST|NLM_F_ACK, and body (tcmsg and attributes; kept, not copied).
func (p *pipeline) add(typ netlink.HeaderType, flags netlink.HeaderFlags, body []byte, q queued) {
	p.msgs = append(p.msgs, netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Acknowledge | flags},
		Data:   body,
	})
	p.reqs = append(p.reqs, q)
}

// full reports whether the run has reached pipelineDepth requests.
func (p *pipeline) full() bool { return len(p.msgs) >= pipelineDepth }

// flush sends the queued run in one sendmsg and reads one ack per request.
// It returns how many requests the kernel accepted (answers that a request
// tolerates as "already gone" are not writes) and, when the kernel refused
// any, an *Error for the earliest refused request; the requests after it
// in the run were processed by the kernel too, each accepted or refused on
// its own, and the accepted ones are counted. Other errors (the send
// failed, acks could not be read) are returned too (joined with a refusal
// seen before); the run is then in an unknown state. The run is empty afterwards either way.
func (p *pipeline) flush() (writes int, err error) {
	if len(p.msgs) == 0 {
		return 0, nil
	}
	msgs, reqs := p.msgs, p.reqs
	p.refused, p.refusedReq, p.failed = p.refused[:0], p.refusedReq[:0], false
	defer func() {
		clear(p.msgs)
		p.msgs, p.reqs = p.msgs[:0], p.reqs[:0]
		if p.progress != nil {
			p.progress()
		}
	}()
	if p.timeout > 0 {
		_ = p.conn.SetDeadline(time.Now().Add(p.timeout))
		defer func() { _ = p.conn.SetDeadline(time.Time{}) }()
	}
	sent, serr := p.conn.SendMessages(msgs)
	if serr != nil {
		p.failed = true
		return 0, fmt.Errorf("%s: send %d requests (from %s %s): %w", reqs[0].dev, len(reqs), reqs[0].op, reqs[0].object, serr)
	}
	// index finds the request an ack answers.
	index := func(seq uint32) int {
		if i := int(seq - sent[0].Header.Sequence); i >= 0 && i < len(sent) && sent[i].Header.Sequence == seq {
			return i
		}
		for i := range sent {
			if sent[i].Header.Sequence == seq {
				return i
			}
		}
		return -1
	}
	answered := make([]bool, len(sent))
	var refused error
	refusedAt := len(sent)
	for n := 0; n < len(sent); {
		acks, rerr := p.conn.Receive()
		if rerr != nil {
			var oe *netlink.OpError
			i := -1
			if errors.As(rerr, &oe) && oe.Sequence != 0 {
				i = index(oe.Sequence)
			}
			if i < 0 || answered[i] {
				p.failed = true
				rerr = fmt.Errorf("%s: reading acks (%d of %d requests answered): %w", reqs[0].dev, n, len(reqs), rerr)
				if refused != nil {
					return writes, errors.Join(refused, rerr)
				}
				return writes, rerr
			}
			answered[i] = true
			n++
			q := reqs[i]
			if q.gone && (isErrno(rerr, unix.ENOENT) || isErrno(rerr, unix.ENODEV)) {
				continue
			}
			ke := kernelError(rerr, q.dev, q.op, q.object, q.kind)
			ke.Labels = q.labels
			p.refused, p.refusedReq = append(p.refused, ke), append(p.refusedReq, q)
			if i < refusedAt {
				refused, refusedAt = ke, i
			}
			continue
		}
		for _, m := range acks {
			i := index(m.Header.Sequence)
			if m.Header.Type != netlink.Error || i < 0 || answered[i] {
				continue // not an answer of this run
			}
			answered[i] = true
			n++
			writes++
		}
	}
	return writes, refused
}
