package policy

import (
	"fmt"
	"math/bits"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Oversubscription is one HTB parent whose children's guaranteed rates add
// up to more than the parent's own rate. HTB lets every class send at its
// own rate without asking its parent, so the parent would stop being a
// cap; the policy scales the children's rates down by Capacity/Guaranteed
// (see scaleGuarantees) and records it here.
type Oversubscription struct {
	// Tier is the tier whose aggregate class is the parent; "" for the
	// interface's root class (bandwidth).
	Tier string
	// Guaranteed is the sum of the children's rates before scaling;
	// Capacity is the parent's rate they are scaled to fit.
	Guaranteed, Capacity tbf.Rate
	// Num is the scale: every child's rate becomes rate*Num/ScaleDen,
	// Num = floor(Capacity*ScaleDen/Guaranteed). The quantized scale
	// stays the same through most single-user changes, so those change
	// one class instead of every class under the parent.
	Num uint64
}

// ScaleDen is the denominator of Oversubscription.Num: guarantees are
// scaled in steps of 1/1024 (at most 0.1 % of a parent's rate unused).
const ScaleDen = 1024

// newOversubscription is the oversubscription of sum over capacity
// (sum > capacity), under tier ("" for the root).
func newOversubscription(tier string, sum, capacity uint64) Oversubscription {
	hi, lo := bits.Mul64(capacity, ScaleDen)
	num, _ := bits.Div64(hi, lo, sum) // hi < sum since capacity < sum
	return Oversubscription{Tier: tier, Guaranteed: tbf.Rate(sum), Capacity: tbf.Rate(capacity), Num: num}
}

// Factor is Guaranteed/Capacity (> 1).
func (o Oversubscription) Factor() float64 { return float64(o.Guaranteed) / float64(o.Capacity) }

// String is "interface bandwidth 100mbit: guaranteed rates add up to
// 150mbit (oversubscribed x1.50)".
func (o Oversubscription) String() string {
	parent := "interface bandwidth"
	if o.Tier != "" {
		parent = "tier " + o.Tier + " aggregate_rate"
	}
	return fmt.Sprintf("%s %v: guaranteed rates add up to %v (oversubscribed x%.2f)", parent, o.Capacity, o.Guaranteed, o.Factor())
}

// scaleGuarantees makes an HTB interface's bandwidth, and each tier
// aggregate's rate, a real cap. Under the root class sit the default
// class, the tier aggregates and the users of tiers without an aggregate;
// under an aggregate sit its tier's users. Where the children's guaranteed
// rates add up to more than the parent's rate, each child's rate becomes
// floor(rate * Num / ScaleDen), Num = floor(parent * ScaleDen / sum), so
// their sum fits the parent (ceilings stay:
// borrowing is capped by the parent's tokens); the root is done first, so
// an aggregate's users fit its scaled rate. Scaled users and the default
// class say so in their Reason; ir.Oversubscriptions lists the parents.
func scaleGuarantees(ir *InterfaceResult) {
	tg := &ir.Targets
	aggregate := map[string]int{} // tier -> index in tg.Tiers
	for i, t := range tg.Tiers {
		aggregate[t.Name] = i
	}
	// The root's children.
	sum := uint64(tg.Interface.DefaultRate)
	for _, t := range tg.Tiers {
		sum += uint64(t.Rate)
	}
	for _, u := range tg.Users {
		if _, ok := aggregate[u.Tier]; !ok {
			sum += uint64(u.Rate)
		}
	}
	if capacity := uint64(tg.Interface.Bandwidth); sum > capacity {
		o := newOversubscription("", sum, capacity)
		ir.Oversubscriptions = append(ir.Oversubscriptions, o)
		tg.Interface.DefaultRate = scaleRate(tg.Interface.DefaultRate, o.Num)
		if ir.Default != nil {
			ir.Default.scaled(tg.Interface.DefaultRate, o)
		}
		for i := range tg.Tiers {
			tg.Tiers[i].Rate = scaleRate(tg.Tiers[i].Rate, o.Num)
		}
		for j := range tg.Users {
			if _, ok := aggregate[tg.Users[j].Tier]; !ok {
				scaleUser(ir, j, ir.Users[j].Rate, o)
			}
		}
	}
	// Each aggregate's users.
	for _, t := range tg.Tiers {
		var sum uint64
		for _, u := range tg.Users {
			if u.Tier == t.Name {
				sum += uint64(u.Rate)
			}
		}
		capacity := uint64(t.Rate)
		if sum <= capacity {
			continue
		}
		o := newOversubscription(t.Name, sum, capacity)
		ir.Oversubscriptions = append(ir.Oversubscriptions, o)
		for j := range tg.Users {
			if tg.Users[j].Tier == t.Name {
				scaleUser(ir, j, ir.Users[j].Rate, o)
			}
		}
	}
}

// scaleUser sets user j's rate to unscaled scaled by o. A configured burst
// that the lower rate cannot hold is cut as evaluate cuts it
// (tbf.MaxBurst).
func scaleUser(ir *InterfaceResult, j int, unscaled tbf.Rate, o Oversubscription) {
	u := &ir.Targets.Users[j]
	u.Rate = scaleRate(unscaled, o.Num)
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

// scaleRate is floor(r * num / ScaleDen), computed without overflow, and
// at least config.MinRate: HTB refuses a zero rate.
func scaleRate(r tbf.Rate, num uint64) tbf.Rate {
	hi, lo := bits.Mul64(uint64(r), num)
	q := hi<<(64-10) | lo>>10 // / ScaleDen (2^10)
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
	parent, capacity := "", uint64(tg.Interface.Bandwidth)
	for _, t := range tg.Tiers {
		if t.Name == tg.Users[j].Tier {
			parent, capacity = t.Name, uint64(t.Rate)
		}
	}
	oi := -1
	for i, o := range ir.Oversubscriptions {
		if o.Tier == parent {
			oi = i
		}
	}
	if oi < 0 { // the parent's guarantees fitted: do they still?
		if oversubscribedBy(ir, tg.Users[j].Name, x.Rate) {
			return false
		}
		tg.Users[j], ir.Users[j] = ut, x
		return true
	}
	o := ir.Oversubscriptions[oi]
	sum := uint64(o.Guaranteed) - uint64(old) + uint64(x.Rate)
	if sum <= capacity {
		return false
	}
	if n := newOversubscription(parent, sum, capacity); n.Num != o.Num {
		return false
	}
	o.Guaranteed = tbf.Rate(sum)
	ir.Oversubscriptions[oi] = o
	tg.Users[j], ir.Users[j] = ut, x
	scaleUser(ir, j, x.Rate, o)
	return true
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
	x.Reason += fmt.Sprintf("; oversubscribed x%.2f", o.Factor())
	x.Oversubscribed = true
}

// oversubscribedBy reports whether changing user's rate on the HTB
// interface ir to rate (from what Targets holds) would leave the
// interface's (or the user's tier aggregate's) guarantees oversubscribed.
func oversubscribedBy(ir *InterfaceResult, user string, rate tbf.Rate) bool {
	tg := &ir.Targets
	aggregate := map[string]tbf.Rate{}
	for _, t := range tg.Tiers {
		aggregate[t.Name] = t.Rate
	}
	root := uint64(tg.Interface.DefaultRate)
	for _, t := range tg.Tiers {
		root += uint64(t.Rate)
	}
	tier := map[string]uint64{}
	for _, u := range tg.Users {
		r := uint64(u.Rate)
		if u.Name == user {
			r = uint64(rate)
		}
		if _, ok := aggregate[u.Tier]; ok {
			tier[u.Tier] += r
		} else {
			root += r
		}
	}
	if root > uint64(tg.Interface.Bandwidth) {
		return true
	}
	for name, r := range aggregate {
		if tier[name] > uint64(r) {
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
			out = append(out, fmt.Sprintf("interface %s (%s): %s; guarantees are scaled by x%.2f so that the bandwidth stays a cap",
				ir.Targets.Interface.Name, ir.Targets.Interface.Direction, o, 1/o.Factor()))
		}
	}
	return out
}
