package sim

import "github.com/shaperd/shaperd/pkg/model"

// Reason says what keeps a class from sending more.
type Reason string

// Reasons, for leaf classes and TBF flows.
const (
	// ByDemand: the class gets all it asks for.
	ByDemand Reason = "demand"
	// ByCeil: the class sends at its own ceil.
	ByCeil Reason = "ceil"
	// ByParent: an ancestor (Result.By) is at its ceil, or the ancestor
	// it borrows from has nothing more to lend and no class of the same
	// prio competes for it.
	ByParent Reason = "parent"
	// ByRate: the class gets only its guaranteed rate; the ancestors'
	// rates are used up by guaranteed traffic (oversubscription), so
	// there is nothing to borrow.
	ByRate Reason = "rate"
	// ByPrio: the spare bandwidth went to classes of a higher priority
	// (a lower prio number).
	ByPrio Reason = "prio"
	// ByShare: the spare bandwidth was shared with classes of the same prio,
	// in proportion to their quanta (HTB's deficit round robin).
	ByShare Reason = "share"
	// ByFIFO: the flow shares a TBF's single queue with other limited
	// flows. The rate shown is the equal (max-min fair) split; the kernel
	// guarantees none: with TSO and a short queue one TCP user was
	// measured taking 83% of a 30mbit TBF from two identical others.
	ByFIFO Reason = "fifo"
	// ByBandwidth: a TBF's rate limits the flow (it is the only one
	// limited).
	ByBandwidth Reason = "bandwidth"
)

// Result is the steady state of one device.
type Result struct {
	// Device is the tree's device; Kind its root qdisc.
	Device string
	Kind   model.ShaperKind
	// Bandwidth is the sum of the top-level classes' rates (HTB) or the
	// TBF rate, in bits/s.
	Bandwidth float64
	// Demand is the sum of the demands of leaf classes (HTB) or flows
	// (TBF), in bits/s; +Inf when one of them is Max.
	Demand float64
	// Total is what the shaper lets through in bits/s: the sum of the
	// leaves' (or flows') rates.
	Total float64
	// Guaranteed is the sum of the rates of the backlogged leaves,
	// min(demand, rate) each, in bits/s (HTB). It exceeds Bandwidth when
	// guarantees are oversubscribed: HTB then lets Total exceed Bandwidth.
	Guaranteed float64
	// Classes are the tree's classes in tree order (HTB).
	Classes []ClassResult
	// Flows are the flows given for a TBF, in order.
	Flows []FlowResult
	// Queues are the per-queue trees of an mq root, by queue, with the
	// split the policy loop's rebalancing settles on (solveMQ).
	Queues []QueueResult
}

// ClassResult is one HTB class in steady state. Rates are in bits/s.
type ClassResult struct {
	Handle, Parent model.Handle
	Labels         model.Labels
	// Leaf is set for classes without children (the ones with a queue).
	Leaf bool
	// Demand is the leaf's demand; 0 for inner classes.
	Demand Demand
	// Rate is what passes through the class: what a leaf sends, the sum
	// of its leaves for an inner class.
	Rate float64
	// Guaranteed is what a leaf sends on its own rate tokens (HTB level 0);
	// Borrowed is what ancestors lend it. Rate = Guaranteed + Borrowed.
	Guaranteed, Borrowed float64
	// LimitedBy says what keeps a leaf from sending more (ByDemand when it
	// is satisfied); for an inner class ByCeil when it is at its ceil, else
	// "".
	LimitedBy Reason
	// By is the class that limits it for ByParent, ByRate, ByPrio and
	// ByShare (the lender or the ancestor at its ceil); 0 otherwise.
	By model.Handle
	// ShortBurst is set for a leaf that borrows or sends at its ceil while
	// its cburst holds fewer than BurstPackets packets (Options.PacketSize):
	// the kernel then loses ceil tokens while the class waits for a lender,
	// and the class falls short of the prediction (measured with 64 KiB GSO
	// packets: 15 KiB cburst -9..-12 %, 64 KiB -7 %, 256 KiB -1 % at 60mbit).
	ShortBurst bool
	// ShortQueue is set for a leaf whose leaf qdisc is a bfifo smaller than
	// one aggregate (Options.Aggregate): the kernel drops every aggregate
	// that does not fit whole, and TCP through it gets a few percent of
	// Rate (measured: 0.10 Mbit/s of a 2mbit ceil with a 12,500-byte bfifo
	// and 64 KiB aggregates). Build never makes such a leaf (it splits
	// aggregates in front of small queues); a tree dumped from a kernel
	// can have one.
	ShortQueue bool
}

// Flow is traffic through a TBF shaper, one per user.
type Flow struct {
	Name   string
	Demand Demand
}

// FlowResult is a Flow's predicted rate in bits/s.
type FlowResult struct {
	Name      string
	Demand    Demand
	Rate      float64
	LimitedBy Reason
}
