package policy

import (
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// AddUser adds user, the last of plan.Users, to r on every HTB interface,
// evaluated at now as Evaluate(plan, ov, usage, now) would. r must come
// from Evaluate of plan without that user (in the same order). It reports
// false, leaving r as it was, when it cannot do so alone: user is not
// plan's last, its tier has no aggregate class on an interface yet (the
// tier class is new too), or it moves an interface's oversubscription
// scaling (every guarantee there changes). Then evaluate everything. It
// serves the daemon's run-time user add without evaluating every user.
func (r *Result) AddUser(plan *config.Plan, ov Overrides, usage *Usage, now time.Time, user string) bool {
	n := len(plan.Users)
	if n == 0 || plan.Users[n-1].Name != user || len(r.Interfaces) != len(plan.Interfaces) {
		return false
	}
	u := &plan.Users[n-1]
	tier, ok := plan.Tier(u.Tier)
	if !ok {
		return false
	}
	type saved struct {
		ir    *InterfaceResult
		users []model.UserTarget
		xs    []Explanation
	}
	var done []saved
	undo := func() {
		for _, s := range done {
			s.ir.Targets.Users, s.ir.Users = s.users, s.xs
			s.ir.invalidateSums()
			s.ir.uidx = nil
		}
	}
	for i := range r.Interfaces {
		ir, in := &r.Interfaces[i], &plan.Interfaces[i]
		if in.Shaper == config.ShaperTBF || !nodeOn(u, ir.Targets.Nodes) || !plan.UserOn(u, in.Name) {
			continue
		}
		if rate, _ := tier.AggregateRates(in.Direction); rate != 0 && u.Node == "" &&
			!slices.ContainsFunc(ir.Targets.Tiers, func(t model.TierTarget) bool { return t.Name == u.Tier }) {
			undo()
			return false
		}
		t := config.TierFor(tier, u)
		leaves := leafCache{in: in, kinds: plan.LeafKinds}
		ut := model.UserTarget{Name: u.Name, Tier: u.Tier, Node: u.Node, Prefixes: u.Prefixes, Prio: t.Prio, Leaf: leaves.user(t, u)}
		done = append(done, saved{ir, ir.Targets.Users, ir.Users})
		// Appended in place (amortised O(1)): r owns its slices (the
		// Ramper's targets are copies), and the saved headers, shorter,
		// still see what they saw.
		ir.Targets.Users = append(ir.Targets.Users, ut)
		ir.userAppended()
		ir.Users = append(ir.Users, Explanation{User: u.Name, Tier: u.Tier, Interface: in.Name, Direction: model.Direction(in.Direction)})
	}
	if len(done) == 0 || !r.UpdateUser(plan, ov, usage, now, user) {
		undo()
		return false
	}
	return true
}

// RemoveUser removes user from r on every HTB interface. It reports
// false, leaving r as it was, when that changes more than the user's own
// class: the guarantees of the user's parent are oversubscribed and their
// quantized scale moves (or they stop being oversubscribed), or the user
// is the last of its tier on an interface (the tier's aggregate class
// goes too). Then evaluate everything.
func (r *Result) RemoveUser(user string) bool {
	type at struct {
		i, j int
		oi   int      // the parent's oversubscription, -1 for none
		sum  tbf.Rate // its guarantees without the user
	}
	var found []at
	for i := range r.Interfaces {
		ir := &r.Interfaces[i]
		j := ir.userAt(user)
		if j < 0 {
			continue
		}
		if j >= len(ir.Users) {
			return false
		}
		oi, sum, ok := removalKeepsScale(ir, j)
		if !ok {
			return false
		}
		tier := ir.Targets.Users[j].Tier
		if ir.Targets.Users[j].Node == "" && slices.ContainsFunc(ir.Targets.Tiers, func(t model.TierTarget) bool { return t.Name == tier }) {
			others := false
			for k, u := range ir.Targets.Users {
				if k != j && u.Tier == tier && u.Node == "" {
					others = true
					break
				}
			}
			if !others {
				return false
			}
		}
		found = append(found, at{i, j, oi, sum})
	}
	if len(found) == 0 {
		return false
	}
	// In place, the last user taking the removed one's place (r owns its
	// slices; the order of users in a result carries no meaning).
	for _, f := range found {
		ir := &r.Interfaces[f.i]
		if f.oi >= 0 {
			ir.Oversubscriptions[f.oi].Guaranteed = f.sum
		}
		if ir.gsums != nil && ir.gsums.owner == ir {
			ir.gsums.sums[ir.userParent(&ir.Targets.Users[f.j])] -= uint64(ir.Targets.Users[f.j].Rate)
		}
		ir.Targets.Users = swapRemove(ir.Targets.Users, f.j)
		ir.userSwapRemoved(user, f.j)
		ir.Users = swapRemove(ir.Users, f.j)
	}
	return true
}

// Forget drops the ramp state of the class k (a user removed): a class
// made later under that key starts at its target.
func (r *Ramper) Forget(k RampKey) {
	delete(r.classes, k)
	delete(r.active, k)
}

// swapRemove removes s[j], moving the last element into its place.
func swapRemove[T any](s []T, j int) []T {
	last := len(s) - 1
	s[j] = s[last]
	var zero T
	s[last] = zero
	return s[:last]
}

// MoveUser puts user behind the node plan now gives it (config.User.Node,
// "" for none) in r, on every HTB interface, with the rates Evaluate(plan,
// ov, usage, now) would give it there (its ceil capped to the new node's).
// r must come from Evaluate of the same plan with the user's old node. It
// reports false, leaving r as it was, when the move changes more than the
// user's own class: guarantees oversubscribed on an interface (before or
// after), the user joining or leaving an interface (nodes on other
// interfaces), or a tier aggregate gaining or losing the user. Then
// evaluate everything.
func (r *Result) MoveUser(plan *config.Plan, ov Overrides, usage *Usage, now time.Time, user string) bool {
	i := slices.IndexFunc(plan.Users, func(u config.User) bool { return u.Name == user })
	if i < 0 || len(r.Interfaces) != len(plan.Interfaces) {
		return false
	}
	u := &plan.Users[i]
	type saved struct {
		ut   *model.UserTarget
		node string
	}
	var done []saved
	undo := func() {
		for _, s := range done {
			s.ut.Node = s.node
		}
		r.invalidateSums()
	}
	for k := range r.Interfaces {
		ir, in := &r.Interfaces[k], &plan.Interfaces[k]
		if in.Shaper == config.ShaperTBF {
			continue
		}
		j := ir.userAt(user)
		if (j >= 0) != (nodeOn(u, ir.Targets.Nodes) && plan.UserOn(u, in.Name)) || len(ir.Oversubscriptions) > 0 {
			undo()
			return false
		}
		if j < 0 {
			continue
		}
		ut := &ir.Targets.Users[j]
		if (ut.Node == "") != (u.Node == "") &&
			slices.ContainsFunc(ir.Targets.Tiers, func(t model.TierTarget) bool { return t.Name == u.Tier }) {
			undo()
			return false
		}
		done = append(done, saved{ut, ut.Node})
		ut.Node = u.Node
		ir.invalidateSums() // the user changes parent
	}
	if len(done) == 0 || !r.UpdateUser(plan, ov, usage, now, user) {
		undo()
		return false
	}
	return true
}

// invalidateSums drops every interface's cached guarantee sums.
func (r *Result) invalidateSums() {
	for i := range r.Interfaces {
		r.Interfaces[i].invalidateSums()
	}
}
