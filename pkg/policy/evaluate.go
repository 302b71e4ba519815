package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Result is what every managed interface should have at At.
type Result struct {
	At         time.Time
	Interfaces []InterfaceResult // plan order
}

// InterfaceResult is one managed interface (one [[interface]] entry).
type InterfaceResult struct {
	// Targets is ready for model.Build: the interface spec (Bandwidth after
	// any iface override), the tiers with an aggregate class that have users
	// here (sorted by name), and every user (plan order) with the rates for
	// this direction. User Burst/CBurst are the tier's configured sizes (0:
	// Build's default); a TBF interface has no tiers or users.
	Targets model.Targets
	// Link explains the interface's bandwidth (Rate = Ceil; Burst is the
	// TBF burst, or the root class's default burst for HTB).
	Link Explanation
	// Default explains the HTB default class; nil for TBF.
	Default *Explanation
	// Users explains Targets.Users, index for index.
	Users []Explanation
	// Nodes explains Targets.Nodes, index for index.
	Nodes []Explanation
	// Oversubscriptions lists the parents (the interface, tier aggregates)
	// whose children's guaranteed rates were scaled down to fit them.
	Oversubscriptions []Oversubscription
	// tierCaps are the tier aggregates whose ceil was capped to the
	// bandwidth (see Caps).
	tierCaps []Cap
	// gsums caches the guarantee sums of each parent (sums.go); nil:
	// none.
	gsums *guaranteeSums
	// uidx indexes Targets.Users by name (sums.go); nil: none.
	uidx *userIndex
}

// Targets returns every interface's targets, in plan order.
func (r *Result) Targets() []model.Targets {
	out := make([]model.Targets, len(r.Interfaces))
	for i := range r.Interfaces {
		out[i] = r.Interfaces[i].Targets
	}
	return out
}

// User returns user's explanations, one per HTB interface, in plan order.
func (r *Result) User(name string) []Explanation {
	var out []Explanation
	for i := range r.Interfaces {
		for _, e := range r.Interfaces[i].Users {
			if e.User == name {
				out = append(out, e)
			}
		}
	}
	return out
}

// Evaluate computes every interface's targets at now from plan, the
// overrides ov and the quota usage (nil: nobody has used anything). It is a
// pure function: it reads its arguments and changes none of them; expired
// overrides are ignored. Times are read in plan.Policy.Location (nil:
// time.Local).
//
// Every user is shaped on every HTB interface it is on (its own
// interfaces, else its tier's, else all; a user behind a node where the
// node is); on egress interfaces with the download rates (rate/ceil),
// on ingress interfaces with the upload rates (upload_rate/upload_ceil). The
// rules and their precedence are in the package documentation.
func Evaluate(plan *config.Plan, ov Overrides, usage *Usage, now time.Time) *Result {
	e := evaluator{plan: plan, ov: &ov, usage: usage, now: now, loc: plan.Policy.Location}
	if e.loc == nil {
		e.loc = time.Local
	}
	res := &Result{At: now, Interfaces: make([]InterfaceResult, 0, len(plan.Interfaces))}
	for i := range plan.Interfaces {
		res.Interfaces = append(res.Interfaces, e.iface(&plan.Interfaces[i]))
	}
	return res
}

type evaluator struct {
	plan  *config.Plan
	ov    *Overrides
	usage *Usage
	now   time.Time
	loc   *time.Location
	// force, when set, replaces the clock and the usage (Check's outcomes).
	force *outcome
	// reasons caches describeSchedule per schedule: formatting it for
	// every user of a large plan dominated Evaluate.
	reasons map[*config.Schedule]string
}

// scheduleReason is describeSchedule(tier, i, s), formatted once per s.
func (e *evaluator) scheduleReason(tier string, i int, s *config.Schedule) string {
	if r, ok := e.reasons[s]; ok {
		return r
	}
	if e.reasons == nil {
		e.reasons = map[*config.Schedule]string{}
	}
	r := describeSchedule(tier, i, s)
	e.reasons[s] = r
	return r
}

// outcome fixes what the clock and the usage would decide: every tier's
// schedule number sched (-1 or beyond its schedules: none) and whether
// every user with a quota is over it.
type outcome struct {
	sched     int
	overQuota bool
}

