package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// UsersFile holds the users added at run time (shaperctl user add), in
// daemon.state_dir.
const UsersFile = "users.json"

// runtimeUser is a user added at run time, as the state file holds it.
type runtimeUser struct {
	Name      string        `json:"name"`
	Tier      string        `json:"tier"`
	Rate      tbf.Rate      `json:"rate,omitempty"`
	Ceil      tbf.Rate      `json:"ceil,omitempty"`
	Addresses []runtimeAddr `json:"addresses"`
}

// runtimeAddr is one address of a run-time user; a non-zero Until ends it
// by itself (add-address --for).
type runtimeAddr struct {
	Prefix netip.Prefix `json:"prefix"`
	Until  time.Time    `json:"until,omitzero"`
}

// runtimeFile is the state file's contents.
type runtimeFile struct {
	Users []runtimeUser `json:"users"`
}

// configUser is u as a plan's user.
func (u *runtimeUser) configUser() config.User {
	cu := config.User{Source: config.RuntimeSource, Name: u.Name, Tier: u.Tier, Rate: u.Rate, Ceil: u.Ceil}
	for _, a := range u.Addresses {
		cu.Prefixes = append(cu.Prefixes, a.Prefix)
	}
	return cu
}

// clone returns a deep copy of u.
func (u runtimeUser) clone() runtimeUser {
	u.Addresses = slices.Clone(u.Addresses)
	return u
}

// decodeRuntimeUsers parses the run-time users state file.
func decodeRuntimeUsers(b []byte) ([]runtimeUser, error) {
	var f runtimeFile
	if err := decodeState(b, &f); err != nil {
		return nil, err
	}
	for i, u := range f.Users {
		if u.Name == "" || u.Tier == "" {
			return nil, fmt.Errorf("run-time user #%d: no name or tier", i)
		}
		for _, a := range u.Addresses {
			if !a.Prefix.IsValid() {
				return nil, fmt.Errorf("run-time user %q: an invalid address", u.Name)
			}
		}
	}
	return f.Users, nil
}

// loadRuntimeUsers reads the run-time users from dir's state file (a
// corrupt one is moved aside and reported, see readStateFile).
func (d *Daemon) loadRuntimeUsers(dir string) {
	d.runtime = nil
	d.readStateFile(dir, UsersFile, "no run-time users were restored (add them again with shaperctl user add; the moved file keeps them)",
		func(b []byte) error {
			us, err := decodeRuntimeUsers(b)
			if err == nil {
				d.runtime = us
			}
			return err
		})
}

// saveRuntimeUsers writes rt to the state file.
func (d *Daemon) saveRuntimeUsers(dir string, rt []runtimeUser) error {
	if rt == nil {
		rt = []runtimeUser{}
	}
	err := saveJSON(dir, UsersFile, runtimeFile{Users: rt})
	d.stateWritten(UsersFile, err)
	return err
}

// withRuntime returns file's plan with the run-time users rt added after
// users.toml's, and the run-time users it kept. The file wins: a run-time
// user that users.toml now names is dropped, and so is a run-time address
// that overlaps one of users.toml's (or an earlier run-time user's);
// addresses expired at now are dropped too. notes say what was dropped.
func withRuntime(file *config.Plan, rt []runtimeUser, now time.Time) (*config.Plan, []runtimeUser, []string) {
	if len(rt) == 0 {
		return file, nil, nil
	}
	var notes []string
	inFile := make(map[string]string, len(file.Users))
	for _, u := range file.Users {
		inFile[u.Name] = u.Source
	}
	kept := make([]runtimeUser, 0, len(rt))
	for _, u := range rt {
		if src, ok := inFile[u.Name]; ok {
			notes = append(notes, fmt.Sprintf("user %s is in users.toml now (%s): the file wins, its run-time entry is dropped", u.Name, src))
			continue
		}
		u = u.clone()
		u.Addresses = slices.DeleteFunc(u.Addresses, func(a runtimeAddr) bool { return !a.Until.IsZero() && !now.Before(a.Until) })
		kept = append(kept, u)
	}
	users := make([]config.User, 0, len(file.Users)+len(kept))
	users = append(users, file.Users...)
	for i := range kept {
		users = append(users, kept[i].configUser())
	}
	drop := map[int][]netip.Prefix{}
	for _, c := range config.Conflicts(users) {
		if c.User < len(file.Users) {
			continue // users.toml's own problem, reported by its checks
		}
		drop[c.User] = append(drop[c.User], c.Prefix)
		notes = append(notes, fmt.Sprintf("address %s of run-time user %s overlaps %s of user %s: the run-time address is dropped",
			c.Prefix, users[c.User].Name, c.OtherPrefix, users[c.Other].Name))
	}
	for i, ps := range drop {
		k := &kept[i-len(file.Users)]
		k.Addresses = slices.DeleteFunc(k.Addresses, func(a runtimeAddr) bool { return slices.Contains(ps, a.Prefix) })
		users[i] = k.configUser()
	}
	p := *file
	p.Users = users
	return &p, kept, notes
}

