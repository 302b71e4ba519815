package policy

import "time"

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