// iface evaluates one interface.
func (e *evaluator) iface(in *config.Interface) InterfaceResult {
	dir := model.Direction(in.Direction)
	spec := model.InterfaceSpec{
		Name: in.Name, Shaper: model.ShaperKind(in.Shaper), Direction: dir, IFB: in.IFB,
		Bandwidth: in.Bandwidth, Match: model.MatchField(in.Match),
		DefaultRate: in.DefaultRate, DefaultCeil: in.DefaultCeil,
		Burst: in.Burst, Latency: in.Latency, PeakRate: in.PeakRate, MTU: in.MTU,
		Framing: in.Framing, Queues: in.Queues,
	}
	cl, lat, _ := effectiveLeaf(in, nil, nil)
	spec.Leaf, _ = resolvedLeaf(cl, lat, e.plan.LeafKinds)
	if ls, ok := e.plan.Links[in.Name]; ok {
		spec.Frame, spec.Aggregate = ls.Frame, ls.Aggregate
	}
	leaves := leafCache{in: in, kinds: e.plan.LeafKinds}
	link := Explanation{Interface: in.Name, Direction: dir, Source: SourceConfig, Reason: "bandwidth",
		ConfiguredRate: in.Bandwidth, ConfiguredCeil: in.Bandwidth}
	if o, ok := e.ifaceOverride(in); ok {
		// At most the configured bandwidth: the link has no more (a local
		// set-rate above it is refused; a fleet's, for routers with links
		// of different sizes, is capped here).
		spec.Bandwidth = min(o.Rate, in.Bandwidth)
		link.Source, link.OverrideUntil, link.Ramp = SourceIfaceOverride, o.Until, o.Ramp
		link.Reason = overrideReason("override", o, e.now, e.loc)
		if o.Rate > in.Bandwidth {
			link.Reason += fmt.Sprintf("; %s capped to the bandwidth %s", o.Rate, in.Bandwidth)
		}
	}
	link.Rate, link.Ceil = spec.Bandwidth, spec.Bandwidth
	link.Burst = in.Burst
	if link.Burst == 0 {
		link.Burst = max(tbf.RecommendedBurst(spec.Bandwidth), model.MaxFrame)
	}
	link.CBurst = link.Burst
	out := InterfaceResult{Link: link}
	if in.Shaper == config.ShaperTBF {
		out.Targets = model.Targets{Interface: spec}
		return out
	}

	def := e.defaultClass(in)
	spec.DefaultRate, spec.DefaultCeil = def.Rate, def.Ceil
	out.Default = &def

	out.Targets.Nodes, out.Nodes = e.nodes(in)
	used := map[string]bool{}
	n := 0 // the users on this interface: both lists are made to size (they are kept)
	for i := range e.plan.Users {
		if u := &e.plan.Users[i]; nodeOn(u, out.Targets.Nodes) && e.plan.UserOn(u, in.Name) {
			n++
		}
	}
	if n > 0 { // none: both stay nil, as before
		out.Targets.Users, out.Users = make([]model.UserTarget, 0, n), make([]Explanation, 0, n)
	}
	for i := range e.plan.Users {
		u := &e.plan.Users[i]
		if !nodeOn(u, out.Targets.Nodes) || !e.plan.UserOn(u, in.Name) {
			continue // behind a node of another interface, or not on this one
		}
		x := e.user(u, in)
		if u.Node == "" {
			used[u.Tier] = true // users under a node hang from it, not from their tier's aggregate
		}
		tier, _ := e.plan.Tier(u.Tier)
		tier = config.TierFor(tier, u) // the user's own burst, cburst, prio
		ut := model.UserTarget{Name: u.Name, Tier: u.Tier, Node: u.Node, Prefixes: u.Prefixes, Rate: x.Rate, Ceil: x.Ceil}
		if tier != nil {
			ut.Burst, ut.CBurst, ut.Prio = targetBursts(tier, &x), targetCBurst(tier, &x), tier.Prio
		}
		ut.Leaf = leaves.user(tier, u)
		out.Targets.Users = append(out.Targets.Users, ut)
		out.Users = append(out.Users, x)
	}
	if (in.Queues > 1 || in.Queues == config.QueuesAuto) && len(out.Targets.Users) > model.MaxMQUserLeaves {
		// Per-queue trees name leaves from the kernel's automatic handles,
		// which run out: this many users keep the kernel's default leaves.
		spec.Leaf = nil
		for i := range out.Targets.Users {
			out.Targets.Users[i].Leaf = nil
		}
	}
	for i := range e.plan.Tiers {
		t := &e.plan.Tiers[i]
		if r, c := t.AggregateRates(in.Direction); used[t.Name] && r != 0 {
			out.Targets.Tiers = append(out.Targets.Tiers, model.TierTarget{Name: t.Name, Rate: r, Ceil: max(c, r)})
		}
	}
	out.Targets.Interface = spec
	capCeilings(&out, in.Bandwidth)
	capNodes(&out, in.Bandwidth)
	scaleGuarantees(&out)
	rateUnderCeil(&out)
	return out
}

