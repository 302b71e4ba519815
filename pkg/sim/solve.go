package sim

import (
	"fmt"
	"math"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// DemandFunc returns the demand of a leaf class of an HTB tree (a user's
// class, the default class). It is not called for inner classes.
type DemandFunc func(c *model.Class) Demand

// Options tune Solve; the zero value is the default.
type Options struct {
	// Flows share a TBF root (one per user); HTB ignores them.
	Flows []Flow
	// PacketSize is the mean size in bytes of the packets HTB dequeues;
	// a GSO/GRO aggregate counts as one packet (up to 64 KiB on a router
	// that forwards with GRO, or from senders with TSO; ~40 KB measured
	// in the namespace lab). HTB's DRR
	// ends a class's turn only after the packet that overdraws its
	// deficit, so a class whose quantum is below the packet size sends one
	// packet per round: its share weight is max(quantum, PacketSize).
	// 0 means DefaultPacketSize.
	PacketSize tbf.Size
	// Aggregate is the largest GSO or GRO aggregate reaching the leaves,
	// in bytes; 0 means model.DefaultAggregate (64 KiB). A bfifo leaf
	// smaller than one is flagged (ClassResult.ShortQueue).
	Aggregate tbf.Size
}

// DefaultPacketSize is one full Ethernet frame without FCS (no GSO).
const DefaultPacketSize tbf.Size = 1514

// Solve predicts the steady state of t: for HTB, every class's rate with
// demand (nil: every class 0); for TBF, the share of each of o.Flows. It
// does not change t.
//
// Errors name the device and class: a tree without a root qdisc, an
// unknown kind, a class whose parent is missing, a hierarchy deeper than
// HTB's 8 levels.
func Solve(t *model.Tree, demand DemandFunc, o Options) (*Result, error) {
	if t.Root == nil {
		return nil, fmt.Errorf("simulate %s: no shaper qdisc", t.Device)
	}
	pkt := o.PacketSize
	if pkt == 0 {
		pkt = DefaultPacketSize
	}
	var res *Result
	var err error
	switch t.Root.Kind {
	case model.ShaperHTB:
		res, err = solveHTB(t, demand, float64(pkt))
	case model.ShaperTBF:
		return solveTBF(t, o.Flows)
	case model.ShaperMQ:
		res, err = solveMQ(t, demand, float64(pkt))
	default:
		return nil, fmt.Errorf("simulate %s: unknown shaper %q", t.Device, t.Root.Kind)
	}
	if err != nil {
		return nil, err
	}
	flagShortQueues(t, res, o.Aggregate)
	return res, nil
}

// flagShortQueues sets ShortQueue on the leaves of res whose class in t
// has a bfifo leaf smaller than aggregate bytes (0: the default).
func flagShortQueues(t *model.Tree, res *Result, aggregate tbf.Size) {
	_, aggregate = model.LinkSizesOf(model.InterfaceSpec{Aggregate: aggregate})
	short := map[model.Handle]bool{}
	for _, c := range t.Classes {
		if l := c.Leaf; l != nil && l.Kind == model.LeafBfifo && l.Limit != 0 && tbf.Size(l.Limit) < aggregate {
			short[c.Handle] = true
		}
	}
	for i := range res.Classes {
		res.Classes[i].ShortQueue = res.Classes[i].Leaf && short[res.Classes[i].Handle]
	}
}

// htbMaxDepth is TC_HTB_MAXDEPTH: HTB's levels are 0 (leaves) to 7.
const htbMaxDepth = 8

// node is one class being solved. Rates are in bytes/s, as the kernel
// keeps them.
type node struct {
	parent         int // index, -1 for a top-level class
	children       []int
	level          int
	rate, ceil     float64
	quantum        float64
	prio           int
	want           float64 // leaf demand
	total          float64 // traffic through the class
	charged        float64 // traffic charged to its rate tokens
	guar, borrowed float64
	reason         Reason
	by             int // index of the limiting class, -1 none
	group          int // scratch: group index during a fill, -1 none
}

// htb is one HTB solve.
type htb struct {
	t     *model.Tree
	nodes []node
	eps   float64
	pkt   float64 // bytes per dequeued packet
}

func solveHTB(t *model.Tree, demand DemandFunc, pkt float64) (*Result, error) {
	s := &htb{t: t, nodes: make([]node, len(t.Classes)), pkt: pkt}
	if err := s.link(); err != nil {
		return nil, fmt.Errorf("simulate %s: %w", t.Device, err)
	}
	var bw float64
	for i := range s.nodes {
		if s.nodes[i].parent < 0 {
			bw += s.nodes[i].rate
		}
	}
	s.eps = max(bw*1e-9, 1e-6)
	res := &Result{Device: t.Device, Kind: model.ShaperHTB, Bandwidth: bw * 8}
	lenders := make([][]int, htbMaxDepth)
	for i := range s.nodes {
		n := &s.nodes[i]
		if len(n.children) > 0 {
			lenders[n.level] = append(lenders[n.level], i)
			continue
		}
		d := Demand(0)
		if demand != nil {
			d = demand(&t.Classes[i])
		}
		n.want = max(float64(d)/8, 0)
		res.Demand += n.want * 8
		g := min(n.want, n.rate, n.ceil)
		n.guar = g
		res.Guaranteed += g * 8
		for j := i; j >= 0; j = s.nodes[j].parent {
			s.nodes[j].total += g
			s.nodes[j].charged += g
		}
	}
	for level := 1; level < htbMaxDepth; level++ {
		for _, a := range lenders[level] {
			s.lend(a)
		}
	}
	res.Classes = make([]ClassResult, len(s.nodes))
	for i := range s.nodes {
		res.Classes[i] = s.result(i)
		if s.nodes[i].parent < 0 {
			res.Total += s.nodes[i].total * 8
		}
	}
	return res, nil
}

// link resolves parents, children and HTB levels: leaves are level 0, an
// inner class one level below its parent, top-level inner classes level 7.
func (s *htb) link() error {
	cs := s.t.Classes
	idx := make(map[model.Handle]int, len(cs))
	for i := range cs {
		if _, dup := idx[cs[i].Handle]; dup {
			return fmt.Errorf("class %s listed twice", cs[i].Handle)
		}
		idx[cs[i].Handle] = i
	}
	for i := range cs {
		c := &cs[i]
		n := &s.nodes[i]
		n.parent, n.by, n.group = -1, -1, -1
		n.rate = float64(c.Rate.BytesPerSecond())
		n.ceil = float64(c.Ceil.BytesPerSecond())
		if c.Ceil == 0 { // model.Build's convention: ceil = rate
			n.ceil = n.rate
		}
		q := c.Quantum
		if q == 0 {
			q = kernelQuantum(c)
		}
		n.quantum = max(float64(q), s.pkt) // DRR bytes per round
		n.prio = int(min(c.Prio, htbMaxDepth-1))
		if c.Parent == s.t.Root.Handle || c.Parent.Minor() == 0 {
			continue
		}
		p, ok := idx[c.Parent]
		if !ok {
			return fmt.Errorf("class %s: parent %s not in the tree", c.Handle, c.Parent)
		}
		n.parent = p
		s.nodes[p].children = append(s.nodes[p].children, i)
	}
	for i := range s.nodes {
		if len(s.nodes[i].children) == 0 {
			continue
		}
		level, depth := htbMaxDepth-1, 0
		for j := s.nodes[i].parent; j >= 0; j = s.nodes[j].parent {
			level--
			if depth++; depth >= htbMaxDepth {
				return fmt.Errorf("class %s: more than %d levels (or a parent loop)", cs[i].Handle, htbMaxDepth)
			}
		}
		if level < 1 {
			return fmt.Errorf("class %s: more than %d levels", cs[i].Handle, htbMaxDepth)
		}
		s.nodes[i].level = level
	}
	return nil
}

// kernelQuantum is the quantum HTB picks when none is given: rate/r2q
// clamped to 1000..200000 bytes.
func kernelQuantum(c *model.Class) uint32 {
	const r2q, lo, hi = 10, 1000, 200000
	return uint32(min(max(c.Rate.BytesPerSecond()/r2q, lo), hi))
}

// cand is a leaf that may borrow in one fill.
type cand struct {
	leaf   int
	w, cap float64
	t      float64 // cap / w: the level at which it is satisfied
	alloc  float64
	active bool
}

// lend distributes a's spare among its descendant leaves: lower prio
// numbers first, within a prio by quantum (DRR), each leaf capped by its
// demand and ceil, each group of leaves by the ceil of the classes between
// them and a.
func (s *htb) lend(a int) {
	na := &s.nodes[a]
	budget := min(na.rate-na.charged, na.ceil-na.total)
	var byPrio [htbMaxDepth][]int
	var walk func(i int)
	walk = func(i int) {
		for _, c := range s.nodes[i].children {
			if len(s.nodes[c].children) > 0 {
				walk(c)
				continue
			}
			if s.hungry(c) {
				byPrio[s.nodes[c].prio] = append(byPrio[s.nodes[c].prio], c)
			}
		}
	}
	walk(a)
	if budget <= s.eps {
		for p := range byPrio {
			for _, l := range byPrio[p] {
				if s.nodes[l].reason == "" {
					s.nodes[l].reason, s.nodes[l].by = ByRate, a
				}
			}
		}
		return
	}
	var cands []cand
	start, lent := na.charged, 0.0
	for p := range byPrio {
		cands = cands[:0]
		for _, l := range byPrio[p] {
			if !s.hungry(l) {
				continue
			}
			if x := s.blocked(l, a); x >= 0 {
				s.nodes[l].reason, s.nodes[l].by = ByParent, x
				continue
			}
			if budget <= s.eps {
				s.nodes[l].reason, s.nodes[l].by = ByPrio, a
				continue
			}
			n := &s.nodes[l]
			c := min(n.want, n.ceil) - n.total
			cands = append(cands, cand{leaf: l, w: n.quantum, cap: c, t: c / n.quantum, active: true})
		}
		if len(cands) == 0 {
			continue
		}
		budget -= s.fill(a, cands, budget, lent > 0)
		lent = na.charged - start
	}
}

// hungry reports whether leaf l wants more and is below its ceil.
func (s *htb) hungry(l int) bool {
	n := &s.nodes[l]
	return n.want-n.total > s.eps && n.ceil-n.total > s.eps
}

// blocked returns the first class between leaf l and lender a that is at its
// ceil (CANT_SEND: it is not in a's feed), or -1.
func (s *htb) blocked(l, a int) int {
	for x := s.nodes[l].parent; x != a && x >= 0; x = s.nodes[x].parent {
		if s.nodes[x].ceil-s.nodes[x].total <= s.eps {
			return x
		}
	}
	return -1
}

// add gives leaf l amt more, lent by a: it passes through every ancestor and
// is charged to the rate tokens of a and a's ancestors.
func (s *htb) add(l, a int, amt float64) {
	s.nodes[l].borrowed += amt
	charge := false
	for j := l; j >= 0; j = s.nodes[j].parent {
		if j == a {
			charge = true
		}
		s.nodes[j].total += amt
		if charge {
			s.nodes[j].charged += amt
		}
	}
}

// result is the ClassResult of node i.
func (s *htb) result(i int) ClassResult {
	c := &s.t.Classes[i]
	n := &s.nodes[i]
	r := ClassResult{Handle: c.Handle, Parent: c.Parent, Labels: c.Labels, Leaf: len(n.children) == 0,
		Rate: n.total * 8, Guaranteed: n.guar * 8, Borrowed: n.borrowed * 8}
	if !r.Leaf {
		if n.ceil-n.total <= s.eps {
			r.LimitedBy = ByCeil
		}
		return r
	}
	if r.Borrowed > 0 || n.ceil-n.total <= s.eps {
		r.ShortBurst = float64(cburst(c)) < BurstPackets*s.pkt
	}
	r.Demand = Demand(n.want * 8)
	if math.IsInf(n.want, 1) {
		r.Demand = Max
	}
	switch {
	case n.want-n.total <= s.eps:
		r.LimitedBy = ByDemand
	case n.ceil-n.total <= s.eps:
		r.LimitedBy = ByCeil
	case n.reason != "":
		r.LimitedBy = n.reason
		if n.by >= 0 {
			r.By = s.t.Classes[n.by].Handle
		}
	default: // a top-level leaf: nobody to borrow from
		r.LimitedBy = ByRate
	}
	return r
}

// BurstPackets is how many packets a borrowing class's cburst should hold
// for the steady state to apply; see ClassResult.ShortBurst.
const BurstPackets = 4

// cburst is c's ceil bucket in bytes: CBurst, else from the ticks the
// kernel holds (dumped trees).
func cburst(c *model.Class) tbf.Size {
	if c.CBurst != 0 || c.CBuffer == 0 {
		return c.CBurst
	}
	return tbf.BurstFromTicks(c.Ceil, c.CBuffer)
}
