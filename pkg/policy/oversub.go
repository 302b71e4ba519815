package policy

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// Oversubscription is one HTB parent whose children's guaranteed rates add
// up to more than the parent's own rate. HTB lets every class send at its
// own rate without asking its parent, so the parent would stop being a
// cap; the policy scales the children's rates down by Capacity/Guaranteed
// (see scaleGuarantees) and records it here.
type Oversubscription struct {
	// Tier is the tier whose aggregate class is the parent, Node the node
	// whose class is; both "" for the interface's root class (bandwidth).
	Tier, Node string
	// Guaranteed is the sum of the children's rates before scaling;
	// Capacity is the parent's rate they are scaled to fit.
	Guaranteed, Capacity tbf.Rate
	// Num / 2^Shift is the scale: every child's rate becomes
	// floor(rate*Num / 2^Shift), Num = floor(Capacity * 2^Shift /
	// Guaranteed) with Shift the smallest (at least 7) that makes Num at
	// least ScaleMin. So the scale keeps 8 significant bits however
	// oversubscribed the parent is (x1.5 gives 170/2^8, x2000 gives
	// 131/2^18): rates stay proportional, and a tier twice another's stays
	// twice as fast. The quantized scale stays the same through most
	// single-user changes (a user added or removed, a user's rate
	// changed), so those change one class instead of every class under
	// the parent: with 2,000 users of one rate, one in 10 to 20 moves it.
	Num   uint64
	Shift uint
}

// ScaleMin is the least Oversubscription.Num: guarantees are scaled in
// steps of at most 1/128 of the scale (at most 0.8 % of a parent's rate
// left unguaranteed; ceilings are not scaled, so borrowing uses it).
// Finer steps would move the scale, and rewrite every class under the
// parent, on a larger share of single-user changes.
const ScaleMin = 128

// newOversubscription is the oversubscription of sum over capacity
// (sum > capacity), under tier ("" for the root).
func newOversubscription(tier string, sum, capacity uint64) Oversubscription {
	o := Oversubscription{Tier: tier, Guaranteed: tbf.Rate(sum), Capacity: tbf.Rate(capacity)}
	// capacity < sum, so capacity*2^Shift/sum < 2^Shift fits in 64 bits
	// for every Shift < 64; Num doubles (or so) with each step.
	for o.Shift = 7; o.Shift < 63; o.Shift++ {
		hi, lo := bits.Mul64(capacity, 1<<o.Shift)
		o.Num, _ = bits.Div64(hi, lo, sum) // hi < sum since capacity < sum
		if o.Num >= ScaleMin {
			break
		}
	}
	return o
}

// Factor is Guaranteed/Capacity (> 1).
func (o Oversubscription) Factor() float64 { return float64(o.Guaranteed) / float64(o.Capacity) }

// scale is o's rate scaling: floor(r * Num / 2^Shift), at least
// config.MinRate.
func (o Oversubscription) scale(r tbf.Rate) tbf.Rate { return scaleRate(r, o.Num, o.Shift) }

// String is "interface bandwidth 100mbit: guaranteed rates add up to
// 150mbit (oversubscribed x1.50)".
func (o Oversubscription) String() string {
	parent := "interface bandwidth"
	switch {
	case o.Node != "":
		parent = "node " + o.Node + " rate"
	case o.Tier != "":
		parent = "tier " + o.Tier + " aggregate_rate"
	}
	return fmt.Sprintf("%s %v: guaranteed rates add up to %v (oversubscribed x%s)", parent, o.Capacity, o.Guaranteed, factorString(o.Factor()))
}

