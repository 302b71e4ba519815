package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// DefaultWindow is the length of the windows Run reports: 100 ms.
const DefaultWindow = 100 * time.Millisecond

// RunOptions describe a packet-level simulation (Run).
type RunOptions struct {
	// Demand is each source's demand at time 0, by the handle of its leaf
	// class (HTB) or of the root qdisc (TBF: one source for the whole
	// link). Max is a source that keeps the queue backlogged; a rate is a
	// source that enqueues one packet every PacketSize*8/rate seconds;
	// missing handles and 0 are idle.
	Demand map[model.Handle]Demand
	// Events change the tree's parameters or the demand at given times,
	// in any order (Run sorts them; events at the same time apply in the
	// order given).
	Events []Event
	// Duration is the simulated time (required).
	Duration time.Duration
	// Window is the length of the reported windows (default DefaultWindow).
	Window time.Duration
	// PacketSize is the size in bytes of every packet, as the shaper
	// counts it (qdisc_pkt_len: the frame without FCS; a GSO aggregate
	// counts whole); 0 means DefaultPacketSize.
	PacketSize tbf.Size
	// Link is the rate of the device under the shaper; 0 means infinitely
	// fast: a packet the shaper releases leaves at once, so a full bucket
	// leaves in one instant.
	Link tbf.Rate
}

// Event is a change at At (from the start of the simulation).
type Event struct {
	At time.Duration
	// Tree, when set, gives new parameters: HTB classes are matched by
	// handle (rate, ceil, buffer, cbuffer, quantum and prio change; the
	// tokens are kept, as htb_change_class does); a TBF root gets its new
	// rate, burst and peak rate and a full bucket (tbf_change refills the
	// tokens on every change). Classes may not be added or removed.
	Tree *model.Tree
	// Demand changes the demand of the sources named (see RunOptions).
	Demand map[model.Handle]Demand
}

// Series is what Run reports: the bytes each class sent in every window,
// as the kernel's byte counters count them (a class counts a packet when
// it is dequeued; an inner class counts its descendants' packets).
type Series struct {
	Device string
	Kind   model.ShaperKind
	// Window is the windows' length; window i covers [i*Window, (i+1)*Window).
	Window time.Duration
	// Classes are the HTB classes in tree order, or one entry for a TBF
	// root (Handle t.Root.Handle, Labels.Kind "root").
	Classes []ClassSeries
	// Packets is the number of packets dequeued in all.
	Packets int64
}

// ClassSeries is one class's output per window.
type ClassSeries struct {
	Handle, Parent model.Handle
	Labels         model.Labels
	// Bytes sent in each window.
	Bytes []uint64
}

// Class returns the series of the class (or TBF root) with handle h.
func (s *Series) Class(h model.Handle) (*ClassSeries, bool) {
	for i := range s.Classes {
		if s.Classes[i].Handle == h {
			return &s.Classes[i], true
		}
	}
	return nil, false
}

// Bits returns the bits sent in window i (0 outside the series).
func (c *ClassSeries) Bits(i int) float64 {
	if i < 0 || i >= len(c.Bytes) {
		return 0
	}
	return float64(c.Bytes[i]) * 8
}

// Rates returns the series in bits/s, one value per window.
func (c *ClassSeries) Rates(window time.Duration) []float64 {
	out := make([]float64, len(c.Bytes))
	for i := range c.Bytes {
		out[i] = c.Bits(i) / window.Seconds()
	}
	return out
}

// BitsBetween returns the bits sent in [from, to), taking a part of a
// window in proportion to its length (the simulated traffic is spread
// evenly within a window). Use a short Window when from and to do not
// fall on window boundaries.
func (c *ClassSeries) BitsBetween(window, from, to time.Duration) float64 {
	if to <= from || window <= 0 {
		return 0
	}
	var bits float64
	for i := int(max(from, 0) / window); i < len(c.Bytes); i++ {
		ws, we := time.Duration(i)*window, time.Duration(i+1)*window
		if ws >= to {
			break
		}
		overlap := min(we, to) - max(ws, from)
		if overlap > 0 {
			bits += c.Bits(i) * float64(overlap) / float64(window)
		}
	}
	return bits
}