// ifaceOverride returns the override in force for in, if any: by its
// name, else (ingress) by its IFB device.
func (e *evaluator) ifaceOverride(in *config.Interface) (Override, bool) {
	if o, ok := e.ov.For(Target{TargetIface, in.Name}, in.Direction, e.now); ok {
		return o, true
	}
	if in.IFB != "" {
		return e.ov.For(Target{TargetIface, in.IFB}, in.Direction, e.now)
	}
	return Override{}, false
}

// tierRates applies rules 5 and 6 (schedule, tier) for direction d.
func (e *evaluator) tierRates(t *config.Tier, d config.Direction) (rate, ceil tbf.Rate, src Source, reason string) {
	rate, ceil = t.Rates(d)
	src, reason = SourceTier, "tier "+t.Name
	i := -1
	if e.force != nil {
		if e.force.sched < len(t.Schedules) {
			i = e.force.sched
		}
	} else {
		i = ActiveSchedule(t, e.now, e.loc)
	}
	if i >= 0 {
		s := &t.Schedules[i]
		rate, ceil = scheduleRates(s, d)
		src, reason = SourceSchedule, e.scheduleReason(t.Name, i, s)
	}
	return rate, max(ceil, rate), src, reason
}

// defaultClass decides the HTB default class's rates.
func (e *evaluator) defaultClass(in *config.Interface) Explanation {
	x := Explanation{Interface: in.Name, Direction: model.Direction(in.Direction), Tier: in.DefaultTier}
	switch t, ok := e.plan.Tier(in.DefaultTier); {
	case in.DefaultRate != 0 || !ok:
		x.Rate, x.Ceil = in.DefaultRate, max(in.DefaultCeil, in.DefaultRate)
		x.Source, x.Reason = SourceConfig, "default_rate"
		x.Tier = ""
	default:
		x.ConfiguredRate, x.ConfiguredCeil = t.Rates(in.Direction)
		x.Rate, x.Ceil, x.Source, x.Reason = e.tierRates(t, in.Direction)
		if o, ok := e.ov.For(Target{TargetTier, t.Name}, in.Direction, e.now); ok {
			var note string
			x.Rate, x.Ceil, note = overrideRates(o, t, in.Direction)
			x.Source, x.OverrideUntil, x.Ramp = SourceTierOverride, o.Until, o.Ramp
			x.Reason = overrideReason("tier override ("+t.Name+")", o, e.now, e.loc) + note
		}
	}
	if x.ConfiguredRate == 0 {
		x.ConfiguredRate, x.ConfiguredCeil = x.Rate, x.Ceil
	}
	x.Burst, x.CBurst = tbf.RecommendedBurst(x.Rate), tbf.RecommendedBurst(x.Ceil)
	return x
}