// scaleGuarantees makes an HTB interface's bandwidth, each node's rate
// and each tier aggregate's rate a real cap. Under the root class sit the
// default class, the tier aggregates, the top-level nodes and the users
// of neither a node nor a tier with an aggregate; under a node sit its
// child nodes and its users; under an aggregate sit its tier's users
// without a node. Where the children's guaranteed rates add up to more
// than the parent's rate, each child's rate becomes
// floor(rate * Num / 2^Shift), Num = floor(parent * 2^Shift / sum), so
// their sum fits the parent (ceilings stay: borrowing is capped by the
// parent's tokens); parents are done before their children (the root,
// then nodes from the top, then aggregates), so children fit their
// parent's scaled rate. Scaled users, nodes and the default class say so
// in their Reason; ir.Oversubscriptions lists the parents.
func scaleGuarantees(ir *InterfaceResult) {
	tg := &ir.Targets
	aggregate := map[string]int{} // tier -> index in tg.Tiers
	for i, t := range tg.Tiers {
		aggregate[t.Name] = i
	}
	// Children of each parent, by kind: nodes (indexes in tg.Nodes) and
	// users (indexes in tg.Users); the root is parentKey{}.
	kids := map[parentKey]*children{}
	kidsOf := func(k parentKey) *children {
		c := kids[k]
		if c == nil {
			c = &children{}
			kids[k] = c
		}
		return c
	}
	for i, n := range tg.Nodes {
		k := parentKey{}
		if n.Parent != "" {
			k = parentKey{"node", n.Parent}
		}
		c := kidsOf(k)
		c.nodes = append(c.nodes, i)
		c.sum += uint64(n.Rate)
	}
	for j := range tg.Users {
		kind, name := parentOf(&tg.Users[j], aggregate)
		c := kidsOf(parentKey{kind, name})
		c.users = append(c.users, j)
		c.sum += uint64(tg.Users[j].Rate)
	}
	// The root's children.
	root := kidsOf(parentKey{})
	sum := root.sum + uint64(tg.Interface.DefaultRate)
	for _, t := range tg.Tiers {
		sum += uint64(t.Rate)
	}
	if capacity := uint64(tg.Interface.Bandwidth); sum > capacity {
		o := newOversubscription("", sum, capacity)
		ir.Oversubscriptions = append(ir.Oversubscriptions, o)
		tg.Interface.DefaultRate = o.scale(tg.Interface.DefaultRate)
		if ir.Default != nil {
			ir.Default.scaled(tg.Interface.DefaultRate, o)
		}
		for i := range tg.Tiers {
			tg.Tiers[i].Rate = o.scale(tg.Tiers[i].Rate)
		}
		scaleChildren(ir, root, o)
	}
	// Each node's children, parents first (tg.Nodes' order): a node's
	// rate is final when its children are scaled.
	for _, n := range tg.Nodes {
		c := kids[parentKey{"node", n.Name}]
		if c == nil {
			continue
		}
		var sum uint64
		for _, i := range c.nodes {
			sum += uint64(tg.Nodes[i].Rate)
		}
		for _, j := range c.users {
			sum += uint64(ir.unscaledRate(j))
		}
		if capacity := uint64(n.Rate); sum > capacity {
			o := newOversubscription("", sum, capacity)
			o.Node = n.Name
			ir.Oversubscriptions = append(ir.Oversubscriptions, o)
			scaleChildren(ir, c, o)
		}
	}
	// Each aggregate's users.
	for _, t := range tg.Tiers {
		c := kids[parentKey{"tier", t.Name}]
		if c == nil || c.sum <= uint64(t.Rate) {
			continue
		}
		o := newOversubscription(t.Name, c.sum, uint64(t.Rate))
		ir.Oversubscriptions = append(ir.Oversubscriptions, o)
		scaleChildren(ir, c, o)
	}
}

// parentKey names a parent class: kind "node" or "tier" and its name; the
// zero value is the root class.
type parentKey struct{ kind, name string }

// children are a parent's child nodes and users (indexes into the
// targets) and the sum of their guaranteed rates.
type children struct {
	nodes, users []int
	sum          uint64
}

// scaleChildren scales the rates of c's nodes and users by o.
func scaleChildren(ir *InterfaceResult, c *children, o Oversubscription) {
	for _, i := range c.nodes {
		n := &ir.Targets.Nodes[i]
		n.Rate = o.scale(n.Rate)
		if i < len(ir.Nodes) {
			ir.Nodes[i].scaled(n.Rate, o)
		}
	}
	for _, j := range c.users {
		scaleUser(ir, j, ir.unscaledRate(j), o)
	}
}

// unscaledRate is user j's guaranteed rate before any scaling.
func (ir *InterfaceResult) unscaledRate(j int) tbf.Rate {
	if j < len(ir.Users) {
		return ir.Users[j].Unscaled()
	}
	return ir.Targets.Users[j].Rate
}