// Run simulates t packet by packet over o.Duration, applying o.Events at
// their times, and reports every class's bytes per window. Time is the
// kernel's: nanoseconds, with token buckets as sch_htb.c and sch_tbf.c keep
// them (pkg/tbf's arithmetic): see docs/simulator.md for what is modelled.
//
// Errors name the device and class: a tree without a root qdisc, an event
// naming a class the tree does not have, a bucket that does not fit the
// kernel's tick field.
func Run(t *model.Tree, o RunOptions) (*Series, error) { return run(t, o, nil) }

// run is Run with the HTB engine newHTB gives (nil: newHTBEngine).
func run(t *model.Tree, o RunOptions, newHTB func(*model.Tree) (engine, error)) (*Series, error) {
	if t.Root == nil {
		return nil, fmt.Errorf("simulate %s: no shaper qdisc", t.Device)
	}
	if o.Duration <= 0 {
		return nil, fmt.Errorf("simulate %s: duration %v, want > 0", t.Device, o.Duration)
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.PacketSize == 0 {
		o.PacketSize = DefaultPacketSize
	}
	evs := slices.Clone(o.Events)
	slices.SortStableFunc(evs, func(a, b Event) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	var (
		e   engine
		err error
	)
	switch t.Root.Kind {
	case model.ShaperHTB:
		if newHTB != nil {
			e, err = newHTB(t)
		} else {
			e, err = newHTBEngine(t)
		}
	case model.ShaperTBF:
		e, err = newTBFEngine(t)
	default:
		return nil, fmt.Errorf("simulate %s: unknown shaper %q", t.Device, t.Root.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("simulate %s: %w", t.Device, err)
	}
	r := &runner{
		e: e, pkt: int64(o.PacketSize), window: int64(o.Window),
		end: int64(o.Duration), nwin: int((o.Duration + o.Window - 1) / o.Window),
	}
	if o.Link > 0 {
		r.linkNS = int64(psched.NewRateConfig(o.Link.BytesPerSecond(), 0, 0).L2T(int(o.PacketSize)))
	}
	r.srcs = make([]source, e.sources())
	for i := range r.srcs {
		r.srcs[i].next = -1
	}
	r.bytes = make([][]uint64, e.counters())
	for i := range r.bytes {
		r.bytes[i] = make([]uint64, r.nwin)
	}
	if err := r.setDemand(o.Demand, 0); err != nil {
		return nil, fmt.Errorf("simulate %s: %w", t.Device, err)
	}
	if err := r.run(evs); err != nil {
		return nil, fmt.Errorf("simulate %s: %w", t.Device, err)
	}
	s := &Series{Device: t.Device, Kind: t.Root.Kind, Window: o.Window, Packets: r.packets}
	s.Classes = e.series(r.bytes)
	return s, nil
}

// engine is one shaper's dequeue logic.
type engine interface {
	// sources is the number of queues; counters the number of byte
	// counters (classes).
	sources() int
	counters() int
	// source returns the queue index of handle h.
	source(h model.Handle) (int, bool)
	// backlogged says queue q became non-empty (on) or empty at now.
	backlogged(q int, on bool, now int64)
	// dequeue tries to send one packet of pkt bytes at now from the
	// backlogged queues. It returns the queue sent from and the counters
	// to charge, or -1 and a time after now at which a packet may be sent
	// (math.MaxInt64: never, until something else changes). An engine may
	// wake early: a dequeue that sends nothing changes nothing.
	dequeue(now, pkt int64) (q int, charged []int, wake int64)
	// change applies a new tree at now.
	change(t *model.Tree, now int64) error
	// series labels the counters.
	series(bytes [][]uint64) []ClassSeries
}

// source is one queue and what fills it.
type source struct {
	backlog  int64   // packets queued; infBacklog for Max
	interval float64 // ns between arrivals of a paced source
	next     int64   // next arrival (ns) of a paced source, -1 none
	carry    float64 // fractional ns of the arrival clock
	gen      int     // bumped on every demand change: older arrivals are stale
}

const infBacklog = math.MaxInt64 / 2

// runner drives an engine over time.
type runner struct {
	e       engine
	srcs    []source
	arrive  arrivals // paced sources by next arrival
	pkt     int64
	window  int64
	end     int64
	nwin    int
	linkNS  int64
	bytes   [][]uint64
	packets int64
}

// setBacklog sets queue i's backlog and tells the engine when it becomes
// empty or non-empty.
func (r *runner) setBacklog(i int, b int64, now int64) {
	s := &r.srcs[i]
	was := s.backlog > 0
	s.backlog = b
	if is := b > 0; is != was {
		r.e.backlogged(i, is, now)
	}
}

func (r *runner) setDemand(d map[model.Handle]Demand, now int64) error {
	// Apply in a fixed order: engines see backlog changes in handle order.
	hs := make([]model.Handle, 0, len(d))
	for h := range d {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	for _, h := range hs {
		v := d[h]
		i, ok := r.e.source(h)
		if !ok {
			return fmt.Errorf("demand for %s: no such leaf class", h)
		}
		s := &r.srcs[i]
		s.next = -1
		s.gen++
		switch {
		case v.IsMax():
			r.setBacklog(i, infBacklog, now)
		case v <= 0:
			if s.backlog >= infBacklog {
				r.setBacklog(i, 0, now)
			}
		default:
			if s.backlog >= infBacklog {
				r.setBacklog(i, 0, now)
			}
			s.interval = float64(r.pkt) * 8 / float64(v) * 1e9
			s.next, s.carry = now, 0
			r.arrive.push(arrival{at: now, src: i, gen: s.gen})
		}
	}
	return nil
}

func (r *runner) run(evs []Event) error {
	now, ei := int64(0), 0
	linkFree := int64(0)
	for now < r.end {
		for ei < len(evs) && int64(evs[ei].At) <= now {
			ev := evs[ei]
			ei++
			if ev.Tree != nil {
				if err := r.e.change(ev.Tree, now); err != nil {
					return fmt.Errorf("event at %v: %w", ev.At, err)
				}
			}
			if err := r.setDemand(ev.Demand, now); err != nil {
				return fmt.Errorf("event at %v: %w", ev.At, err)
			}
		}
		for len(r.arrive) > 0 && r.arrive[0].at <= now {
			a := r.arrive.pop()
			s := &r.srcs[a.src]
			if a.gen != s.gen { // stale: the demand changed since
				continue
			}
			r.setBacklog(a.src, s.backlog+1, now)
			s.carry += s.interval
			step := int64(s.carry)
			s.carry -= float64(step)
			s.next += max(step, 1)
			r.arrive.push(arrival{at: s.next, src: a.src, gen: s.gen})
		}
		next := r.end
		if ei < len(evs) {
			next = min(next, int64(evs[ei].At))
		}
		if len(r.arrive) > 0 {
			next = min(next, r.arrive[0].at)
		}
		if now < linkFree {
			now = min(next, linkFree)
			continue
		}
		q, charged, wake := r.e.dequeue(now, r.pkt)
		if q < 0 {
			now = min(next, max(wake, now+1))
			continue
		}
		if b := r.srcs[q].backlog; b < infBacklog {
			r.setBacklog(q, b-1, now)
		}
		r.packets++
		w := int(now / r.window)
		for _, c := range charged {
			r.bytes[c][w] += uint64(r.pkt)
		}
		linkFree = now + r.linkNS
	}
	return nil
}

// arrival is a paced source's next packet.
type arrival struct {
	at       int64
	src, gen int
}

// arrivals is a min-heap of arrivals by time (then source).
type arrivals []arrival

func (h arrivals) less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].src < h[j].src
}

func (h *arrivals) push(a arrival) {
	*h = append(*h, a)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *arrivals) pop() arrival {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && s.less(l, m) {
			m = l
		}
		if l+1 < n && s.less(l+1, m) {
			m = l + 1
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