// adoptRuntime makes file plus the run-time users the plan to put in
// force, logging what the file overrides. changed reports whether the
// run-time users changed (then the state file is rewritten).
func (d *Daemon) adoptRuntime(file *config.Plan, now time.Time) (plan *config.Plan, kept []runtimeUser, changed bool) {
	plan, kept, notes := withRuntime(file, d.runtime, now)
	for _, n := range notes {
		d.log.Warn("run-time users: " + n)
	}
	return plan, kept, len(notes) > 0 || len(kept) != len(d.runtime)
}

// userSource is control's source of the user named name.
func (d *Daemon) userSource(name string) string {
	if i, ok := d.userIdx[name]; ok && d.plan.Users[i].Source == config.RuntimeSource {
		return control.SourceRuntime
	}
	return control.SourceFile
}

// ChangeUser implements control.Service: it validates the change against
// the plan like users.toml's users are, saves the run-time users and
// applies the change.
func (d *Daemon) ChangeUser(ctx context.Context, req control.UserRequest) (*control.UserResponse, error) {
	var resp *control.UserResponse
	var err error
	if cerr := d.call(ctx, func() { resp, err = d.changeUser(req) }); cerr != nil {
		return nil, cerr
	}
	return resp, err
}

// Users implements control.Service: every user, with its source.
func (d *Daemon) Users(ctx context.Context) (*control.UserListResponse, error) {
	var resp *control.UserListResponse
	if err := d.call(ctx, func() { resp = d.userList() }); err != nil {
		return nil, err
	}
	return resp, nil
}

func (d *Daemon) userList() *control.UserListResponse {
	resp := &control.UserListResponse{Users: make([]control.ListedUser, 0, len(d.plan.Users))}
	rt := make(map[string]*runtimeUser, len(d.runtime))
	for i := range d.runtime {
		rt[d.runtime[i].Name] = &d.runtime[i]
	}
	for i := range d.plan.Users {
		u := &d.plan.Users[i]
		if r := rt[u.Name]; r != nil && u.Source == config.RuntimeSource {
			resp.Users = append(resp.Users, listed(r))
			continue
		}
		lu := control.ListedUser{Name: u.Name, Tier: u.Tier, Source: control.SourceFile, Rate: u.Rate, Ceil: u.Ceil,
			Addresses: make([]control.ListedAddress, 0, len(u.Prefixes))}
		for _, p := range u.Prefixes {
			lu.Addresses = append(lu.Addresses, control.ListedAddress{Address: p.String()})
		}
		resp.Users = append(resp.Users, lu)
	}
	return resp
}

// listed is a run-time user as user list shows it.
func listed(u *runtimeUser) control.ListedUser {
	lu := control.ListedUser{Name: u.Name, Tier: u.Tier, Source: control.SourceRuntime, Rate: u.Rate, Ceil: u.Ceil,
		Addresses: make([]control.ListedAddress, 0, len(u.Addresses))}
	for _, a := range u.Addresses {
		la := control.ListedAddress{Address: a.Prefix.String()}
		if !a.Until.IsZero() {
			t := a.Until
			la.Until = &t
		}
		lu.Addresses = append(lu.Addresses, la)
	}
	return lu
}