// user decides one user's rates on interface in.
func (e *evaluator) user(u *config.User, in *config.Interface) Explanation {
	d := in.Direction
	x := Explanation{User: u.Name, Tier: u.Tier, Interface: in.Name, Direction: model.Direction(d)}
	t, ok := e.plan.Tier(u.Tier)
	if !ok { // a validated plan never gets here; keep the user shaped at the minimum
		t = &config.Tier{Name: u.Tier, Rate: config.MinRate, Ceil: config.MinRate, UploadRate: config.MinRate, UploadCeil: config.MinRate}
	}
	t = config.TierFor(t, u) // the user's own burst, cburst, prio and quota settings
	// Rules 6 and 5: tier, schedule.
	x.ConfiguredRate, x.ConfiguredCeil = t.Rates(d)
	x.Rate, x.Ceil, x.Source, x.Reason = e.tierRates(t, d)
	// Rule 4: the user's own rates.
	ur, uc := u.Rate, u.Ceil
	if d == config.Ingress {
		ur, uc = u.UploadRate, u.UploadCeil
	}
	if ur != 0 || uc != 0 {
		x.Rate, x.Ceil = userRates(x.Rate, x.Ceil, ur, uc)
		x.ConfiguredRate, x.ConfiguredCeil = userRates(x.ConfiguredRate, x.ConfiguredCeil, ur, uc)
		x.Source, x.Reason = SourceUser, "user config"
	}
	// Rule 3: quota.
	if t.Quota != 0 {
		q := &QuotaState{Limit: uint64(t.Quota)}
		if e.force != nil {
			q.PeriodStart, q.PeriodEnd = PeriodBounds(t.QuotaPeriod, e.now, e.loc)
			if e.force.overQuota {
				q.Used = q.Limit
			}
		} else if e.usage != nil {
			q.Used, q.PeriodStart, q.PeriodEnd = e.usage.Used(u.Name, t.QuotaPeriod, e.now)
		} else {
			q.PeriodStart, q.PeriodEnd = PeriodBounds(t.QuotaPeriod, e.now, e.loc)
		}
		q.Exceeded = q.Used >= q.Limit
		x.Quota = q
		if q.Exceeded {
			x.Rate = min(x.Rate, t.OverQuotaRate)
			x.Ceil = max(min(x.Ceil, max(t.OverQuotaCeil, t.OverQuotaRate)), x.Rate)
			x.Source, x.Reason = SourceQuota, "quota exceeded"
		}
	}
	// Rules 2 and 1: overrides; for this direction, else for both
	// (scaled on upload interfaces by the tier's upload/download ratio).
	if o, ok := e.ov.For(Target{TargetTier, u.Tier}, d, e.now); ok {
		var note string
		x.Rate, x.Ceil, note = overrideRates(o, t, d)
		x.Source, x.OverrideUntil, x.Ramp = SourceTierOverride, o.Until, o.Ramp
		x.Reason = overrideReason("tier override ("+u.Tier+")", o, e.now, e.loc) + note
	}
	if o, ok := e.ov.For(Target{TargetUser, u.Name}, d, e.now); ok {
		var note string
		x.Rate, x.Ceil, note = overrideRates(o, t, d)
		x.Source, x.OverrideUntil, x.Ramp = SourceUserOverride, o.Until, o.Ramp
		x.Reason = overrideReason("override", o, e.now, e.loc) + note
	}
	x.Burst, x.CBurst = t.Burst, t.CBurst
	if x.Burst == 0 {
		x.Burst = tbf.RecommendedBurst(x.Rate)
	} else if m := tbf.MaxBurst(x.Rate); x.Burst > m {
		x.Reason += fmt.Sprintf("; burst %s cut to %s, the most the kernel holds at rate %s", x.Burst, m, x.Rate)
		x.Burst, x.BurstCut = m, true
	}
	if x.CBurst == 0 {
		x.CBurst = tbf.RecommendedBurst(x.Ceil)
	} else if m := tbf.MaxBurst(x.Ceil); x.CBurst > m {
		x.Reason += fmt.Sprintf("; cburst %s cut to %s, the most the kernel holds at ceil %s", x.CBurst, m, x.Ceil)
		x.CBurst, x.BurstCut = m, true
	}
	return x
}

// targetBursts is the Burst of a user's target: the tier's configured
// burst (0: Build's default), as x cut it to fit x.Rate.
func targetBursts(t *config.Tier, x *Explanation) tbf.Size {
	if t.Burst == 0 {
		return 0
	}
	return x.Burst
}

// targetCBurst is targetBursts for the cburst.
func targetCBurst(t *config.Tier, x *Explanation) tbf.Size {
	if t.CBurst == 0 {
		return 0
	}
	return x.CBurst
}

// overrideRates are a user or tier override's rates on an interface with
// direction d: as set, except for an override for both directions on an
// upload (ingress) interface, which UploadScale scales by tier t's
// upload/download ratio; note then says so for the reason.
func overrideRates(o Override, t *config.Tier, d config.Direction) (rate, ceil tbf.Rate, note string) {
	rate, ceil = o.Rates()
	if o.Direction != DirBoth || d != config.Ingress {
		return rate, ceil, ""
	}
	r, c, scaled := UploadScale(rate, ceil, t)
	if !scaled {
		return rate, ceil, ""
	}
	return r, c, fmt.Sprintf(" (upload: %s/%s scaled by tier %s's upload/download ratio)", rate, ceil, t.Name)
}