// scaleUser sets user j's rate to unscaled scaled by o. Its quantum, its
// share of what it borrows beside its siblings, stays HTB's default for
// the unscaled rate: under a heavily oversubscribed parent nearly all of a
// user's traffic is borrowed, and the quantum of the scaled rate would be
// HTB's minimum (1000 B, below every GSO aggregate: one packet per round)
// for every user there, a gold user getting no more than a bronze one.
// With the unscaled rate's quantum, scaled users share as unscaled ones
// do: in proportion to their rates up to 16 Mbit/s, where HTB's quantum
// tops out at 200,000 B. A configured burst
// that the lower rate cannot hold is cut as evaluate cuts it
// (tbf.MaxBurst).
func scaleUser(ir *InterfaceResult, j int, unscaled tbf.Rate, o Oversubscription) {
	u := &ir.Targets.Users[j]
	u.Rate = o.scale(unscaled)
	u.Quantum = psched.HTBQuantum(unscaled.BytesPerSecond())
	m := tbf.MaxBurst(u.Rate)
	cut := u.Burst > m
	if cut {
		u.Burst = m
	}
	if j >= len(ir.Users) {
		return
	}
	x := &ir.Users[j]
	x.scaled(u.Rate, o)
	switch {
	case u.Burst == 0: // Build's default for the rate
		x.Burst = tbf.RecommendedBurst(u.Rate)
	case cut:
		x.Reason += fmt.Sprintf("; burst cut to %s, the most the kernel holds at rate %s", m, u.Rate)
		x.Burst, x.BurstCut = m, true
	}
}

// scaleRate is floor(r * num / 2^shift) (0 < shift < 64), computed
// without overflow, and at least config.MinRate: HTB refuses a zero rate.
// The floor keeps the order: a larger r never gets a smaller rate.
func scaleRate(r tbf.Rate, num uint64, shift uint) tbf.Rate {
	hi, lo := bits.Mul64(uint64(r), num)
	q := hi<<(64-shift) | lo>>shift
	return max(tbf.Rate(q), config.MinRate)
}

// updateOversubscribed changes user j of the HTB interface ir to the
// target ut and explanation x (rates unscaled, as evaluate gives them)
// when that leaves every parent's scale as it was: the user's class alone
// changes. It reports false, changing nothing, when a parent becomes (or
// stops being) oversubscribed or its quantized scale moves: then every
// child changes, and the caller evaluates everything.
func updateOversubscribed(ir *InterfaceResult, j int, ut model.UserTarget, x Explanation) bool {
	tg := &ir.Targets
	old := ir.Users[j].Unscaled()
	oi, parent, capacity := parentOversubscription(ir, j)
	if oi < 0 { // the parent's guarantees fitted: do they still?
		if oversubscribedBy(ir, j, x.Rate) {
			return false
		}
		was := uint64(tg.Users[j].Rate)
		tg.Users[j], ir.Users[j] = ut, x
		ir.userRateChanged(j, was)
		return true
	}
	o := ir.Oversubscriptions[oi]
	sum := uint64(o.Guaranteed) - uint64(old) + uint64(x.Rate)
	if sum <= capacity {
		return false
	}
	if !sameScale(o, parent, sum, capacity) {
		return false
	}
	o.Guaranteed = tbf.Rate(sum)
	ir.Oversubscriptions[oi] = o
	was := uint64(tg.Users[j].Rate)
	tg.Users[j], ir.Users[j] = ut, x
	scaleUser(ir, j, x.Rate, o)
	ir.userRateChanged(j, was)
	return true
}

// parentOversubscription finds the parent of user j of ir: its tier
// (the tier with an aggregate class the user sits under, "" for the root
// or a node), its rate (capacity) and the index of its entry in
// ir.Oversubscriptions (-1 when its guarantees fit).
func parentOversubscription(ir *InterfaceResult, j int) (oi int, tier string, capacity uint64) {
	tg := &ir.Targets
	node := tg.Users[j].Node
	capacity = uint64(tg.Interface.Bandwidth)
	if node != "" {
		for _, nt := range tg.Nodes {
			if nt.Name == node {
				capacity = uint64(nt.Rate)
			}
		}
	} else {
		for _, t := range tg.Tiers {
			if t.Name == tg.Users[j].Tier {
				tier, capacity = t.Name, uint64(t.Rate)
			}
		}
	}
	oi = -1
	for i, o := range ir.Oversubscriptions {
		if o.Tier == tier && o.Node == node {
			oi = i
		}
	}
	return oi, tier, capacity
}

