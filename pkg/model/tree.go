// Package model holds shaperd's picture of one interface's traffic control:
// the desired and the actual Tree of qdiscs, classes and filters, how a
// desired Tree is built from per-user targets, and Diff, which turns the
// difference between two trees into the minimal ordered list of kernel changes.
//
// Nothing here speaks netlink; pkg/kernel applies Changes and dumps Trees.
package model

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// Handle is a tc handle or class id, major:minor (16 bits each), as tc prints "1:a".
type Handle uint32

// MakeHandle returns the handle major:minor.
func MakeHandle(major, minor uint16) Handle { return Handle(uint32(major)<<16 | uint32(minor)) }

// Major is the qdisc part of the handle.
func (h Handle) Major() uint16 { return uint16(h >> 16) }

// Minor is the class part of the handle.
func (h Handle) Minor() uint16 { return uint16(h) }

// String formats the handle as tc does, in hex: "1:a", "1:" for a qdisc.
func (h Handle) String() string {
	if h.Minor() == 0 {
		return fmt.Sprintf("%x:", h.Major())
	}
	return fmt.Sprintf("%x:%x", h.Major(), h.Minor())
}

// Well-known handles of a shaperd tree.
const (
	// HandleRoot is TC_H_ROOT, the parent of a root qdisc.
	HandleRoot Handle = 0xFFFFFFFF
	// HandleIngress is TC_H_INGRESS, the parent of an ingress qdisc.
	HandleIngress Handle = 0xFFFFFFF1
	// RootQdisc is the handle of the shaper qdisc shaperd installs at the root.
	RootQdisc Handle = 1 << 16
	// RootClass is the HTB class carrying the interface's whole bandwidth.
	RootClass Handle = 1<<16 | 1
	// DefaultClass receives traffic no user filter matches.
	DefaultClass Handle = 1<<16 | 2
	// FirstTierMinor..LastTierMinor are the minors of tier aggregate classes.
	FirstTierMinor uint16 = 0x10
	LastTierMinor  uint16 = 0xff
	// FirstUserMinor..LastUserMinor are the minors of per-user leaf classes.
	FirstUserMinor uint16 = 0x100
	LastUserMinor  uint16 = 0xfffe
)

// ShaperKind is the root qdisc shaperd installs on an interface.
type ShaperKind string

// Shaper kinds.
const (
	ShaperHTB ShaperKind = "htb" // per-user classes under a root class
	ShaperTBF ShaperKind = "tbf" // one token bucket for the whole interface
)

// Direction says which traffic of an interface is shaped.
type Direction string

// Directions.
const (
	Egress  Direction = "egress"  // leaving the interface: shaped by its root qdisc
	Ingress Direction = "ingress" // arriving: redirected to an IFB device and shaped there
)

// MatchField says which address of a packet identifies the user.
type MatchField string

// Match fields.
const (
	MatchDst MatchField = "dst" // downloads: the user's address is the destination
	MatchSrc MatchField = "src" // uploads: the user's address is the source
)

// Tree is everything shaperd manages on one device: the root qdisc, its
// classes and the filters that classify into them. For ingress shaping the
// Tree lives on the IFB device and Redirect describes the ingress qdisc and
// mirred redirect on the real interface.
type Tree struct {
	// Device is the interface the root qdisc is installed on (the IFB device
	// for ingress shaping).
	Device string
	// Redirect is set for ingress shaping.
	Redirect *Redirect
	// Root is the shaper qdisc at the device's root; nil when the device has
	// no shaperd qdisc (an actual tree of an unmanaged device).
	Root *Qdisc
	// Queues are the per-queue HTB qdiscs under an mq Root, by queue
	// (Handle QueueHandle(q), Parent QueueParent(q)); empty otherwise.
	Queues []Qdisc
	// Classes, sorted by Handle. Empty for TBF. Under mq: the classes of
	// every queue's tree (the handle's major is the queue's).
	Classes []Class
	// Filters, sorted by Prefix then Match. Empty for TBF.
	Filters []Filter
	// Foreign describes objects of other tools that a dump found on the
	// device (a root qdisc that is not shaperd's, filters of other kinds
	// or priorities), for status. Diff and Equal ignore it.
	Foreign []string
}

// Redirect is the ingress qdisc on Interface with a filter that sends every
// arriving packet to the IFB device (ingress qdisc + u32 match-all + mirred).
type Redirect struct {
	Interface string // the real interface whose arrivals are shaped
	IFB       string // the IFB device shaperd creates and owns
	// Queues is how many transmit queues the IFB is created with (per-queue
	// trees need one per tree; 0: the kernel's one). It only matters when
	// the device is created: RedirectEqual leaves it out.
	Queues int
}

