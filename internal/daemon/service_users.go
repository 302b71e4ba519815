package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaperd/internal/check/offline"
	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/statefile"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
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
	Node      string        `json:"node,omitempty"`
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
	cu := config.User{Source: config.RuntimeSource, Name: u.Name, Tier: u.Tier, Node: u.Node, Rate: u.Rate, Ceil: u.Ceil}
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
	return decodeRuntimeUsersList(f.Users)
}

// decodeRuntimeUsersList checks run-time users read from a state file.
func decodeRuntimeUsersList(us []runtimeUser) ([]runtimeUser, error) {
	for i, u := range us {
		if u.Name == "" || u.Tier == "" {
			return nil, fmt.Errorf("run-time user #%d: no name or tier", i)
		}
		for _, a := range u.Addresses {
			if !a.Prefix.IsValid() {
				return nil, fmt.Errorf("run-time user %q: an invalid address", u.Name)
			}
		}
	}
	return us, nil
}

// loadRuntimeUsers reads the run-time users from dir's state file and
// replays the journal of later changes on them (a corrupt file is moved
// aside and reported, see readStateFile; a torn last journal record, a
// crash while it was written, is dropped with a log line).
func (d *Daemon) loadRuntimeUsers(dir string) {
	d.runtime = nil
	d.journal.Close()
	d.journal = usersJournal{}
	d.readStateFile(dir, UsersFile, "no run-time users were restored (add them again with shaperctl user add; the moved file keeps them)",
		func(b []byte) error {
			us, err := decodeRuntimeUsers(b)
			if err == nil {
				d.runtime = us
			}
			return err
		})
	d.readStateFile(dir, UsersJournal, "the run-time user changes since users.json was last written whole were not restored (the moved file keeps them)",
		func(b []byte) error {
			rt, good, torn, err := replayJournal(slices.Clone(d.runtime), b)
			if err != nil {
				return err
			}
			if torn {
				d.log.Warn("run-time users: the journal's last record is torn (a crash while it was written, never acknowledged); dropping it",
					"file", filepath.Join(dir, UsersJournal), "bytes", len(b)-good)
			}
			d.runtime = rt
			d.journal.Size = int64(good)
			d.journal.Records = bytes.Count(b[:good], []byte{'\n'})
			return nil
		})
}

// saveRuntimeUsers writes rt to the state file whole and empties the
// journal (compaction).
func (d *Daemon) saveRuntimeUsers(dir string, rt []runtimeUser) error {
	if rt == nil {
		rt = []runtimeUser{}
	}
	err := statefile.SaveJSON(dir, UsersFile, runtimeFile{Users: rt})
	if err == nil {
		d.journal.whole = false
		if jerr := d.journal.Reset(journalPath(dir)); jerr != nil {
			d.log.Warn("run-time users: users.json was written but the journal could not be emptied (its records replay harmlessly)", "err", jerr)
		}
	}
	d.stateWritten(UsersFile, err)
	return err
}

// journalUsers records changes of the run-time users in the journal,
// synced; when the journal cannot be written it writes rt() (the run-time
// users after the changes) whole instead. The change is kept (and may be
// acknowledged) only when one of them succeeded.
func (d *Daemon) journalUsers(dir string, rt func() []runtimeUser, recs ...journalRecord) error {
	err := errors.New("users.json holds users that are not in force")
	if !d.journal.whole {
		for _, r := range recs {
			if err = d.journal.Append(journalPath(dir), r); err != nil {
				break
			}
		}
	}
	if err == nil {
		d.stateWritten(UsersFile, nil)
		return nil
	}
	if !d.journal.whole {
		d.log.Warn("run-time users: the journal cannot be written; writing users.json whole", "err", err)
	}
	return d.saveRuntimeUsers(dir, rt())
}

// closeUsers folds the journal into users.json (at shutdown) and closes
// it.
func (d *Daemon) closeUsers() {
	if d.journal.Records > 0 && !d.opts.ReadOnly {
		d.saveRuntimeUsers(d.plan.Daemon.StateDir, d.runtime)
	}
	d.journal.Close()
}

