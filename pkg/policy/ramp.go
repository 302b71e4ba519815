package policy

import (
	"math/bits"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// ClassKind says which kind of class a RampKey names.
type ClassKind string

// Class kinds the Ramper moves.
const (
	ClassUser    ClassKind = "user"    // a user's leaf class (Name: the user)
	ClassTier    ClassKind = "tier"    // a tier's aggregate class (Name: the tier)
	ClassNode    ClassKind = "node"    // a node's class (Name: the node)
	ClassDefault ClassKind = "default" // the HTB default class (Name "")
	ClassLink    ClassKind = "link"    // the interface: HTB root class or TBF qdisc (Name "")
)

// RampKey names one rate the Ramper moves: a class of kind Kind called Name
// on the configured interface Interface in Direction.
type RampKey struct {
	Interface string
	Direction model.Direction
	Kind      ClassKind
	Name      string
}

// Rates is a rate and a ceiling (equal for a link).
type Rates struct {
	Rate, Ceil tbf.Rate
}

// RampState is a smooth change in progress: the rates move linearly from
// From (the instantaneous rates when the change came) at Start to To at End.
type RampState struct {
	From, To   Rates
	Start, End time.Time
}

// At returns the instantaneous rates at t: From before Start, To from End,
// linear in between (rounded toward From; ceil never below rate).
func (s RampState) At(t time.Time) Rates {
	if !t.After(s.Start) {
		return s.From
	}
	if !t.Before(s.End) {
		return s.To
	}
	num, den := uint64(t.Sub(s.Start)), uint64(s.End.Sub(s.Start))
	r := Rates{Rate: lerp(s.From.Rate, s.To.Rate, num, den), Ceil: lerp(s.From.Ceil, s.To.Ceil, num, den)}
	r.Ceil = max(r.Ceil, r.Rate)
	return r
}

// lerp is a + (b-a)*num/den rounded toward a, exactly (num < den).
func lerp(a, b tbf.Rate, num, den uint64) tbf.Rate {
	if a == b {
		return a
	}
	d := uint64(b - a)
	if b < a {
		d = uint64(a - b)
	}
	hi, lo := bits.Mul64(d, num)
	q, _ := bits.Div64(hi, lo, den)
	if b < a {
		return a - tbf.Rate(q)
	}
	return a + tbf.Rate(q)
}

// Applied is what the Ramper last handed out for one class: rates and, for
// user classes and TBF links, bursts (0 elsewhere: model.Build's default).
type Applied struct {
	Rates
	Burst, CBurst tbf.Size
}

// classState is the Ramper's memory of one class.
type classState struct {
	tbfLink, seen bool // (together: 80 bytes, one size class below 96)
	target        Rates
	cfgBurst      tbf.Size // configured burst of the target (0: default)
	cfgCBurst     tbf.Size
	applied       Applied
	ramp          *ramping // nil: none in progress
}

// ramping is a ramp in progress with what a TBF link's steps spend (kept
// with the ramp, so that a class without one, nearly every class, holds
// only a nil pointer).
type ramping struct {
	RampState
	budget     TBFBudget // TBF links: what the current ramp may still grant
	lastChange time.Time // TBF links: the ramp's start or its last change
}

// Ramper moves the kernel's rates smoothly to what Evaluate asks for. It is
// a state machine without goroutines or timers: call Step on every policy
// tick (and whenever the desired rates change, e.g. after set-rate). Not
// safe for concurrent use.
//
// Rules, per class (user, tier aggregate, default class, interface link):
//   - A class seen for the first time gets its target at once (a new class
//     starts full; there is nothing to ramp from).
//   - When a class's target rates change, a ramp starts from the
//     instantaneous rates (mid-ramp: where the old ramp is now) to the new
//     ones, lasting the deciding override's Ramp (Explanation.Ramp) or else
//     the policy's Ramp; 0 changes at once. A change of only the configured
//     burst applies at once.
//   - Each Step returns the linear interpolation at now (by time, so the
//     number of steps is about ramp/interval), and the target from End on.
//   - Bursts follow burst.go: user classes get StepBurst of the step's rate
//     and ceil, capped by SmoothCap on a decrease; a TBF link's intermediate
//     steps are paid from a TBFBudget of one target burst (a change mid-ramp
//     inherits what the old ramp spent), spread evenly when it cannot pay
//     for every tick (TBFBudget.Due), the last step gets the full burst,
//     and a step whose rate did not move makes no change (no refill). Tier,
//     default and HTB root classes get rates only (model.Build's default
//     burst, tbf.RecommendedBurst: a constant 5 ms).
type Ramper struct {
	policy  config.Policy
	classes map[RampKey]*classState
	// active holds the classes with a ramp in progress (a subset of
	// classes), so that StepActive and Active need not visit every class.
	active map[RampKey]*classState
}

// NewRamper returns a Ramper using p's Interval, Ramp and SmoothWindow.
func NewRamper(p config.Policy) *Ramper {
	return &Ramper{policy: p, classes: map[RampKey]*classState{}, active: map[RampKey]*classState{}}
}

// SetPolicy replaces the policy (after a reload); ramps in progress keep
// their Start and End.
func (r *Ramper) SetPolicy(p config.Policy) { r.policy = p }

// Seed records targets as already applied (the kernel's state when the
// daemon adopts it after a restart), so that the next Step ramps from them
// instead of jumping. Classes are matched as in Step.
func (r *Ramper) Seed(applied []model.Targets) {
	for _, t := range applied {
		in := t.Interface
		dir := direction(in)
		link := Applied{Rates: Rates{in.Bandwidth, in.Bandwidth}}
		tbfLink := in.Shaper == model.ShaperTBF
		if tbfLink {
			link.Burst = in.Burst
		}
		r.seed(RampKey{in.Name, dir, ClassLink, ""}, link, tbfLink)
		if tbfLink {
			continue
		}
		r.seed(RampKey{in.Name, dir, ClassDefault, ""}, Applied{Rates: Rates{in.DefaultRate, max(in.DefaultCeil, in.DefaultRate)}}, false)
		for _, tt := range t.Tiers {
			r.seed(RampKey{in.Name, dir, ClassTier, tt.Name}, Applied{Rates: Rates{tt.Rate, max(tt.Ceil, tt.Rate)}}, false)
		}
		for _, n := range t.Nodes {
			r.seed(RampKey{in.Name, dir, ClassNode, n.Name}, Applied{Rates: Rates{n.Rate, max(n.Ceil, n.Rate)}}, false)
		}
		for _, u := range t.Users {
			r.seed(RampKey{in.Name, dir, ClassUser, u.Name}, Applied{Rates: Rates{u.Rate, max(u.Ceil, u.Rate)}, Burst: u.Burst, CBurst: u.CBurst}, false)
		}
	}
}

func (r *Ramper) seed(k RampKey, a Applied, tbfLink bool) {
	r.classes[k] = &classState{tbfLink: tbfLink, target: a.Rates, cfgBurst: a.Burst, cfgCBurst: a.CBurst, applied: a}
	delete(r.active, k)
}

// direction is the spec's direction with "" read as egress.
func direction(in model.InterfaceSpec) model.Direction {
	if in.Direction == "" {
		return model.Egress
	}
	return in.Direction
}

// Ramp returns the ramp in progress for k, if any (for status).
func (r *Ramper) Ramp(k RampKey) (RampState, bool) {
	if st, ok := r.classes[k]; ok && st.ramp != nil {
		return st.ramp.RampState, true
	}
	return RampState{}, false
}

// Ramps returns every ramp in progress.
func (r *Ramper) Ramps() map[RampKey]RampState {
	out := map[RampKey]RampState{}
	for k, st := range r.active {
		out[k] = st.ramp.RampState
	}
	return out
}

// Applied returns what the Ramper last handed out for k.
func (r *Ramper) Applied(k RampKey) (Applied, bool) {
	if st, ok := r.classes[k]; ok {
		return st.applied, true
	}
	return Applied{}, false
}

// Step returns the targets to apply at now, one per desired interface in
// the same order: desired's targets with every rate (and user/TBF burst)
// replaced by the ramp's value at now. Classes no longer desired are
// forgotten. desired is not modified.
func (r *Ramper) Step(desired *Result, now time.Time) []model.Targets {
	for _, st := range r.classes {
		st.seen = false
	}
	out := make([]model.Targets, len(desired.Interfaces))
	for i := range desired.Interfaces {
		out[i] = r.stepIface(&desired.Interfaces[i], now)
	}
	for k, st := range r.classes {
		if !st.seen {
			delete(r.classes, k)
			delete(r.active, k)
		}
	}
	return out
}

func (r *Ramper) stepIface(ir *InterfaceResult, now time.Time) model.Targets {
	t := ir.Targets
	in := &t.Interface
	dir := direction(*in)
	tbfLink := in.Shaper == model.ShaperTBF
	var cfg tbf.Size
	if tbfLink {
		cfg = in.Burst
	}
	a := r.advance(RampKey{in.Name, dir, ClassLink, ""}, tbfLink, Rates{in.Bandwidth, in.Bandwidth}, cfg, 0, ir.Link.Ramp, now)
	in.Bandwidth = a.Rate
	if tbfLink {
		in.Burst = a.Burst
		return t
	}
	var defRamp *time.Duration
	if ir.Default != nil {
		defRamp = ir.Default.Ramp
	}
	a = r.advance(RampKey{in.Name, dir, ClassDefault, ""}, false, Rates{in.DefaultRate, max(in.DefaultCeil, in.DefaultRate)}, 0, 0, defRamp, now)
	in.DefaultRate, in.DefaultCeil = a.Rate, a.Ceil

	t.Tiers = append([]model.TierTarget(nil), t.Tiers...)
	for j := range t.Tiers {
		tt := &t.Tiers[j]
		a := r.advance(RampKey{in.Name, dir, ClassTier, tt.Name}, false, Rates{tt.Rate, max(tt.Ceil, tt.Rate)}, 0, 0, nil, now)
		tt.Rate, tt.Ceil = a.Rate, a.Ceil
	}
	t.Nodes = append([]model.NodeTarget(nil), t.Nodes...)
	for j := range t.Nodes {
		n := &t.Nodes[j]
		var ramp *time.Duration
		if j < len(ir.Nodes) && ir.Nodes[j].Node == n.Name {
			ramp = ir.Nodes[j].Ramp
		}
		a := r.advance(RampKey{in.Name, dir, ClassNode, n.Name}, false, Rates{n.Rate, max(n.Ceil, n.Rate)}, 0, 0, ramp, now)
		n.Rate, n.Ceil = a.Rate, a.Ceil
	}
	t.Users = append([]model.UserTarget(nil), t.Users...)
	for j := range t.Users {
		u := &t.Users[j]
		var ramp *time.Duration
		if j < len(ir.Users) && ir.Users[j].User == u.Name {
			ramp = ir.Users[j].Ramp
		}
		a := r.advance(RampKey{in.Name, dir, ClassUser, u.Name}, false, Rates{u.Rate, max(u.Ceil, u.Rate)}, u.Burst, u.CBurst, ramp, now)
		u.Rate, u.Ceil, u.Burst, u.CBurst = a.Rate, a.Ceil, a.Burst, a.CBurst
	}
	return t
}

// advance moves one class to its value at now. cfgBurst/cfgCBurst are the
// target's configured bursts (0: default); user classes (kind with bursts)
// and TBF links get explicit bursts, other classes 0.
func (r *Ramper) advance(k RampKey, tbfLink bool, want Rates, cfgBurst, cfgCBurst tbf.Size, ramp *time.Duration, now time.Time) Applied {
	withBursts := k.Kind == ClassUser || tbfLink
	st := r.classes[k]
	if st == nil || st.tbfLink != tbfLink {
		st = &classState{tbfLink: tbfLink, target: want, cfgBurst: cfgBurst, cfgCBurst: cfgCBurst}
		st.applied = Applied{Rates: want}
		if withBursts {
			st.applied.Burst, st.applied.CBurst = StepBurst(want.Rate, cfgBurst, want.Rate), StepBurst(want.Ceil, cfgCBurst, want.Ceil)
			if tbfLink {
				st.applied.Burst = max(st.applied.Burst, model.MaxFrame)
				st.applied.CBurst = st.applied.Burst
			}
		}
		st.seen = true
		r.classes[k] = st
		delete(r.active, k)
		return st.applied
	}
	st.seen = true
	if want != st.target || cfgBurst != st.cfgBurst || cfgCBurst != st.cfgCBurst {
		from := st.applied.Rates
		var spent tbf.Size
		if st.ramp != nil {
			from, spent = st.ramp.At(now), st.ramp.budget.Spent
		}
		st.target, st.cfgBurst, st.cfgCBurst, st.ramp = want, cfgBurst, cfgCBurst, nil
		d := r.policy.Ramp
		if ramp != nil {
			d = *ramp
		}
		if d > 0 && from != want {
			st.ramp = &ramping{RampState: RampState{From: from, To: want, Start: now, End: now.Add(d)},
				budget:     TBFBudget{Total: max(StepBurst(want.Rate, cfgBurst, want.Rate), model.MaxFrame), Spent: spent},
				lastChange: now}
		}
	}
	final := st.ramp == nil || !now.Before(st.ramp.End)
	if final {
		st.ramp = nil
		delete(r.active, k)
	} else {
		r.active[k] = st
	}
	cur := st.target
	if !final {
		cur = st.ramp.At(now)
	}
	a := Applied{Rates: cur}
	switch {
	case tbfLink:
		a.Burst = max(StepBurst(cur.Rate, st.cfgBurst, st.target.Rate), model.MaxFrame)
		if !final {
			if cur.Rate == st.applied.Rate {
				return st.applied // nothing moved: no change, no refill
			}
			if cur.Rate < st.applied.Rate {
				a.Burst = SmoothCap(a.Burst, cur.Rate, r.policy.SmoothWindow)
			}
			left := r.stepsLeft(&st.ramp.RampState, now)
			if !st.ramp.budget.Due(left, now.Sub(st.ramp.lastChange), r.interval()) {
				return st.applied // not paid for now: hold the rate
			}
			g, ok := st.ramp.budget.Take(a.Burst, left)
			if !ok {
				return st.applied
			}
			a.Burst = g
			st.ramp.lastChange = now
		}
		a.CBurst = a.Burst
	case withBursts:
		a.Burst = StepBurst(cur.Rate, st.cfgBurst, st.target.Rate)
		a.CBurst = StepBurst(cur.Ceil, st.cfgCBurst, st.target.Ceil)
		if cur.Rate < st.applied.Rate {
			a.Burst = SmoothCap(a.Burst, cur.Rate, r.policy.SmoothWindow)
		}
		if cur.Ceil < st.applied.Ceil {
			a.CBurst = SmoothCap(a.CBurst, cur.Ceil, r.policy.SmoothWindow)
		}
	}
	st.applied = a
	return a
}

// interval is the policy tick (config.DefaultPolicyInterval when unset).
func (r *Ramper) interval() time.Duration {
	if r.policy.Interval <= 0 {
		return config.DefaultPolicyInterval
	}
	return r.policy.Interval
}

// stepsLeft is the number of policy ticks from now until the ramp's End,
// this one included (at least 1).
func (r *Ramper) stepsLeft(s *RampState, now time.Time) int {
	iv := r.interval()
	return max(int((s.End.Sub(now)+iv-1)/iv), 1)
}