// Qdisc is a root shaper: HTB (with DefaultMinor) or TBF (with TBF set),
// mq, or the HTB qdisc of one queue under mq.
type Qdisc struct {
	Kind   ShaperKind
	Handle Handle // RootQdisc; MQHandle; QueueHandle(q)
	// Parent is the mq class a queue's HTB hangs from (QueueParent); 0 for
	// a root qdisc.
	Parent Handle
	// DefaultMinor is HTB's default class minor (unclassified traffic).
	DefaultMinor uint16
	// TBF holds the parameters of a TBF root; nil for HTB.
	TBF *TBFParams
	// SizeOverhead is the overhead of the qdisc's size table (TCA_STAB,
	// no table): a negative link overhead, which the rate specs cannot
	// carry (psched.Framing.SizeTableOverhead); 0: no size table.
	SizeOverhead int32
	// Stats are filled in actual trees.
	Stats *Stats
}

// TBFParams are the parameters of a whole-interface TBF shaper.
type TBFParams struct {
	Rate tbf.Rate
	// Burst is the bucket size in bytes; also the largest packet (max_size).
	// The kernel dumps only the bucket in ticks: pkg/kernel reconstructs
	// Burst (psched.XmitSize or tbf.BurstFromTicks), and TBFParamsEqual
	// compares bursts (and MTUs) as dumped ticks, within one tick.
	Burst tbf.Size
	Limit tbf.Size // bytes queued before dropping (from latency)
	// PeakRate and MTU enable the second (peak) bucket; 0 disables it.
	PeakRate tbf.Rate
	MTU      tbf.Size
	// Framing is the link's per-packet overhead, mpu and link layer, sent
	// in both rate specs (its rate-spec part, psched.Framing.RateSpec).
	Framing psched.Framing
}

// Class is one HTB class.
type Class struct {
	Handle Handle
	Parent Handle // RootQdisc for the root class
	// Rate is guaranteed, Ceil is the most it may borrow up to. The kernel
	// keeps bytes per second, so compare BytesPerSecond values.
	Rate, Ceil tbf.Rate
	// Burst and CBurst are the bucket sizes in bytes that Buffer and CBuffer
	// were computed from (informative in actual trees).
	Burst, CBurst tbf.Size
	// Buffer and CBuffer are the bucket sizes in psched ticks as the kernel
	// holds them; Build computes them from Burst/CBurst with pkg/tbf.
	Buffer, CBuffer uint32
	Quantum         uint32 // bytes; always explicit
	Prio            uint32
	// Framing is the link's per-packet overhead, mpu and link layer, sent
	// in the rate and ceil rate specs (its rate-spec part,
	// psched.Framing.RateSpec; a negative overhead is the root's SizeOverhead).
	Framing psched.Framing
	// Leaf is the qdisc under a leaf class; nil leaves the kernel default.
	// Convention for actual (dumped) trees: a class whose leaf is the
	// kernel's default (the pfifo HTB creates itself, without a handle of
	// its own) and an inner class (no leaf at all) have Leaf == nil;
	// only a leaf qdisc that someone installed is reported. Build leaves a
	// pfifo without a limit as nil too. Diff compares Leaf with LeafEqual
	// (Limit 0 matches any limit); an OpChange to Leaf nil means "delete the
	// leaf qdisc", after which the kernel grafts its default pfifo again.
	Leaf *LeafQdisc
	// Labels say whom the class serves (not stored in the kernel).
	Labels Labels
	// Stats are filled in actual trees.
	Stats *Stats
}

// Labels name what a class is for, for errors, status and metrics.
type Labels struct {
	Kind string // "root", "default", "tier", "node", "user"
	Tier string
	User string
	// Node is a node class's name, or the node a user's class hangs from.
	Node string
}