// userRates applies a user's own rate ur and ceil uc (0: not set) to the
// tier's (scheduled) rate and ceil: a rate without a ceil keeps the larger
// of it and the tier's ceil; a ceil without a rate lowers the tier's rate to
// it when needed.
func userRates(rate, ceil, ur, uc tbf.Rate) (tbf.Rate, tbf.Rate) {
	switch {
	case ur != 0 && uc != 0:
		return ur, max(uc, ur)
	case ur != 0:
		return ur, max(ceil, ur)
	default:
		return min(rate, uc), uc
	}
}

// UpdateUser re-evaluates one user in r at now, in place, on every HTB
// interface (the entries of Targets.Users and Users): the same values
// Evaluate(plan, ov, usage, now) gives that user. r must come from
// Evaluate of the same plan. It reports whether r has the user; it also
// reports false, changing nothing, when the user is on an interface whose
// guarantees are oversubscribed before or after the change (the scaled
// rates of the others change then too: evaluate everything). The rest
// of r is left as it was (its At too): it serves the daemon's single-user
// changes (set-rate/clear of a user) without evaluating every user.
func (r *Result) UpdateUser(plan *config.Plan, ov Overrides, usage *Usage, now time.Time, user string) bool {
	e := evaluator{plan: plan, ov: &ov, usage: usage, now: now, loc: plan.Policy.Location}
	if e.loc == nil {
		e.loc = time.Local
	}
	ui := indexLastFirst(plan.Users, func(u *config.User) bool { return u.Name == user })
	if ui < 0 {
		return false
	}
	u := &plan.Users[ui]
	// Each HTB interface's entry of the user changes alone unless that
	// moves a parent's oversubscription scale (then every child changes:
	// false, and r is restored as it was).
	type saved struct {
		ir   *InterfaceResult
		j    int
		ut   model.UserTarget
		x    Explanation
		over []Oversubscription
	}
	var changes []saved
	undo := func() {
		for k := len(changes) - 1; k >= 0; k-- {
			c := changes[k]
			c.ir.Targets.Users[c.j], c.ir.Users[c.j], c.ir.Oversubscriptions = c.ut, c.x, c.over
			c.ir.invalidateSums()
		}
	}
	for i := range r.Interfaces {
		ir := &r.Interfaces[i]
		if i >= len(plan.Interfaces) || plan.Interfaces[i].Shaper == config.ShaperTBF {
			continue
		}
		// A user has one entry per interface; the newest is the last (a
		// run-time user just added), so look there first.
		j := ir.userAt(user)
		if j < 0 || j >= len(ir.Users) {
			continue
		}
		x := e.user(u, &plan.Interfaces[i])
		ut := ir.Targets.Users[j]
		if t, ok := plan.Tier(u.Tier); ok {
			t = config.TierFor(t, u)
			ut.Burst, ut.CBurst = targetBursts(t, &x), targetCBurst(t, &x)
		}
		ut.Rate, ut.Ceil = x.Rate, x.Ceil
		capUser(&ut, &x, plan.Interfaces[i].Bandwidth)
		if ut.Node != "" {
			if c := nodeCeil(ir, ut.Node); c != 0 && capUserTo(&ut, &x, c, "node "+ut.Node+"'s ceil") {
				x.CappedBy = ut.Node
			}
		}
		changes = append(changes, saved{ir, j, ir.Targets.Users[j], ir.Users[j], slices.Clone(ir.Oversubscriptions)})
		if !updateOversubscribed(ir, j, ut, x) {
			undo()
			return false
		}
	}
	return len(changes) > 0
}

// indexLastFirst is the index of the first element of s that match
// accepts, looking at the last element first (where AddUser puts a new
// user); -1 when none does.
func indexLastFirst[T any](s []T, match func(*T) bool) int {
	if n := len(s); n > 0 && match(&s[n-1]) {
		return n - 1
	}
	for i := range s {
		if match(&s[i]) {
			return i
		}
	}
	return -1
}
