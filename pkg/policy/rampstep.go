package policy

import (
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Stepped is one class that StepActive moved: its key and what it has now.
type Stepped struct {
	Key     RampKey
	Applied Applied
}

// Active reports whether any ramp is in progress (StepActive has work).
func (r *Ramper) Active() bool { return len(r.active) > 0 }

// StepActive advances only the classes with a ramp in progress to now,
// towards the targets they already have, and returns those whose Applied
// value changed (in no particular order). It costs O(ramping classes), not
// O(classes): the daemon calls it between policy evaluations, while ramps
// run, and patches just those classes. A Step with unchanged targets at the
// same now would hand out the same values. Ramps that reach their End are
// finished (the target is returned) and leave the active set.
func (r *Ramper) StepActive(now time.Time) []Stepped {
	var out []Stepped
	for k, st := range r.active {
		before := st.applied
		a := r.advance(k, st.tbfLink, st.target, st.cfgBurst, st.cfgCBurst, nil, now)
		if a != before {
			out = append(out, Stepped{Key: k, Applied: a})
		}
	}
	return out
}

// StepUser moves one user's classes (on every HTB interface of desired) to
// what desired asks at now, as Step would for them, and returns those
// whose Applied value changed. A changed target starts a ramp as in Step.
// Other classes are not visited: it serves a set-rate or clear of one user
// after desired.UpdateUser.
func (r *Ramper) StepUser(desired *Result, user string, now time.Time) []Stepped {
	var out []Stepped
	for i := range desired.Interfaces {
		ir := &desired.Interfaces[i]
		in := &ir.Targets.Interface
		if in.Shaper == model.ShaperTBF {
			continue
		}
		if j := ir.userAt(user); j >= 0 {
			u := &ir.Targets.Users[j]
			var ramp *time.Duration
			if j < len(ir.Users) && ir.Users[j].User == u.Name {
				ramp = ir.Users[j].Ramp
			}
			k := RampKey{in.Name, direction(*in), ClassUser, u.Name}
			out = r.stepOne(out, k, Rates{u.Rate, max(u.Ceil, u.Rate)}, u.Burst, u.CBurst, ramp, now)
		}
	}
	return out
}

// StepNode is StepUser for node's classes: they move toward desired's
// targets (a set-rate of the node) and what changed is returned, nothing
// else is stepped.
func (r *Ramper) StepNode(desired *Result, node string, now time.Time) []Stepped {
	var out []Stepped
	for i := range desired.Interfaces {
		ir := &desired.Interfaces[i]
		in := &ir.Targets.Interface
		for j := range ir.Targets.Nodes {
			n := &ir.Targets.Nodes[j]
			if n.Name != node {
				continue
			}
			var ramp *time.Duration
			if j < len(ir.Nodes) && ir.Nodes[j].Node == n.Name {
				ramp = ir.Nodes[j].Ramp
			}
			k := RampKey{in.Name, direction(*in), ClassNode, n.Name}
			out = r.stepOne(out, k, Rates{n.Rate, max(n.Ceil, n.Rate)}, 0, 0, ramp, now)
		}
	}
	return out
}

// stepOne advances the HTB class k toward want at now (as Step would) and
// appends it to out when what it hands out changed.
func (r *Ramper) stepOne(out []Stepped, k RampKey, want Rates, burst, cburst tbf.Size, ramp *time.Duration, now time.Time) []Stepped {
	var before Applied
	if st := r.classes[k]; st != nil {
		before = st.applied
	}
	if a := r.advance(k, false, want, burst, cburst, ramp, now); a != before {
		out = append(out, Stepped{Key: k, Applied: a})
	}
	return out
}