// parseAddresses reads a request's addresses as users.toml's are read.
func parseAddresses(user string, ss []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		p, err := config.ParseAddress(s)
		if err != nil {
			return nil, control.BadRequest("user %s: %v", user, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// changeUser validates and applies one run-time user change.
func (d *Daemon) changeUser(req control.UserRequest) (*control.UserResponse, error) {
	now := d.clock.Now()
	if i, ok := d.userIdx[req.Name]; ok && d.plan.Users[i].Source != config.RuntimeSource {
		return nil, control.BadRequest("user %s is written in users.toml (%s): change it there and reload", req.Name, d.plan.Users[i].Source)
	}
	addrs, err := parseAddresses(req.Name, req.Addresses)
	if err != nil {
		return nil, err
	}
	j := slices.IndexFunc(d.runtime, func(u runtimeUser) bool { return u.Name == req.Name })
	if j < 0 && req.Op != control.UserAdd {
		return nil, &control.NotFoundError{Target: req.Name}
	}
	rt := slices.Clone(d.runtime)
	var u runtimeUser
	if j >= 0 {
		u = rt[j].clone()
	}
	note := ""
	switch req.Op {
	case control.UserAdd:
		if j >= 0 {
			return nil, control.BadRequest("user %s exists already (user set-addresses changes its addresses, user remove deletes it)", req.Name)
		}
		u = runtimeUser{Name: req.Name, Tier: req.Tier}
		if req.Rate != nil {
			u.Rate = *req.Rate
		}
		if req.Ceil != nil {
			u.Ceil = *req.Ceil
		}
		for _, p := range addrs {
			u.Addresses = append(u.Addresses, runtimeAddr{Prefix: p})
		}
	case control.UserSetAddresses:
		u.Addresses = u.Addresses[:0]
		for _, p := range addrs {
			u.Addresses = append(u.Addresses, runtimeAddr{Prefix: p})
		}
	case control.UserAddAddress:
		a := runtimeAddr{Prefix: addrs[0]}
		if req.For != nil {
			a.Until = now.Add(req.For.Std())
		}
		if k := slices.IndexFunc(u.Addresses, func(x runtimeAddr) bool { return x.Prefix == a.Prefix }); k >= 0 {
			u.Addresses[k] = a // a renewed lease: the new end (or none)
			note = "the address was there already: its end is renewed"
		} else {
			u.Addresses = append(u.Addresses, a)
		}
	case control.UserRemoveAddress:
		k := slices.IndexFunc(u.Addresses, func(x runtimeAddr) bool { return x.Prefix == addrs[0] })
		if k < 0 {
			return nil, control.BadRequest("user %s has no address %s", req.Name, addrs[0])
		}
		u.Addresses = slices.Delete(u.Addresses, k, k+1)
	case control.UserRemove:
		rt = slices.Delete(rt, j, j+1)
	}
	if req.Op != control.UserRemove {
		if err := config.CheckUser(d.plan, u.configUser()); err != nil {
			return nil, control.BadRequest("%v", err)
		}
		if j >= 0 {
			rt[j] = u
		} else {
			rt = append(rt, u)
		}
	}
	if err := d.applyRuntime(rt, now, "user "+req.Op, req.Name); err != nil {
		return nil, err
	}
	resp := &control.UserResponse{Op: req.Op, Name: req.Name, Note: note}
	if req.Op != control.UserRemove {
		lu := listed(&u)
		resp.User = &lu
	}
	return resp, nil
}

// applyRuntime puts the run-time users rt in force: the plan with them is
// checked as a configuration is (CheckPlan: rates, class ids, the
// classifier's prefix lengths), saved to the state file and applied; the
// kernel gets only what changed (model.Diff of each interface's tree:
// the user's class and filters). Nothing changes when it is refused.
func (d *Daemon) applyRuntime(rt []runtimeUser, now time.Time, why string, changed ...string) error {
	plan, kept, notes := withRuntime(d.filePlan, rt, now)
	if len(notes) > 0 {
		return control.BadRequest("%s", strings.Join(notes, "; "))
	}
	if errs := checkRuntimePlan(plan, changed); len(errs) > 0 {
		return control.BadRequest("%s", strings.Join(errorMessages(errs), "; "))
	}
	if err := d.saveRuntimeUsers(d.plan.Daemon.StateDir, kept); err != nil {
		return fmt.Errorf("run-time users not changed: %w", err)
	}
	d.runtime = kept
	old, dirty := d.plan, d.policyDirty
	d.setPlanKeeping(plan, now)
	d.log.Info("run-time users changed", "why", why, "runtime_users", len(kept))
	patched, err := d.patchRuntime(old, now)
	if patched {
		d.policyDirty = dirty
		d.publish()
	} else {
		err = d.policyStep(now)
	}
	d.assignmentsDue = true
	if err != nil {
		d.log.Error("applying a run-time user change", "why", why, "err", err)
	}
	d.scheduleExpiry()
	return nil
}

// checkRuntimePlan checks plan after a change of the run-time users
// named (all of them when none are named) as CheckPlan would, in time
// that does not grow with the number of users: the rates and classifier
// of a plan of just those users (policy.Check, the prefix lengths
// kernel.CheckFilters refuses), and the number of users against the
// class ids. Only room in the classifier's hash buckets, which depends
// on every filter, is left to the kernel: a filter it refuses is
// reported in status and the log, as at any apply.
func checkRuntimePlan(plan *config.Plan, names []string) []config.Error {
	if len(names) == 0 {
		return CheckPlan(plan)
	}
	if len(plan.Users) > model.MaxUsers {
		return []config.Error{{Msg: fmt.Sprintf("%d users: an interface holds at most %d user classes", len(plan.Users), model.MaxUsers)}}
	}
	p := *plan
	p.Users = nil
	for i := range plan.Users {
		u := &plan.Users[i]
		if u.Source == config.RuntimeSource && slices.Contains(names, u.Name) {
			p.Users = append(p.Users, *u)
		}
	}
	return CheckPlan(&p)
}

// setPlanKeeping puts plan in force after a run-time user change: the
// overrides of users no longer there are dropped (and saved).
func (d *Daemon) setPlanKeeping(plan *config.Plan, now time.Time) {
	d.setPlan(plan)
	if d.quotas {
		d.usage.Configure(plan) // O(users): only when some tier or user has a quota
	}
	ov := d.overrides.Clone()
	if pruned := ov.Prune(plan); len(pruned) > 0 {
		for _, o := range pruned {
			d.log.Info("dropping the override of a removed run-time user", "target", o.Target.String())
		}
		d.overrides = ov
		d.saveOverrides(ov)
	}
}

// errorMessages are errs' messages, without positions (a run-time user
// has none).
func errorMessages(errs []config.Error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Msg
	}
	return out
}

// scheduleExpiry sets when the next run-time address ends (zero: none).
func (d *Daemon) scheduleExpiry() {
	d.rtExpiry = time.Time{}
	for _, u := range d.runtime {
		for _, a := range u.Addresses {
			if !a.Until.IsZero() && (d.rtExpiry.IsZero() || a.Until.Before(d.rtExpiry)) {
				d.rtExpiry = a.Until
			}
		}
	}
}

// expireAddresses removes the run-time addresses that ended at now
// (add-address --for) and applies the change.
func (d *Daemon) expireAddresses(now time.Time) error {
	if d.rtExpiry.IsZero() || now.Before(d.rtExpiry) {
		return nil
	}
	rt := make([]runtimeUser, len(d.runtime))
	var gone, names []string
	for i, u := range d.runtime {
		u = u.clone()
		u.Addresses = slices.DeleteFunc(u.Addresses, func(a runtimeAddr) bool {
			if !a.Until.IsZero() && !now.Before(a.Until) {
				gone = append(gone, u.Name+" "+a.Prefix.String())
				if !slices.Contains(names, u.Name) {
					names = append(names, u.Name)
				}
				return true
			}
			return false
		})
		rt[i] = u
	}
	if len(gone) == 0 {
		d.scheduleExpiry()
		return nil
	}
	d.log.Info("run-time addresses expired", "addresses", describe(gone, 10))
	err := d.applyRuntime(rt, now, "expiry", names...)
	if err != nil {
		d.rtExpiry = now.Add(d.plan.Policy.Interval) // retried (a state write failure)
	}
	return err
}

// startRuntime reads the run-time users from file's state_dir and returns
// the plan to start with: file plus them (see withRuntime), checked like a
// configuration. A plan the run-time users make invalid starts without
// them (logged; the state file keeps them until the next change).
func (d *Daemon) startRuntime(file *config.Plan) *config.Plan {
	d.loadRuntimeUsers(file.Daemon.StateDir)
	if len(d.runtime) == 0 {
		return file
	}
	now := d.clock.Now()
	plan, kept, changed := d.adoptRuntime(file, now)
	if errs := CheckPlan(plan); len(errs) > 0 {
		d.log.Error("run-time users make the plan invalid; starting without them", "problems", describe(errorMessages(errs), 10))
		d.runtime = nil
		return file
	}
	d.runtime = kept
	if changed && !d.opts.ReadOnly {
		d.saveRuntimeUsers(file.Daemon.StateDir, kept)
	}
	d.scheduleExpiry()
	return plan
}

// reloadRuntime is startRuntime for a reloaded file plan: the file wins
// over run-time entries (logged). A plan the run-time users make invalid
// is refused, as an invalid file is.
func (d *Daemon) reloadRuntime(file *config.Plan) (*config.Plan, []runtimeUser, bool, error) {
	if len(d.runtime) == 0 {
		return file, nil, false, nil
	}
	plan, kept, changed := d.adoptRuntime(file, d.clock.Now())
	if errs := CheckPlan(plan); len(errs) > 0 {
		return nil, nil, false, &ConfigError{Problems: append([]string{"with the run-time users (shaperctl user list):"}, errorMessages(errs)...)}
	}
	return plan, kept, changed, nil
}
