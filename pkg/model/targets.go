package model

import (
	"net/netip"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// Targets is what one interface should look like now: the interface's
// settings and every user's (and tier's) effective rates. pkg/policy produces
// it; Build turns it into a desired Tree.
type Targets struct {
	Interface InterfaceSpec
	// Tiers with an aggregate cap get an intermediate class; others don't.
	Tiers []TierTarget
	// Nodes are the network behind the interface (sites, buildings,
	// access points), each an inner class under its parent (or the root
	// class), parents listed before their children.
	Nodes []NodeTarget
	Users []UserTarget
	// Queues are the root classes of the per-queue trees (Interface.Queues
	// > 1), by queue; a length other than Interface.Queues splits the
	// bandwidth evenly (EvenQueueTargets).
	Queues []QueueTarget
	// TierQueues are, by tier name, the tier's aggregate class in each
	// queue's tree (Interface.Queues > 1), by queue: the share of the
	// tier's rate and ceil the queue may use now (RebalanceTier). A tier
	// without an entry of length Interface.Queues is split evenly
	// (EvenTierTargets). The map is replaced, never changed in place.
	TierQueues map[string][]QueueTarget
	// NodeQueues are, by node name, a split node's class in each queue's
	// tree (Interface.Queues > 1; SplitNodes), as TierQueues are a tier's:
	// the share of the node's rate and ceil the queue may use now. A split
	// node without an entry of length Interface.Queues gets the idle split.
	// The map is replaced, never changed in place.
	NodeQueues map[string][]QueueTarget
}

// InterfaceSpec is one managed interface.
type InterfaceSpec struct {
	Name      string // the real interface
	Shaper    ShaperKind
	Direction Direction
	// IFB is the IFB device for Direction Ingress.
	IFB       string
	Bandwidth tbf.Rate // root class rate and ceil (HTB) or the TBF rate
	Match     MatchField
	// DefaultRate/DefaultCeil shape unclassified traffic (HTB).
	DefaultRate, DefaultCeil tbf.Rate
	// Leaf is the leaf qdisc of every user class; nil: the kernel's default.
	Leaf *LeafQdisc
	// Frame and Aggregate are the largest frame and the largest GSO or
	// GRO aggregate that reach this interface's qdisc (measured by the
	// daemon from the kernel's link attributes); they size byte-limited
	// leaves. 0: DefaultFrame and DefaultAggregate.
	Frame, Aggregate tbf.Size
	// TBF settings: Burst (0: a default from the rate), Latency (limit =
	// rate*latency + burst), optional PeakRate with MTU.
	Burst    tbf.Size
	Latency  time.Duration
	PeakRate tbf.Rate
	MTU      tbf.Size
	// Framing is the link's per-packet accounting (overhead, mpu, ATM),
	// given to every class (HTB) or the TBF's rates.
	Framing psched.Framing
	// Queues > 1 builds one HTB tree per transmit queue under an mq root
	// (see ShaperMQ); 0 and 1 build the single tree.
	Queues int
}

// TierTarget is a tier with an aggregate class that its users share.
type TierTarget struct {
	Name       string
	Rate, Ceil tbf.Rate
	Burst      tbf.Size // 0: default
}

// NodeTarget is a node of the network behind an interface: an inner
// class that caps what every node and user under it gets together.
type NodeTarget struct {
	Name string
	// Parent is the node this one hangs from; "": the root class.
	Parent     string
	Rate, Ceil tbf.Rate
	Burst      tbf.Size // 0: default
}

// UserTarget is one user's effective shaping on one interface.
type UserTarget struct {
	Name string
	Tier string
	// Node is the node the user's class hangs from ("": the tier's
	// aggregate class, else the root class).
	Node     string
	Prefixes []netip.Prefix
	// Rate is guaranteed; Ceil (>= Rate) is the most the user may borrow up to.
	Rate, Ceil tbf.Rate
	// Burst/CBurst in bytes; 0 means the default for the rate.
	Burst, CBurst tbf.Size
	Prio          uint32
	// Quantum is the class's DRR quantum in bytes: its share of what it
	// borrows beside its siblings. 0: HTB's default for Rate
	// (psched.HTBQuantum).
	Quantum uint32
	// Leaf is the user's own leaf qdisc (from the tier's or the user's
	// settings); nil: the interface's Leaf.
	Leaf *LeafQdisc
}