// compactUsers folds the journal into users.json once it holds
// journalCompactRecords records (the reconcile tick calls it).
func (d *Daemon) compactUsers() {
	if d.journal.Records < journalCompactRecords || d.opts.ReadOnly {
		return
	}
	d.saveRuntimeUsers(d.plan.Daemon.StateDir, d.runtime)
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
	lu := control.ListedUser{Name: u.Name, Tier: u.Tier, Node: u.Node, Source: control.SourceRuntime, Rate: u.Rate, Ceil: u.Ceil,
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
			return nil, control.BadUsage("user %s: %v", user, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// changeUser validates and applies one run-time user change, in time
// that does not grow with the number of users (see applyUserChange).
func (d *Daemon) changeUser(req control.UserRequest) (*control.UserResponse, error) {
	now := d.clock.Now()
	if i, ok := d.userIdx[req.Name]; ok && d.plan.Users[i].Source != config.RuntimeSource {
		return nil, control.BadRequest("user %s is written in users.toml (%s): change it there and reload", req.Name, d.plan.Users[i].Source)
	}
	addrs, err := parseAddresses(req.Name, req.Addresses)
	if err != nil {
		return nil, err
	}
	j := d.runtimeIndex(req.Name)
	if j < 0 && req.Op != control.UserAdd {
		return nil, &control.NotFoundError{Target: req.Name}
	}
	var u runtimeUser
	if j >= 0 {
		u = d.runtime[j].clone()
	}
	note := ""
	switch req.Op {
	case control.UserAdd:
		if j >= 0 {
			return nil, control.BadRequest("user %s exists already (user set-addresses changes its addresses, user remove deletes it)", req.Name)
		}
		u = runtimeUser{Name: req.Name, Tier: req.Tier, Node: d.nodeName(req.Node)}
		if req.Rate != nil {
			u.Rate = *req.Rate
		}
		if req.Ceil != nil {
			u.Ceil = *req.Ceil
		}
		if err := ownRateBound(d.plan, req.Name, u.Rate, u.Ceil); err != nil {
			return nil, err
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
	case control.UserMove:
		if u.Node == d.nodeName(req.Node) {
			note = "the user is behind that node already"
		}
		u.Node = d.nodeName(req.Node)
	case control.UserRemoveAddress:
		k := slices.IndexFunc(u.Addresses, func(x runtimeAddr) bool { return x.Prefix == addrs[0] })
		if k < 0 {
			return nil, control.BadRequest("user %s has no address %s", req.Name, addrs[0])
		}
		u.Addresses = slices.Delete(u.Addresses, k, k+1)
	}
	var next *runtimeUser
	if req.Op != control.UserRemove {
		// Addresses that ended and wait for expireAddresses go now.
		u.Addresses = slices.DeleteFunc(u.Addresses, func(a runtimeAddr) bool { return !a.Until.IsZero() && !now.Before(a.Until) })
		if err := config.CheckUserIndexed(d.plan, u.configUser(), d.prefixIndex()); err != nil {
			return nil, control.BadRequest("%v", err)
		}
		next = &u
	}
	if err := d.applyUserChange(req.Name, next, now, "user "+req.Op); err != nil {
		return nil, err
	}
	resp := &control.UserResponse{Op: req.Op, Name: req.Name, Note: note}
	if next != nil {
		lu := listed(next)
		resp.User = &lu
	}
	return resp, nil
}

// runtimeIndex returns the index of the run-time user name in d.runtime,
// or -1. The index by name is kept up to date by applyUserChange and
// rebuilt when d.runtime was replaced (another array or length).
func (d *Daemon) runtimeIndex(name string) int {
	if d.rtIndex == nil || len(d.rtIndex) != len(d.runtime) || d.rtIndexOf != firstUser(d.runtime) {
		d.rtIndex = make(map[string]int, len(d.runtime))
		for i := range d.runtime {
			d.rtIndex[d.runtime[i].Name] = i
		}
		d.rtIndexOf = firstUser(d.runtime)
	}
	if j, ok := d.rtIndex[name]; ok {
		return j
	}
	return -1
}

// firstUser identifies rt's array (nil when empty).
func firstUser(rt []runtimeUser) *runtimeUser {
	if len(rt) == 0 {
		return nil
	}
	return &rt[0]
}

// prefixIndex returns the index of the plan's addresses, built when the
// plan was replaced (start, reload, a full evaluation's path) and kept up
// to date by applyUserChange.
func (d *Daemon) prefixIndex() *config.PrefixIndex {
	if d.prefixes == nil || d.prefixesOf != d.plan {
		d.prefixes, d.prefixesOf = config.NewPrefixIndex(d.plan.Users), d.plan
	}
	return d.prefixes
}

// applyUserChange puts one checked change of the run-time user name in
// force (next nil: removed) without touching any other user: the plan
// with just that user checked as a configuration is (offline.Plan of a plan
// of that user: rates, class ids, the classifier's prefix lengths), the
// change journaled (synced) in state_dir, the plan's entry replaced in
// place (the indexes by name and address updated), and only that user's
// class and filters changed in the kernel (patchRuntimeUser). Nothing
// changes when it is refused. Its cost does not grow with the number of
// users, except where noted in patchRuntimeUser.
func (d *Daemon) applyUserChange(name string, next *runtimeUser, now time.Time, why string) error {
	start := d.clock.Now()
	if len(d.plan.Users)-len(d.filePlan.Users) != len(d.runtime) {
		// The plan does not hold the run-time users as d.runtime has
		// them (cannot happen): the whole path.
		return d.applyRuntimeFull(name, next, now, why)
	}
	j := d.runtimeIndex(name)
	var cu config.User
	if next != nil {
		cu = next.configUser()
		p := *d.plan
		p.Users = []config.User{cu}
		if limit := policy.MaxUsers(d.plan); len(d.plan.Users)+1 > limit && j < 0 {
			return control.BadRequest("%d users: an interface holds at most %d user classes", len(d.plan.Users)+1, limit)
		}
		if errs := offline.Plan(&p); len(errs) > 0 {
			return control.BadRequest("%s", strings.Join(errorMessages(errs), "; "))
		}
	}
	// The state file first: a change is in force only once it is kept.
	checked := d.clock.Now()
	rec := journalRecord{Put: next}
	if next == nil {
		rec = journalRecord{Del: name}
	}
	dir := d.plan.Daemon.StateDir
	if err := d.journalUsers(dir, func() []runtimeUser { return runtimeAfter(d.runtime, j, next) }, rec); err != nil {
		return fmt.Errorf("run-time users not changed: %w", err)
	}
	journaled := d.clock.Now()
	idx := d.prefixIndex()
	plan := *d.plan
	var old *config.User
	nFile := len(d.filePlan.Users)
	switch {
	case j >= 0 && next != nil: // changed in place
		o := plan.Users[nFile+j]
		old = &o
		idx.Remove(old)
		d.runtime[j] = *next
		plan.Users[nFile+j] = cu
		idx.Add(&plan.Users[nFile+j])
	case j >= 0: // removed: the last run-time user takes its place
		o := plan.Users[nFile+j]
		old = &o
		idx.Remove(old)
		last := len(d.runtime) - 1
		d.runtime[j] = d.runtime[last]
		d.runtime[last] = runtimeUser{}
		d.runtime = d.runtime[:last]
		plan.Users[nFile+j] = plan.Users[nFile+last]
		plan.Users[nFile+last] = config.User{}
		plan.Users = plan.Users[:nFile+last]
		delete(d.userIdx, name)
		delete(d.rtIndex, name)
		if j < last {
			d.userIdx[plan.Users[nFile+j].Name] = nFile + j
			d.rtIndex[d.runtime[j].Name] = j
		}
	default: // added at the end (policy.Result.AddUser wants it last)
		if nf := d.filePlan.Users; len(nf) > 0 && len(plan.Users) > 0 && &plan.Users[0] == &nf[0] {
			// The plan's users share their array with the file plan's
			// (no run-time users yet): appends get their own, once.
			plan.Users = slices.Clip(plan.Users)
		}
		d.runtime = append(d.runtime, *next)
		plan.Users = append(plan.Users, cu)
		d.userIdx[name] = len(plan.Users) - 1
		d.rtIndex[name] = len(d.runtime) - 1
		idx.Add(&plan.Users[len(plan.Users)-1])
	}
	d.rtIndexOf = firstUser(d.runtime)
	dirty := d.policyDirty
	d.plan = &plan
	d.prefixesOf = d.plan
	d.policyDirty = true
	if d.quotas {
		d.usage.Configure(d.plan) // O(users): only when some tier or user has a quota
	}
	if next == nil {
		d.pruneOverrides()
	}
	var nu *config.User
	if next != nil {
		nu = &d.plan.Users[d.userIdx[name]]
	}
	planned := d.clock.Now()
	patched, err := d.patchRuntimeUser(name, old, nu, now)
	if patched {
		d.policyDirty = dirty
		d.publish()
	} else {
		err = d.policyStep(now)
	}
	d.assignmentsDue = true
	end := d.clock.Now()
	// The phases' times, for the latency measurements
	// (docs/measurements/2026-12-02-daemon-at-10k-users.md): the checks, the journal's write and sync, the plan and
	// index update, and the user's objects built and written to the
	// kernel (the whole evaluation when patched is false).
	d.userPhases = userPhases{check: checked.Sub(start), journal: journaled.Sub(checked), plan: planned.Sub(journaled), apply: end.Sub(planned)}
	d.log.Info("run-time users changed", "why", why, "runtime_users", len(d.runtime), "patched", patched,
		"check", d.userPhases.check, "journal", d.userPhases.journal, "plan", d.userPhases.plan,
		"apply", d.userPhases.apply, "took", end.Sub(start))
	if err != nil {
		d.log.Error("applying a run-time user change", "why", why, "err", err)
	}
	if next != nil {
		for _, a := range next.Addresses {
			if !a.Until.IsZero() && (d.rtExpiry.IsZero() || a.Until.Before(d.rtExpiry)) {
				d.rtExpiry = a.Until
			}
		}
	}
	return nil
}

// userPhases are the times of a run-time user change's phases (see
// applyUserChange's log line).
type userPhases struct {
	check, journal, plan, apply time.Duration
}

// runtimeAfter is rt with its user j replaced by next (j < 0: added; next
// nil: removed), as a new slice: the whole file written when the journal
// cannot be.
func runtimeAfter(rt []runtimeUser, j int, next *runtimeUser) []runtimeUser {
	out := slices.Clone(rt)
	switch {
	case j >= 0 && next != nil:
		out[j] = *next
	case j >= 0:
		out = slices.Delete(out, j, j+1)
	default:
		out = append(out, *next)
	}
	return out
}

// applyRuntimeFull is applyUserChange through the whole path
// (applyRuntime): the plan rebuilt from the file plan and every run-time
// user.
func (d *Daemon) applyRuntimeFull(name string, next *runtimeUser, now time.Time, why string) error {
	j := slices.IndexFunc(d.runtime, func(u runtimeUser) bool { return u.Name == name })
	return d.applyRuntime(runtimeAfter(d.runtime, j, next), now, why, name)
}

// pruneOverrides drops (and saves) the overrides of users no longer in
// the plan.
func (d *Daemon) pruneOverrides() {
	if d.overrides.Len() == 0 {
		return
	}
	ov := d.overrides.Clone()
	if pruned := ov.Prune(d.plan); len(pruned) > 0 {
		for _, o := range pruned {
			d.log.Info("dropping the override of a removed run-time user", "target", o.Target.String())
		}
		d.overrides = ov
		d.saveOverrides(ov)
	}
}

// applyRuntime puts the run-time users rt in force: the plan with them is
// checked as a configuration is (offline.Plan: rates, class ids, the
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
// named (all of them when none are named) as offline.Plan would, in time
// that does not grow with the number of users: the rates and classifier
// of a plan of just those users (policy.Check, the prefix lengths
// kernel.CheckFilters refuses), and the number of users against the
// class ids. Only room in the classifier's hash buckets, which depends
// on every filter, is left to the kernel: a filter it refuses is
// reported in status and the log, as at any apply.
func checkRuntimePlan(plan *config.Plan, names []string) []config.Error {
	if len(names) == 0 {
		return offline.Plan(plan)
	}
	if limit := policy.MaxUsers(plan); len(plan.Users) > limit {
		return []config.Error{{Msg: fmt.Sprintf("%d users: an interface holds at most %d user classes", len(plan.Users), limit)}}
	}
	p := *plan
	p.Users = nil
	for i := range plan.Users {
		u := &plan.Users[i]
		if u.Source == config.RuntimeSource && slices.Contains(names, u.Name) {
			p.Users = append(p.Users, *u)
		}
	}
	return offline.Plan(&p)
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
	type ended struct {
		j int
		u runtimeUser
	}
	var due []ended
	var gone []string
	for j := range d.runtime {
		u := &d.runtime[j]
		if !slices.ContainsFunc(u.Addresses, func(a runtimeAddr) bool { return !a.Until.IsZero() && !now.Before(a.Until) }) {
			continue
		}
		v := u.clone()
		v.Addresses = slices.DeleteFunc(v.Addresses, func(a runtimeAddr) bool {
			if !a.Until.IsZero() && !now.Before(a.Until) {
				gone = append(gone, u.Name+" "+a.Prefix.String())
				return true
			}
			return false
		})
		due = append(due, ended{j, v})
	}
	if len(due) == 0 {
		d.scheduleExpiry()
		return nil
	}
	d.log.Info("run-time addresses expired", "addresses", describe(gone, 10))
	var err error
	if len(due) > maxExpiryChanges {
		// Many at once: one whole write and evaluation beats a journal
		// record and a patch per user.
		rt := slices.Clone(d.runtime)
		names := make([]string, len(due))
		for k, e := range due {
			rt[e.j], names[k] = e.u, e.u.Name
		}
		err = d.applyRuntime(rt, now, "expiry", names...)
	} else {
		for _, e := range due {
			if err = d.applyUserChange(e.u.Name, &e.u, now, "expiry"); err != nil {
				break
			}
		}
	}
	d.scheduleExpiry()
	if err != nil {
		d.rtExpiry = now.Add(d.plan.Policy.Interval) // retried (a state write failure)
	}
	return err
}

// maxExpiryChanges is how many users' addresses ending at one tick are
// applied one user at a time (each like a user change); more are applied
// as one whole change.
const maxExpiryChanges = 64

// startRuntime reads the run-time users from file's state_dir and returns
// the plan to start with: file plus them (see withRuntime), checked like a
// configuration. A plan the run-time users make invalid starts without
// them (logged; the state file keeps them until the next change).
func (d *Daemon) startRuntime(file *config.Plan) *config.Plan {
	d.loadRuntimeUsers(file.Daemon.StateDir)
	if len(d.runtime) == 0 {
		if d.journal.Records > 0 && !d.opts.ReadOnly {
			d.saveRuntimeUsers(file.Daemon.StateDir, nil) // the journal removed them all
		}
		return file
	}
	now := d.clock.Now()
	plan, kept, changed := d.adoptRuntime(file, now)
	if errs := offline.Plan(plan); len(errs) > 0 {
		d.log.Error("run-time users make the plan invalid; starting without them", "problems", describe(errorMessages(errs), 10))
		d.runtime = nil
		d.journal.whole = true // the next change drops them from the files
		return file
	}
	d.runtime = kept
	if (changed || d.journal.Records > 0) && !d.opts.ReadOnly {
		d.saveRuntimeUsers(file.Daemon.StateDir, kept) // also folds the journal in
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
	if errs := offline.Plan(plan); len(errs) > 0 {
		return nil, nil, false, &ConfigError{Problems: append([]string{"with the run-time users (shaperctl user list):"}, errorMessages(errs)...)}
	}
	return plan, kept, changed, nil
}

// ownRateBound refuses a run-time user's own rate or ceil (download:
// egress interfaces) above the largest bandwidth of the HTB interfaces it
// is shaped on: a plan's ceil above a smaller link is capped to it, but a
// value no link can carry is likely a typo (1gbps, bytes, for 1gbit), as
// set-rate refuses it.
func ownRateBound(plan *config.Plan, user string, rate, ceil tbf.Rate) error {
	var bw tbf.Rate
	name := ""
	for _, in := range plan.Interfaces {
		if in.Shaper == config.ShaperHTB && in.Direction == config.Egress && in.Bandwidth > bw {
			bw, name = in.Bandwidth, in.Name
		}
	}
	for _, v := range []struct {
		what string
		r    tbf.Rate
	}{{"rate", rate}, {"ceil", ceil}} {
		if bw != 0 && v.r > bw {
			return control.BadRequest("user %s: %s %s is above the bandwidth %s of interface %s (egress), the largest its downloads are shaped on",
				user, v.what, v.r, bw, name)
		}
	}
	return nil
}

// nodeName is the name of the node written as s (a name or a path), or s
// itself when the plan has no such node (the user check then says so).
func (d *Daemon) nodeName(s string) string {
	if n, ok := d.plan.Node(s); ok {
		return n.Name
	}
	return s
}