// sameScale reports whether children whose guarantees add up to sum
// (more than capacity) get o's quantized scale.
func sameScale(o Oversubscription, tier string, sum, capacity uint64) bool {
	n := newOversubscription(tier, sum, capacity)
	return n.Num == o.Num && n.Shift == o.Shift
}

// removalKeepsScale reports whether removing user j of ir leaves its
// parent's scale as it was (the parent's other children keep their
// rates), and the parent's entry in ir.Oversubscriptions (oi, -1 when its
// guarantees fit) with the sum of its guarantees once j is gone. It is
// false when the parent stops being oversubscribed or its quantized scale
// moves.
func removalKeepsScale(ir *InterfaceResult, j int) (oi int, sum tbf.Rate, ok bool) {
	oi, tier, capacity := parentOversubscription(ir, j)
	if oi < 0 { // fewer guarantees still fit
		return oi, 0, true
	}
	o := ir.Oversubscriptions[oi]
	left := uint64(o.Guaranteed) - uint64(ir.Users[j].Unscaled())
	if left <= capacity || !sameScale(o, tier, left, capacity) {
		return oi, 0, false
	}
	return oi, tbf.Rate(left), true
}

// Unscaled is x's guaranteed rate before any oversubscription scaling:
// Guaranteed when Oversubscribed, else Rate.
func (x *Explanation) Unscaled() tbf.Rate {
	if x.Oversubscribed {
		return x.Guaranteed
	}
	return x.Rate
}

// scaled records that oversubscription o scaled x's rate to rate.
func (x *Explanation) scaled(rate tbf.Rate, o Oversubscription) {
	if x.Guaranteed == 0 {
		x.Guaranteed = x.Rate
	}
	x.Rate = rate
	x.Reason += "; oversubscribed x" + factorString(o.Factor())
	x.Oversubscribed = true
}

// oversubscribedBy reports whether changing user j's rate on the HTB
// interface ir to rate (from what Targets holds) would leave the
// guarantees under the interface's root, a node or a tier aggregate
// oversubscribed. It reads the cached sums of every parent (sums.go):
// O(nodes + tiers), not O(users).
func oversubscribedBy(ir *InterfaceResult, j int, rate tbf.Rate) bool {
	tg := &ir.Targets
	sums := ir.sums()
	own := ir.userParent(&tg.Users[j])
	sum := func(k parentKey) uint64 {
		if k == own {
			return sums[k] - uint64(tg.Users[j].Rate) + uint64(rate)
		}
		return sums[k]
	}
	if sum(parentKey{}) > uint64(tg.Interface.Bandwidth) {
		return true
	}
	for _, n := range tg.Nodes {
		if sum(parentKey{"node", n.Name}) > uint64(n.Rate) {
			return true
		}
	}
	for _, t := range tg.Tiers {
		if sum(parentKey{"tier", t.Name}) > uint64(t.Rate) {
			return true
		}
	}
	return false
}

// OversubscriptionNotes returns one line per oversubscribed parent of
// every HTB interface in r, for `shaperd --check` and the log.
func (r *Result) OversubscriptionNotes() []string {
	var out []string
	for _, ir := range r.Interfaces {
		for _, o := range ir.Oversubscriptions {
			out = append(out, fmt.Sprintf("interface %s (%s): %s; guarantees are scaled by x%s so that the bandwidth stays a cap",
				ir.Targets.Interface.Name, ir.Targets.Interface.Direction, o, factorString(1/o.Factor())))
		}
	}
	return out
}

// factorString prints a scale factor for people: two decimals from 1 up
// ("1.61", "2000.00"), three significant digits below ("0.621",
// "0.0005"), so a factor of 1/2000 does not print as "0.00".
func factorString(f float64) string {
	if f >= 1 {
		return strconv.FormatFloat(f, 'f', 2, 64)
	}
	return strconv.FormatFloat(f, 'g', 3, 64)
}