// LeafQdisc is the qdisc under a leaf class, with the parameters of its
// kind. A zero parameter is the kernel's default (it is not sent, and it
// matches any dumped value in LeafEqual).
type LeafQdisc struct {
	Kind string // LeafPfifo, LeafBfifo, LeafFQCodel, LeafCake, LeafSFQ, or another kind sent without options
	// Limit: packets for pfifo, fq_codel and sfq, bytes for bfifo.
	Limit uint32
	// Target and Interval are fq_codel's (kernel defaults 5ms and 100ms);
	// the kernel keeps them in microseconds.
	Target, Interval time.Duration
	// Flows: fq_codel's flow count (default 1024), sfq's most flows (127).
	Flows uint32
	// Quantum: bytes a flow may send per round (fq_codel, sfq; default MTU).
	Quantum uint32
	// Diffserv is cake's priority mode: "besteffort", "diffserv3" (the
	// kernel's default), "diffserv4", "diffserv8" or "precedence".
	Diffserv string
	// Latency sizes a bfifo without a Limit: Build sets Limit to the
	// class's ceil * Latency bytes, at least two frames. Not a kernel
	// value (dumped leaves have 0) and ignored by LeafEqual.
	Latency time.Duration
	// Segment is set on a LeafTBF leaf only: the largest frame its queue
	// holds (the TBF's max_size; a multiple of SegmentGrain bytes). The
	// TBF splits every GSO or GRO aggregate longer than Segment into
	// frames before they enter its byte queue of Limit bytes (its bfifo
	// child), so a small queue drops single frames, never a whole 64 KiB
	// aggregate. Its rate is SegmentRate: it splits, the class shapes.
	Segment tbf.Size
}

// Leaf qdisc kinds shaperd knows the parameters of.
const (
	LeafPfifo   = "pfifo"
	LeafBfifo   = "bfifo"
	LeafFQCodel = "fq_codel"
	LeafCake    = "cake"
	LeafSFQ     = "sfq"
	// LeafTBF is the segmenting leaf Build makes from a bfifo whose queue
	// would hold fewer than SegmentBelow aggregates (see LeafQdisc.Segment).
	LeafTBF = "tbf"
)

// Byte-limited leaves and the packets that reach them. A TCP sender hands
// the qdisc GSO aggregates of up to the device's gso_max_size (64 KiB by
// default, more with BIG TCP), and a router's NIC builds GRO aggregates as
// large from forwarded traffic; HTB dequeues an aggregate as one packet.
// A bfifo smaller than an aggregate drops it whole, every time, and TCP
// collapses to a few percent of the class's rate; a bfifo that holds a
// few aggregates at a low ceil holds seconds of queue. So Build gives a
// bfifo leaf whose limit holds fewer than SegmentBelow of the interface's
// largest aggregates a segmenting TBF in front of its byte queue instead
// (LeafTBF), up to a ceil of SegmentRate/8; above that a bfifo holds at
// least two aggregates.
const (
	// DefaultFrame is the largest frame Build assumes when the interface's
	// Frame is not known: a 1500-byte MTU, the Ethernet header and two
	// VLAN tags.
	DefaultFrame tbf.Size = 1500 + FrameOverhead
	// FrameOverhead is what a frame adds to the device's MTU: the Ethernet
	// header (14 bytes) and two VLAN tags (8 bytes).
	FrameOverhead tbf.Size = 14 + 8
	// DefaultAggregate is the largest GSO or GRO aggregate Build assumes
	// when the interface's Aggregate is not known: the kernel's default
	// gso_max_size and gro_max_size, 64 KiB.
	DefaultAggregate tbf.Size = 65536
	// SegmentBelow: a byte queue that holds fewer aggregates than this is
	// fed by a segmenting TBF. Four keeps the ping of a saturated user
	// within its queue latency plus a quarter of it: the aggregate HTB has
	// just sent costs the class aggregate/ceil before the next packet.
	SegmentBelow = 4
	// SegmentRate is the segmenting TBF's rate, one byte per nanosecond:
	// far above every class it serves (at most SegmentRate/8), so it never
	// holds a packet back for long, and its bucket (max_size) is whole
	// 64 ns ticks of SegmentGrain bytes, which the kernel dumps exactly.
	SegmentRate = 8 * tbf.Gbit
	// SegmentGrain is the granule of Segment: one 64 ns psched tick at
	// SegmentRate.
	SegmentGrain tbf.Size = 64
)

// CakeDiffservModes are cake's priority modes by name, with the kernel's
// numbers (enum CAKE_DIFFSERV_*).
var CakeDiffservModes = map[string]uint32{
	"diffserv3": 0, "diffserv4": 1, "diffserv8": 2, "besteffort": 3, "precedence": 4,
}

// Filter classifies packets whose Match address lies in Prefix into ClassID.
type Filter struct {
	Prefix  netip.Prefix
	Match   MatchField
	ClassID Handle
	// Labels of the user the filter belongs to.
	Labels Labels
	// Damaged is set in actual trees when the kernel objects that make up
	// this filter are incomplete or misplaced; Diff then re-creates it.
	Damaged bool
}

// Stats are the kernel's counters for a qdisc or class.
type Stats struct {
	Bytes, Packets   uint64
	Drops            uint32
	Overlimits       uint32
	Backlog, Qlen    uint32
	Tokens, CTokens  int32 // HTB only: psched ticks
	RateEstimateBits uint64
}
