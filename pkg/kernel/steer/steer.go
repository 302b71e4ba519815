package steer

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// FilterPriority is the priority of the steering filter at clsact egress
// (tc shows it as "pref 49152").
const FilterPriority = 0xC000

// filterHandle is the handle of the steering filter.
const filterHandle = 1

// DefaultMaxEntries is the capacity of each LPM trie when New is given 0.
const DefaultMaxEntries = 1 << 20

// Steerer is the steering program of one device and its two maps.
type Steerer struct {
	link     *vnl.Handle
	ifindex  int
	v4, v6   *ebpf.Map
	prog     *ebpf.Program
	matchSrc bool
	// pinned is the directory the objects are pinned in ("": none).
	pinned string
}

// New creates the maps (maxEntries prefixes per address family, 0:
// DefaultMaxEntries) and loads the program for device ifindex, reachable
// through link (a handle in the device's network namespace). matchSrc
// steers by source address (uploads on an IFB device), else by
// destination. Nothing is attached until Attach.
func New(link *vnl.Handle, ifindex int, matchSrc bool, maxEntries uint32) (*Steerer, error) {
	if maxEntries == 0 {
		maxEntries = DefaultMaxEntries
	}
	s := &Steerer{link: link, ifindex: ifindex, matchSrc: matchSrc}
	var err error
	if s.v4, err = newTrie(v4MapName, 4, maxEntries); err != nil {
		return nil, err
	}
	if s.v6, err = newTrie(v6MapName, 16, maxEntries); err != nil {
		s.Close()
		return nil, err
	}
	if s.prog, err = newProgram(s.v4, s.v6, matchSrc); err != nil {
		s.Close()
		return nil, fmt.Errorf("ifindex %d: %w", ifindex, err)
	}
	return s, nil
}

// Attach adds a clsact qdisc to the device if it has none and installs
// (or replaces) the steering filter at its egress hook.
func (s *Steerer) Attach() error {
	q := &vnl.GenericQdisc{
		QdiscAttrs: vnl.QdiscAttrs{LinkIndex: s.ifindex, Handle: vnl.MakeHandle(0xffff, 0), Parent: vnl.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := s.link.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add clsact qdisc to ifindex %d: %w", s.ifindex, err)
	}
	if err := s.link.FilterReplace(s.filter(vnl.HANDLE_MIN_EGRESS)); err != nil {
		return fmt.Errorf("attach steering filter to ifindex %d egress: %w", s.ifindex, err)
	}
	return nil
}

// AttachIngress installs the steering filter at the device's clsact
// ingress hook instead, ahead of a mirred redirect to an IFB device (a
// filter with a higher priority number). docs/queues-mq.md reports whether
// the IFB device honours the queue chosen there.
func (s *Steerer) AttachIngress() error {
	q := &vnl.GenericQdisc{
		QdiscAttrs: vnl.QdiscAttrs{LinkIndex: s.ifindex, Handle: vnl.MakeHandle(0xffff, 0), Parent: vnl.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := s.link.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add clsact qdisc to ifindex %d: %w", s.ifindex, err)
	}
	if err := s.link.FilterReplace(s.filter(vnl.HANDLE_MIN_INGRESS)); err != nil {
		return fmt.Errorf("attach steering filter to ifindex %d ingress: %w", s.ifindex, err)
	}
	return nil
}

// filter is the cls_bpf filter that runs the program (direct action).
func (s *Steerer) filter(parent uint32) *vnl.BpfFilter {
	return &vnl.BpfFilter{
		FilterAttrs: vnl.FilterAttrs{
			LinkIndex: s.ifindex,
			Parent:    parent,
			Handle:    filterHandle,
			Priority:  FilterPriority,
			Protocol:  unix.ETH_P_ALL,
		},
		Fd:           s.prog.FD(),
		Name:         "shaperd_steer",
		DirectAction: true,
	}
}

// Detach removes the steering filter (the clsact qdisc stays: other
// tools may use it).
func (s *Steerer) Detach() error { return Remove(s.link, s.ifindex) }

// Remove deletes the steering filter at device ifindex's clsact egress,
// whichever process attached it; no filter (or no clsact) is not an error.
func Remove(link *vnl.Handle, ifindex int) error {
	f := &vnl.BpfFilter{FilterAttrs: vnl.FilterAttrs{LinkIndex: ifindex, Parent: vnl.HANDLE_MIN_EGRESS,
		Handle: filterHandle, Priority: FilterPriority, Protocol: unix.ETH_P_ALL}}
	if err := link.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("remove steering filter of ifindex %d: %w", ifindex, err)
	}
	return nil
}

// Close releases the program and maps (an attached filter keeps its own
// reference to the program, and the program to the maps).
func (s *Steerer) Close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{s.prog, s.v4, s.v6} {
		if c == nil || c == (*ebpf.Program)(nil) || c == (*ebpf.Map)(nil) {
			continue
		}
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
