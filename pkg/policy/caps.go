package policy

import (
	"fmt"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Cap is a ceiling above an HTB interface's configured bandwidth, capped
// to it. One set of tiers may serve links of different sizes (one router
// with a 1gbit uplink and a 50mbit building link, or a fleet sharing its
// tiers): a class can never borrow more than its interface has, so a
// ceiling above it is lowered to the bandwidth instead of being refused,
// as a circuit is capped at its parent's capacity. (Guaranteed rates above
// the bandwidth are scaled with the others: see Oversubscription.)
type Cap struct {
	// Kind is the capped class: "user" (Users user classes of Tier),
	// "tier" (Tier's aggregate class) or "default" (the default class;
	// Tier is its default_tier, "" for default_ceil).
	Kind string
	Tier string
	// Node is the capped node (Kind "node"), whose ceil was above its
	// parent's, or (Kind "user") the node whose ceil capped the users':
	// Bandwidth is then that ceil.
	Node string
	// Users counts the user classes of Kind "user" capped from Ceil.
	Users int
	// Ceil is the ceiling before the cap; Bandwidth the interface's
	// configured bandwidth it was capped to.
	Ceil, Bandwidth tbf.Rate
}

// String is "tier gold: ceil 100mbit capped to the bandwidth 50mbit (3
// users)".
func (c Cap) String() string {
	var who string
	switch c.Kind {
	case "node":
		return fmt.Sprintf("node %s: ceil %s capped to its parent's %s", c.Node, c.Ceil, c.Bandwidth)
	case "tier":
		who = "tier " + c.Tier + " aggregate"
	case "default":
		who = "default class"
		if c.Tier != "" {
			who += " (default_tier " + c.Tier + ")"
		}
	default:
		who = "tier " + c.Tier
	}
	to := "the bandwidth"
	if c.Node != "" {
		to = "node " + c.Node + "'s ceil"
	}
	s := fmt.Sprintf("%s: ceil %s capped to %s %s", who, c.Ceil, to, c.Bandwidth)
	if c.Kind == "user" {
		s += fmt.Sprintf(" (%d %s)", c.Users, plural(c.Users, "user", "users"))
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// capCeilings lowers every ceiling of the HTB interface ir above bw (the
// interface's configured bandwidth) to bw: the default class's, each tier
// aggregate's and each user's. It runs before scaleGuarantees, which then
// fits the guaranteed rates under the bandwidth, so every rate stays at
// most its ceiling. The configured bandwidth, not an iface override's, is
// the cap: an override only lowers the root class, whose rate HTB's
// borrowing already respects, and capping against it would rewrite every
// class at every step of its ramp.
func capCeilings(ir *InterfaceResult, bw tbf.Rate) {
	tg := &ir.Targets
	if tg.Interface.DefaultCeil > bw {
		if ir.Default != nil {
			ir.Default.capCeil(bw)
		}
		tg.Interface.DefaultCeil = bw
	}
	ir.tierCaps = ir.tierCaps[:0]
	for i := range tg.Tiers {
		if t := &tg.Tiers[i]; t.Ceil > bw {
			ir.tierCaps = append(ir.tierCaps, Cap{Kind: "tier", Tier: t.Name, Ceil: t.Ceil, Bandwidth: bw})
			t.Ceil = bw
		}
	}
	for j := range tg.Users {
		if j < len(ir.Users) {
			capUser(&tg.Users[j], &ir.Users[j], bw)
		}
	}
}

// capUser caps a user target's ceil (and its explanation x) at bw; a
// configured cburst the capped ceil cannot hold is cut as evaluate cuts
// it (tbf.MaxBurst), and a default one follows the ceil.
func capUser(u *model.UserTarget, x *Explanation, bw tbf.Rate) {
	capUserTo(u, x, bw, "the bandwidth")
}

// capUserTo is capUser to the ceiling bw of what (for the reason: "the
// bandwidth", "node ap-3's ceil"); it reports whether it capped.
func capUserTo(u *model.UserTarget, x *Explanation, bw tbf.Rate, what string) bool {
	ceil, cburst := &u.Ceil, &u.CBurst
	if *ceil <= bw {
		return false
	}
	*ceil = bw
	x.capCeilTo(bw, what)
	switch m := tbf.MaxBurst(bw); {
	case *cburst == 0: // Build's default for the ceil
		x.CBurst = tbf.RecommendedBurst(bw)
	case *cburst > m:
		x.Reason += fmt.Sprintf("; cburst cut to %s, the most the kernel holds at ceil %s", m, bw)
		*cburst, x.CBurst, x.BurstCut = m, m, true
	}
	return true
}

// capCeil records that x's ceil was capped to the bandwidth bw.
func (x *Explanation) capCeil(bw tbf.Rate) { x.capCeilTo(bw, "the bandwidth") }

// capCeilTo records that x's ceil was capped to what's ceiling bw.
func (x *Explanation) capCeilTo(bw tbf.Rate, what string) {
	if !x.CeilCapped {
		x.UncappedCeil = x.Ceil
	}
	x.Reason += fmt.Sprintf("; ceil %s capped to %s %s", x.UncappedCeil, what, bw)
	x.Ceil, x.CeilCapped = bw, true
	if x.User == "" { // the default class: Build's default cburst
		x.CBurst = tbf.RecommendedBurst(bw)
	}
}

// Uncapped is x's ceil before any cap to the interface's bandwidth:
// UncappedCeil when CeilCapped, else Ceil.
func (x *Explanation) Uncapped() tbf.Rate {
	if x.CeilCapped {
		return x.UncappedCeil
	}
	return x.Ceil
}

// Caps lists the ceilings of ir capped to its bandwidth: the default
// class, tier aggregates, and users grouped by tier and ceiling (plan
// order of first appearance).
func (ir *InterfaceResult) Caps() []Cap {
	var out []Cap
	if d := ir.Default; d != nil && d.CeilCapped {
		out = append(out, Cap{Kind: "default", Tier: d.Tier, Ceil: d.UncappedCeil, Bandwidth: d.Ceil})
	}
	out = append(out, ir.tierCaps...)
	type key struct {
		tier, node string
		ceil       tbf.Rate
	}
	at := map[key]int{}
	for _, x := range ir.Users {
		if !x.CeilCapped {
			continue
		}
		k := key{x.Tier, x.CappedBy, x.UncappedCeil}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, Cap{Kind: "user", Tier: x.Tier, Node: x.CappedBy, Ceil: x.UncappedCeil, Bandwidth: x.Ceil})
		}
		out[i].Users++
	}
	return out
}

// CapNotes returns one line per capped ceiling (Caps) of every HTB
// interface in r, for the log and for what has no key position.
func (r *Result) CapNotes() []string {
	var out []string
	for i := range r.Interfaces {
		ir := &r.Interfaces[i]
		for _, c := range ir.Caps() {
			out = append(out, fmt.Sprintf("interface %s (%s): %s", ir.Targets.Interface.Name, ir.Targets.Interface.Direction, c))
		}
	}
	return out
}

// rateUnderCeil lowers every guaranteed rate of ir above its class's ceil
// to the ceil, after scaleGuarantees: the guarantees are scaled against
// the bandwidth in force, which an iface override may raise above the
// configured bandwidth the ceilings are capped to.
func rateUnderCeil(ir *InterfaceResult) {
	tg := &ir.Targets
	if tg.Interface.DefaultRate > tg.Interface.DefaultCeil && tg.Interface.DefaultCeil != 0 {
		tg.Interface.DefaultRate = tg.Interface.DefaultCeil
		if ir.Default != nil {
			ir.Default.Rate = tg.Interface.DefaultCeil
		}
	}
	for i := range tg.Tiers {
		if t := &tg.Tiers[i]; t.Rate > t.Ceil {
			t.Rate = t.Ceil
		}
	}
	for i := range tg.Nodes {
		if n := &tg.Nodes[i]; n.Rate > n.Ceil {
			n.Rate = n.Ceil
			if i < len(ir.Nodes) {
				ir.Nodes[i].Rate = n.Ceil
			}
		}
	}
	for j := range tg.Users {
		if u := &tg.Users[j]; u.Ceil != 0 && u.Rate > u.Ceil {
			u.Rate = u.Ceil
			if j < len(ir.Users) {
				ir.Users[j].Rate = u.Ceil
			}
		}
	}
}
