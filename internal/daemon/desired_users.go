package daemon

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// patchRuntime brings a change of run-time users from old to d.plan to the
// kernel without evaluating every user: each changed user is added
// (policy.Result.AddUser), removed (RemoveUser) or given new addresses, and
// only that user's class and filters are built (a tree of just that user
// under its own minor) and changed. It returns false, having changed
// nothing, when some change cannot be done alone (a tier's first or last
// user, oversubscribed guarantees, an interface not built); the caller
// then takes a full policy step, which also repairs a change it stopped
// in the middle of.
func (d *Daemon) patchRuntime(old *config.Plan, now time.Time) (bool, error) {
	if d.lastRes == nil {
		return false, nil
	}
	for _, st := range d.ifaces {
		if !st.current() {
			return false, nil
		}
	}
	was := make(map[string]*config.User, len(old.Users)-len(d.filePlan.Users))
	for i := len(d.filePlan.Users); i < len(old.Users); i++ {
		was[old.Users[i].Name] = &old.Users[i]
	}
	type change struct {
		name     string
		old, new *config.User
	}
	var changes []change
	for i := len(d.filePlan.Users); i < len(d.plan.Users); i++ {
		u := &d.plan.Users[i]
		o := was[u.Name]
		delete(was, u.Name)
		if o == nil || o.Tier != u.Tier || o.Rate != u.Rate || o.Ceil != u.Ceil || !slices.Equal(o.Prefixes, u.Prefixes) {
			changes = append(changes, change{u.Name, o, u})
		}
	}
	for name, o := range was {
		changes = append(changes, change{name, o, nil})
	}
	ev := d.evalOverrides(d.overrides)
	var errs []error
	for _, c := range changes {
		ok, err := d.patchOne(c.name, c.old, c.new, ev, now)
		if !ok {
			return false, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	d.nextPolicy = policy.NextChange(d.plan, &ev, now)
	d.work.userSteps++
	return true, errors.Join(errs...)
}

// patchRuntimeUser is patchRuntime for one known change: the run-time
// user name went from old to new (nil: absent), nothing else changed.
func (d *Daemon) patchRuntimeUser(name string, old, new *config.User, now time.Time) (bool, error) {
	if d.lastRes == nil {
		return false, nil
	}
	for _, st := range d.ifaces {
		if !st.current() {
			return false, nil
		}
	}
	ev := d.evalOverrides(d.overrides)
	ok, err := d.patchOne(name, old, new, ev, now)
	if !ok {
		return false, nil
	}
	d.nextPolicy = policy.NextChange(d.plan, &ev, now)
	d.work.userSteps++
	return true, err
}

// patchOne patches one user's change into d.lastRes, the interfaces'
// trees and the kernel; false: it needs a full evaluation instead.
func (d *Daemon) patchOne(name string, old, new *config.User, ev policy.Overrides, now time.Time) (bool, error) {
	switch {
	case old == nil:
		return d.patchAdded(name, ev, now)
	case new == nil:
		return d.patchRemoved(name)
	case old.Tier == new.Tier && old.Rate == new.Rate && old.Ceil == new.Ceil:
		if slices.Equal(old.Prefixes, new.Prefixes) {
			return true, nil
		}
		return d.patchAddresses(new)
	}
	return false, nil
}

// patchAdded adds user's classes and filters on every HTB interface.
func (d *Daemon) patchAdded(user string, ev policy.Overrides, now time.Time) (bool, error) {
	if !d.lastRes.AddUser(d.plan, ev, d.usage, now, user) {
		return false, nil
	}
	applied := map[*reconciler]policy.Applied{}
	for _, s := range d.ramper.StepUser(d.lastRes, user, now) {
		if st := d.ifaceOf(s.Key.Interface, s.Key.Direction); st != nil {
			applied[st] = s.Applied
		}
	}
	var errs []error
	for i, st := range d.ifaces {
		if st.cfg.Shaper == config.ShaperTBF || i >= len(d.lastRes.Interfaces) {
			continue
		}
		ir := &d.lastRes.Interfaces[i]
		j := lastIndexOf(ir.Targets.Users, user) // AddUser appends
		if j < 0 {
			continue
		}
		ut := ir.Targets.Users[j]
		if a, ok := applied[st]; ok {
			ut.Rate, ut.Ceil, ut.Burst, ut.CBurst = a.Rate, a.Ceil, a.Burst, a.CBurst
		}
		if err := d.patchUser(st, nil, &ut); err != nil {
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}

// patchRemoved removes user's classes and filters on every HTB interface.
func (d *Daemon) patchRemoved(user string) (bool, error) {
	if !d.lastRes.RemoveUser(user) {
		return false, nil
	}
	var errs []error
	for _, st := range d.ifaces {
		j := d.userIndex(st, user)
		if j < 0 {
			continue
		}
		d.ramper.Forget(policy.RampKey{Interface: st.cfg.Name, Direction: model.Direction(st.cfg.Direction), Kind: policy.ClassUser, Name: user})
		ut := st.targets.Users[j]
		if err := d.patchUser(st, &ut, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}

// patchAddresses gives u's filters its new addresses on every HTB
// interface; its rates are as they were.
func (d *Daemon) patchAddresses(u *config.User) (bool, error) {
	for i := range d.lastRes.Interfaces {
		ir := &d.lastRes.Interfaces[i]
		for j := range ir.Targets.Users {
			if ir.Targets.Users[j].Name == u.Name {
				ir.Targets.Users[j].Prefixes = u.Prefixes
			}
		}
	}
	var errs []error
	for _, st := range d.ifaces {
		j := slices.IndexFunc(st.targets.Users, func(x model.UserTarget) bool { return x.Name == u.Name })
		if j < 0 {
			continue
		}
		old := st.targets.Users[j]
		ut := old
		ut.Prefixes = u.Prefixes
		if err := d.patchUser(st, &old, &ut); err != nil {
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}

// freeMinor returns a user class minor no user holds in ids, looking from
// after the first n (users are handed minors from the start of the range).
func freeMinor(ids *model.Assignment, n int) (uint16, bool) {
	span := int(model.LastUserMinor) - int(model.FirstUserMinor) + 1
	for k := 0; k < span; k++ {
		m := uint16(int(model.FirstUserMinor) + (n+k)%span)
		if _, held := ids.UserByMinor(m); !held {
			return m, true
		}
	}
	return 0, false
}

// patchUser changes one user's objects on st from old to new (nil: the
// user is not there): both are built as trees of just that user (with the
// interface's tiers, and under per-queue trees the queues' split, under the
// user's own minor and queue), their model.Diff is the kernel's change, and
// st.targets and st.desired take the same change. A new user gets a free
// minor (and under per-queue trees a queue: model.Assignment.PlaceUser).
func (d *Daemon) patchUser(st *reconciler, old, new *model.UserTarget) error {
	if st.targets.Interface.Queues > 1 && !splitComplete(st) {
		return d.patchQueued(st, withUser(st.targets, old, new), "user")
	}
	name := ""
	if old != nil {
		name = old.Name
	} else {
		name = new.Name
	}
	if err := d.placeUser(st, name, new); err != nil {
		return err
	}
	build := func(u *model.UserTarget) (model.Tree, error) {
		ids, err := miniIDs(st, name)
		if err != nil {
			return model.Tree{}, err
		}
		mini := miniTargets(st)
		if u != nil {
			mini.Users = []model.UserTarget{*u}
		}
		return model.Build(mini, ids)
	}
	before, err := build(old)
	if err == nil {
		var after model.Tree
		if after, err = build(new); err == nil {
			return d.patchTree(st, "user", name, model.Diff(before, after), new)
		}
	}
	st.buildFailed(err)
	d.stats.errors.WithLabelValues("build").Inc()
	return fmt.Errorf("interface %s: user %s: %w", st.key, name, err)
}

// addsUserClass reports whether c adds a user's class.
func addsUserClass(c model.Change) bool {
	return c.Op == model.OpAdd && c.Class != nil && c.Class.Labels.Kind == "user"
}

// lastIndexOf is the index of user in us, looking from the end (where
// run-time users are added), or -1.
func lastIndexOf(us []model.UserTarget, user string) int {
	for j := len(us) - 1; j >= 0; j-- {
		if us[j].Name == user {
			return j
		}
	}
	return -1
}

// placeUser gives user, when st.ids has no class for it yet, a free minor
// and under per-queue trees a queue (new is its target: its rate places
// it).
func (d *Daemon) placeUser(st *reconciler, user string, new *model.UserTarget) error {
	ids, have := st.ids, len(st.targets.Users)
	if n := st.targets.Interface.Queues; n > 1 {
		var rate tbf.Rate
		if new != nil {
			rate = new.Rate
		}
		q, ok := st.ids.PlaceUser(user, rate)
		if !ok {
			return fmt.Errorf("interface %s: user %s: no queue placement", st.key, user)
		}
		ids, have = st.ids.QueueIDs(q), have/n
	}
	if _, ok := ids.User(user); ok {
		return nil
	}
	m, ok := freeMinor(ids, have)
	if !ok {
		return fmt.Errorf("interface %s: user %s: %w", st.key, user, model.ErrTooManyUsers)
	}
	if err := ids.SetUser(user, m); err != nil {
		return fmt.Errorf("interface %s: %w", st.key, err)
	}
	return nil
}

// miniIDs returns a fresh Assignment with st's tier minors (in every
// queue's tree under per-queue trees) and users' minors (and queues): what
// a Build of just these users needs to name their classes as st's tree
// does. Each build gets its own: Build releases the minors of users it is
// not given. Users st has no class for are left out.
func miniIDs(st *reconciler, users ...string) (*model.Assignment, error) {
	ids := model.NewAssignment()
	n := st.targets.Interface.Queues
	if n < 2 {
		for _, t := range st.targets.Tiers {
			if m, ok := st.ids.Tier(t.Name); ok {
				if err := ids.SetTier(t.Name, m); err != nil {
					return nil, fmt.Errorf("tier %s: %w", t.Name, err)
				}
			}
		}
		for _, u := range users {
			if m, ok := st.ids.User(u); ok {
				if err := ids.SetUser(u, m); err != nil {
					return nil, err
				}
			}
		}
		return ids, nil
	}
	for _, u := range users {
		q, ok := st.ids.Queue(u)
		if !ok {
			continue
		}
		m, ok := st.ids.QueueIDs(q).User(u)
		if !ok {
			continue
		}
		if err := ids.SetQueue(u, n, q); err != nil {
			return nil, err
		}
		if err := ids.QueueIDs(q).SetUser(u, m); err != nil {
			return nil, err
		}
	}
	ids.UseQueues(n) // the tiers need the queues even without a user placed
	for q := 0; q < n; q++ {
		for _, t := range st.targets.Tiers {
			if m, ok := st.ids.QueueIDs(q).Tier(t.Name); ok {
				if err := ids.QueueIDs(q).SetTier(t.Name, m); err != nil {
					return nil, fmt.Errorf("queue %d: tier %s: %w", q, t.Name, err)
				}
			}
		}
	}
	return ids, nil
}

// miniTargets is st's targets without users: the interface, tiers and
// queue split a Build of a few users shares with st's tree.
func miniTargets(st *reconciler) model.Targets {
	return model.Targets{Interface: st.targets.Interface, Tiers: st.targets.Tiers,
		Queues: st.targets.Queues, TierQueues: st.targets.TierQueues}
}

// splitComplete reports whether st's targets carry a split for every queue
// and tier (completeSplit), so that a Build of a few users makes st's
// queue and tier classes exactly.
func splitComplete(st *reconciler) bool {
	n := st.targets.Interface.Queues
	if len(st.targets.Queues) != n || st.ids.QueueCount() != n {
		return false
	}
	for _, t := range st.targets.Tiers {
		if len(st.targets.TierQueues[t.Name]) != n {
			return false
		}
	}
	return true
}

// patchTree applies changes (of one user's class and filters, or of the
// classes of a queue split: user "") to st's targets, desired tree and the
// kernel; new is the user's target after them (nil: removed); why names the
// pass.
func (d *Daemon) patchTree(st *reconciler, why, user string, changes []model.Change, new *model.UserTarget) error {
	j := -1
	if user != "" && !slices.ContainsFunc(changes, addsUserClass) {
		// (An add: st.targets has no entry for the user; no need to look.)
		j = d.userIndex(st, user)
	}
	// st.targets is st's own (policy.Ramper.Step copies the users): in
	// place, a removed user's place taken by the last one.
	switch {
	case new == nil && j >= 0:
		last := len(st.targets.Users) - 1
		st.targets.Users[j] = st.targets.Users[last]
		st.targets.Users[last] = model.UserTarget{}
		st.targets.Users = st.targets.Users[:last]
	case new != nil && j >= 0:
		st.targets.Users[j] = *new
	case new != nil:
		st.targets.Users = append(st.targets.Users, *new)
	}
	// In place: a tree taken before is not changed afterwards (reconcile
	// diffs against a fresh Build), and the metrics read a copy (st.view),
	// updated here chunk by chunk rather than copied whole. An add
	// appends; a delete moves the last class (filter) into the gap, so
	// that only that one's index changes.
	viewed := !st.viewStale
	classes, filters := st.desired.Classes, st.desired.Filters
	for _, c := range changes {
		switch {
		case c.Class != nil && c.Op == model.OpAdd:
			classes = append(classes, *c.Class)
			st.byHandle[c.Class.Handle] = len(classes) - 1
			if viewed {
				st.view = st.view.appended(classes[len(classes)-1])
			}
		case c.Class != nil && c.Op == model.OpDelete:
			h := c.Class.Handle
			i, ok := st.byHandle[h]
			if !ok || i >= len(classes) || classes[i].Handle != h {
				i = slices.IndexFunc(classes, func(x model.Class) bool { return x.Handle == h })
			}
			if i < 0 {
				continue
			}
			last := len(classes) - 1
			classes[i] = classes[last]
			classes[last] = model.Class{}
			classes = classes[:last]
			delete(st.byHandle, h)
			if i < last {
				st.byHandle[classes[i].Handle] = i
			}
			if viewed {
				st.view = st.view.removed(i)
			}
		case c.Class != nil && c.Op == model.OpChange:
			if i, ok := st.byHandle[c.Class.Handle]; ok {
				classes[i] = *c.Class
				if viewed {
					st.view = st.view.patched(classes, []int{i})
				}
			}
		case c.Filter != nil && c.Op == model.OpAdd:
			filters = append(filters, *c.Filter)
		case c.Filter != nil && c.Op == model.OpDelete:
			f := *c.Filter
			for i := 0; i < len(filters); {
				if filters[i].Prefix == f.Prefix && filters[i].Match == f.Match {
					last := len(filters) - 1
					filters[i] = filters[last]
					filters = filters[:last]
					continue
				}
				i++
			}
		}
	}
	st.desired.Classes, st.desired.Filters = classes, filters
	return d.apply(st, deltaPass(why, changes, st.state == stateOK))
}
