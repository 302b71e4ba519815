package kernel

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// fakeKernel answers every request of a run like rtnetlink: one ack per
// request, in order, one per datagram (read), with errno answers[i] for
// request i (0: accepted) and the extended-ack text msg on refusals.
type fakeKernel struct {
	answers []unix.Errno
	msg     string
	next    int               // index of the next request's answer
	pending []netlink.Message // acks not read yet
	runs    [][]netlink.Message
}

func (f *fakeKernel) serve(reqs []netlink.Message) ([]netlink.Message, error) {
	if reqs != nil {
		f.runs = append(f.runs, slices.Clone(reqs))
		for _, r := range reqs {
			f.pending = append(f.pending, f.ack(r, f.answers[f.next]))
			f.next++
		}
	}
	if len(f.pending) == 0 {
		return nil, errors.New("fake kernel: read with no ack pending")
	}
	m := f.pending[0]
	f.pending = f.pending[1:]
	return []netlink.Message{m}, nil
}

// ack is NLMSG_ERROR for req: errno, the request echoed, and for a refusal
// NLMSGERR_ATTR_MSG with the text.
func (f *fakeKernel) ack(req netlink.Message, errno unix.Errno) netlink.Message {
	raw, err := req.MarshalBinary()
	if err != nil {
		panic(err)
	}
	data := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	data = append(data, raw...)
	h := netlink.Header{Type: netlink.Error, Sequence: req.Header.Sequence, PID: req.Header.PID}
	if errno != 0 {
		var at tcwire.Attrs
		at.String(1, f.msg)
		data = append(data, at.B...)
		h.Flags = netlink.AcknowledgeTLVs
	}
	return netlink.Message{Header: h, Data: data}
}

func queueClasses(p *pipeline, n int, gone map[int]bool) {
	for i := 0; i < n; i++ {
		cl := model.Class{Handle: model.MakeHandle(1, uint16(100+i)), Parent: model.MakeHandle(1, 1)}
		at := tcwire.Attrs{B: tcwire.Tcmsg{Ifindex: 2, Handle: uint32(cl.Handle), Parent: uint32(cl.Parent)}.AppendTo(nil)}
		encodeHTBClass(&at, &cl)
		op, typ := model.OpAdd, netlink.HeaderType(tcwire.RTMNewTClass)
		if gone[i] {
			op, typ = model.OpDelete, tcwire.RTMDelTClass
		}
		p.add(typ, netlink.Create|netlink.Excl, at.B, queued{dev: "eth0", op: op, object: classObject(&cl), kind: "htb", gone: gone[i]})
	}
}

// flush counts accepted requests, tolerates "gone" on deletes, reports the
// earliest refusal with its text, and reads every ack of the run.
func TestPipelineFlush(t *testing.T) {
	f := &fakeKernel{
		answers: []unix.Errno{0, 0, unix.ENOENT, unix.EEXIST, 0, unix.EINVAL, 0},
		msg:     "Class already exists",
	}
	conn := nltest.Dial(f.serve)
	defer conn.Close()
	p := pipeline{conn: conn}
	queueClasses(&p, len(f.answers), map[int]bool{2: true})
	writes, err := p.flush()
	if writes != 4 {
		t.Errorf("writes = %d, want 4 (requests 0, 1, 4, 6 accepted)", writes)
	}
	var ke *Error
	if !errors.As(err, &ke) {
		t.Fatalf("flush error %v (%T); want *Error", err, err)
	}
	wantObj := "class " + model.MakeHandle(1, 103).String()
	if ke.Object != wantObj || ke.Op != model.OpAdd || ke.Device != "eth0" || ke.Message != f.msg || !errors.Is(err, unix.EEXIST) {
		t.Errorf("refusal %+v; want add %s on eth0 with EEXIST and %q", ke, wantObj, f.msg)
	}
	if len(f.runs) != 1 || len(f.runs[0]) != len(f.answers) {
		t.Errorf("runs sent: %d; want one sendmsg with %d requests", len(f.runs), len(f.answers))
	}
	seen := map[uint32]bool{}
	for _, r := range f.runs[0] {
		if r.Header.Flags&netlink.Acknowledge == 0 || r.Header.Sequence == 0 || seen[r.Header.Sequence] {
			t.Errorf("request %+v: want NLM_F_ACK and its own sequence number", r.Header)
		}
		seen[r.Header.Sequence] = true
	}
	if len(f.pending) != 0 {
		t.Errorf("%d acks left unread", len(f.pending))
	}
	if len(p.msgs) != 0 || len(p.reqs) != 0 {
		t.Errorf("pipeline not empty after flush: %d messages", len(p.msgs))
	}
	// The next run starts clean.
	f.answers = append(f.answers, 0, 0)
	queueClasses(&p, 2, nil)
	if writes, err := p.flush(); writes != 2 || err != nil {
		t.Errorf("second run: %d writes, %v; want 2, nil", writes, err)
	}
}

// An empty run sends nothing.
func TestPipelineFlushEmpty(t *testing.T) {
	f := &fakeKernel{}
	conn := nltest.Dial(f.serve)
	defer conn.Close()
	p := pipeline{conn: conn}
	if writes, err := p.flush(); writes != 0 || err != nil || len(f.runs) != 0 {
		t.Errorf("empty flush: %d writes, %v, %d runs sent; want nothing", writes, err, len(f.runs))
	}
}

// A lost ack (the socket fails while acks are outstanding) is an error,
// joined with a refusal seen before it.
func TestPipelineFlushLostAck(t *testing.T) {
	f := &fakeKernel{answers: []unix.Errno{0, unix.EEXIST, 0, 0}, msg: "Class already exists"}
	conn := nltest.Dial(func(reqs []netlink.Message) ([]netlink.Message, error) {
		if reqs != nil {
			defer func() { f.pending = f.pending[:len(f.pending)-1] }() // the last ack is lost
		}
		return f.serve(reqs)
	})
	defer conn.Close()
	p := pipeline{conn: conn}
	queueClasses(&p, len(f.answers), nil)
	writes, err := p.flush()
	var ke *Error
	if writes != 2 || !errors.As(err, &ke) || !errors.Is(err, unix.EEXIST) || !strings.Contains(err.Error(), "3 of 4 requests answered") {
		t.Errorf("flush: %d writes, %v; want 2 writes, the refusal of request 1 and the read error after 3 answers", writes, err)
	}
}
