package policy

import (
	"errors"
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Check builds every interface of a valid plan offline at every outcome
// the configuration alone can produce, and returns each problem at the
// position of the key that causes it (nil when every outcome builds).
//
// The outcomes are: every tier at its base rates and at each of its
// schedules, each with and without every quota exceeded. A user's class
// depends only on its own tier's outcome, so evaluating all tiers at their
// k-th schedule (or their base rates when they have fewer) covers every
// (tier, schedule) pair in len(longest schedule list)+1 evaluations per
// quota state. Users of one tier without rates of their own get the same
// classes, so one of them stands for all at each outcome; every user's
// prefixes and class id are built once, at the base outcome. Overrides
// are not part of the configuration: they are checked when they are set
// (CheckOverrideBuild).
//
// Problems found:
//   - a tier's burst (cburst) that does not fit an outcome's rate (ceil):
//     the kernel keeps the bucket as u32 ticks of transmission, so at most
//     tbf.MaxBurst(rate) bytes (about 274 bytes at 8bit, 34 MB at 1mbit);
//   - more users than an HTB interface has class ids (model.MaxUsers);
//   - every error model.Build returns (a TBF interface's burst, latency,
//     limit, peak rate or mtu the kernel cannot hold, ...), at the key
//     named by model.FieldError, else at the interface.
//
// A ceil (tier, schedule, user, default class, tier aggregate) above an
// HTB interface's bandwidth is not a problem: one plan may serve links of
// different sizes, so it is capped to the bandwidth (see Cap), and a
// guaranteed rate above it is scaled with the others (see
// Oversubscription). CheckWithNotes reports those as notes.
//
// The classifier's limits (prefix lengths, nodes per bucket) are the
// kernel package's; the daemon's check adds them.
func Check(plan *config.Plan) []config.Error {
	errs, _ := CheckWithNotes(plan)
	return errs
}

// CheckWithNotes is Check that also returns notes: information about a
// plan that builds, each at the position of the key it concerns, sorted
// like errors. A note says that a ceil above an HTB interface's bandwidth
// is capped to it ("ceil 100mbit is above the bandwidth 50mbit of
// interface r0 (egress): capped to 50mbit"), or that a guaranteed rate
// above it is scaled to fit with the others.
func CheckWithNotes(plan *config.Plan) (errs, notes []config.Error) {
	c := &checker{plan: plan, seen: map[string]bool{}}
	c.reduce()
	maxSched := 0
	for i := range plan.Tiers {
		maxSched = max(maxSched, len(plan.Tiers[i].Schedules))
	}
	htb := false
	for i := range plan.Interfaces {
		in := &plan.Interfaces[i]
		key := fmt.Sprintf("interface[%d]", i)
		if in.Shaper == config.ShaperTBF {
			c.iface(key, in, &outcome{sched: -1})
			continue
		}
		htb = true
		if in.DefaultRate != 0 && in.DefaultCeil > in.Bandwidth {
			c.note(c.pick(key+".default_ceil", key+".default_rate"), "default class: ceil %s is above the bandwidth %s of interface %s (%s): capped to %s",
				in.DefaultCeil, in.Bandwidth, in.Name, in.Direction, in.Bandwidth)
		}
		for s := -1; s < maxSched; s++ {
			for _, oq := range []bool{false, true} {
				c.iface(key, in, &outcome{sched: s, overQuota: oq})
			}
		}
		c.buildAll(key, in)
	}
	queues := MaxUsers(plan) / model.MaxUsers
	switch {
	case htb && queues == 1 && len(plan.Users) > model.MaxUsers:
		c.add(fmt.Sprintf("user[%d].name", model.MaxUsers),
			"%d users: an HTB interface holds at most %d user classes (class ids 1:%x..1:%x); this is the first user beyond them",
			len(plan.Users), model.MaxUsers, model.FirstUserMinor, model.LastUserMinor)
	case htb && len(plan.Users) > queues*model.MaxUsers:
		c.add(fmt.Sprintf("user[%d].name", queues*model.MaxUsers),
			"%d users: an HTB interface with queues = %d holds at most %d user classes (%d per queue's tree); this is the first user beyond them",
			len(plan.Users), queues, queues*model.MaxUsers, model.MaxUsers)
	}
	plan.SortErrors(c.errs)
	plan.SortErrors(c.notes)
	return c.errs, c.notes
}

// MaxUsers is how many users plan's HTB interfaces can all hold: one
// tree's user class ids (model.MaxUsers) times the fewest trees of an
// interface (queues; "auto" counts as model.MaxQueues: the device
// decides, and Build refuses what does not fit). No HTB interface: as
// many as one tree holds.
func MaxUsers(plan *config.Plan) int {
	trees := 0
	for i := range plan.Interfaces {
		in := &plan.Interfaces[i]
		if in.Shaper == config.ShaperTBF {
			continue
		}
		t := max(in.Queues, 1)
		if in.Queues == config.QueuesAuto {
			t = model.MaxQueues
		}
		if trees == 0 || t < trees {
			trees = t
		}
	}
	return max(trees, 1) * model.MaxUsers
}

type checker struct {
	plan  *config.Plan
	errs  []config.Error
	notes []config.Error
	seen  map[string]bool
	// reduced is plan with one user per tier among those without rates
	// of their own (the others get exactly their tier's classes), and
	// every user with own rates; index maps its users to plan.Users.
	reduced *config.Plan
	index   []int
	// failed marks interfaces (by key) with a problem reported.
	failed map[string]bool
}

// reduce makes c.reduced: evaluating 65,000 users of a few tiers at every
// outcome would cost seconds at every start and reload for nothing.
func (c *checker) reduce() {
	r := *c.plan
	r.Users = nil
	seen := map[string]bool{}
	for i, u := range c.plan.Users {
		if u.Rate == 0 && u.Ceil == 0 && u.UploadRate == 0 && u.UploadCeil == 0 && !u.OwnTierSettings() {
			if seen[u.Tier] {
				continue
			}
			seen[u.Tier] = true
		}
		r.Users = append(r.Users, u)
		c.index = append(c.index, i)
	}
	c.reduced = &r
	c.failed = map[string]bool{}
}

// buildAll builds the interface with every user (their prefixes, class
// ids) at the base outcome, unless a problem was reported for it.
func (c *checker) buildAll(key string, in *config.Interface) {
	if c.failed[key] {
		return
	}
	loc := c.plan.Policy.Location
	if loc == nil {
		loc = time.UTC
	}
	e := evaluator{plan: c.plan, ov: &Overrides{}, now: time.Unix(0, 0).In(loc), loc: loc, force: &outcome{sched: -1}}
	c.build(key, e.iface(in).Targets)
}

// build reports Build's error for targets of the interface at key.
func (c *checker) build(key string, tg model.Targets) {
	if _, err := model.Build(tg, nil); err != nil {
		var fe *model.FieldError
		k := key + ".name"
		if errors.As(err, &fe) {
			k = c.pick(key+"."+fe.Field, key+".bandwidth")
		} else if errors.Is(err, model.ErrTooManyUsers) {
			return // reported once for the users file
		}
		c.add(k, "%v", err)
		c.failed[key] = true
	}
}

// add reports a problem at path once (the same path and message from
// another outcome or interface is left out).
func (c *checker) add(path, format string, args ...any) {
	e := c.plan.Errorf(path, format, args...)
	k := path + "\x00" + e.Msg
	if c.seen[k] {
		return
	}
	c.seen[k] = true
	c.errs = append(c.errs, e)
}

// note reports information at path once, as add does for problems.
func (c *checker) note(path, format string, args ...any) {
	e := c.plan.Errorf(path, format, args...)
	k := "note\x00" + path + "\x00" + e.Msg
	if c.seen[k] {
		return
	}
	c.seen[k] = true
	c.notes = append(c.notes, e)
}

// pick returns the first of paths that is written, else the last.
func (c *checker) pick(paths ...string) string {
	for _, p := range paths {
		if c.plan.Has(p) {
			return p
		}
	}
	return paths[len(paths)-1]
}

// iface checks interface in (key "interface[i]") at one outcome.
func (c *checker) iface(key string, in *config.Interface, o *outcome) {
	loc := c.plan.Policy.Location
	if loc == nil {
		loc = time.UTC
	}
	e := evaluator{plan: c.reduced, ov: &Overrides{}, now: time.Unix(0, 0).In(loc), loc: loc, force: o}
	r := e.iface(in)
	bad := false
	bw := in.Bandwidth
	where := fmt.Sprintf("of interface %s (%s)", in.Name, in.Direction)
	scaled := ": guaranteed rates are scaled to fit it"
	if d := r.Default; d != nil && d.Source != SourceConfig {
		t, _ := c.plan.Tier(d.Tier)
		if t != nil && d.Unscaled() > bw {
			c.note(c.rateKey(t, -1, d.Source, o.sched, "rate", in.Direction), "default class (default_tier %s): rate %s is above the bandwidth %s %s%s", t.Name, d.Unscaled(), bw, where, scaled)
		}
		if t != nil && d.CeilCapped {
			c.note(c.rateKey(t, -1, d.Source, o.sched, "ceil", in.Direction), "default class (default_tier %s): ceil %s is above the bandwidth %s %s: capped to %s", t.Name, d.UncappedCeil, bw, where, d.Ceil)
		}
	}
	for i := range r.Users {
		x := &r.Users[i]
		t, ok := c.plan.Tier(x.Tier)
		if !ok {
			continue
		}
		if x.Unscaled() > bw {
			c.note(c.rateKey(t, c.index[i], x.Source, o.sched, "rate", in.Direction), "rate %s is above the bandwidth %s %s%s", x.Unscaled(), bw, where, scaled)
		}
		if x.CeilCapped {
			c.note(c.rateKey(t, c.index[i], x.Source, o.sched, "ceil", in.Direction), "ceil %s is above the bandwidth %s %s: capped to %s", x.UncappedCeil, bw, where, x.Ceil)
		}
		if !x.BurstCut {
			continue
		}
		bad = true
		i := c.index[i]
		u := &c.plan.Users[i]
		ut := config.TierFor(t, u)
		if ut.Burst > tbf.MaxBurst(x.Rate) {
			whose, key := "tier "+t.Name+"'s", c.rateKey(t, i, x.Source, o.sched, "rate", in.Direction)
			if u.Burst != 0 {
				whose, key = "user "+u.Name+"'s", config.Path("user", i, "burst")
			}
			c.add(key,
				"%s burst %s does not fit rate %s (%s): the kernel holds at most %s at this rate; raise the rate or lower the burst",
				whose, ut.Burst, x.Rate, outcomeName(x), tbf.MaxBurst(x.Rate))
		}
		if ut.CBurst > tbf.MaxBurst(x.Ceil) {
			whose, key := "tier "+t.Name+"'s", c.rateKey(t, i, x.Source, o.sched, "ceil", in.Direction)
			if u.CBurst != 0 {
				whose, key = "user "+u.Name+"'s", config.Path("user", i, "cburst")
			}
			c.add(key,
				"%s cburst %s does not fit ceil %s (%s): the kernel holds at most %s at this ceil; raise the ceil or lower the cburst",
				whose, ut.CBurst, x.Ceil, outcomeName(x), tbf.MaxBurst(x.Ceil))
		}
	}
	for _, tt := range r.Targets.Tiers {
		t, _ := c.plan.Tier(tt.Name)
		p := "tiers." + tt.Name + "."
		if in.Direction == config.Ingress {
			p += "upload_"
		}
		if ar := aggregateRate(t, in.Direction); ar > bw {
			c.note(c.pick(p+"aggregate_rate", "tiers."+tt.Name+".aggregate_rate"), "aggregate rate %s is above the bandwidth %s %s%s", ar, bw, where, scaled)
		}
	}
	for _, cp := range r.Caps() {
		if cp.Kind != "tier" {
			continue
		}
		p := "tiers." + cp.Tier + "."
		if in.Direction == config.Ingress {
			p += "upload_"
		}
		c.note(c.pick(p+"aggregate_ceil", "tiers."+cp.Tier+".aggregate_ceil", p+"aggregate_rate", "tiers."+cp.Tier+".aggregate_rate"),
			"aggregate ceil %s is above the bandwidth %s %s: capped to %s", cp.Ceil, bw, where, cp.Bandwidth)
	}
	if bad {
		c.failed[key] = true
		return // Build would only repeat a problem reported above
	}
	// Every distinct class of this outcome (prefixes and class ids are
	// built once, by buildAll).
	tg := r.Targets
	tg.Users = distinctClasses(tg.Users)
	c.build(key, tg)
}

// outcomeName says which rule gave a user its rates, for messages.
func outcomeName(x *Explanation) string {
	if x.Source == SourceTier {
		return "the tier's own rates"
	}
	r := x.Reason
	for i := 0; i+2 <= len(r); i++ {
		if r[i] == ';' { // cut the burst note BurstCut added
			return r[:i]
		}
	}
	return r
}

// rateKey is the key that gave a class its rate or ceil (field "rate" or
// "ceil") for a rule src of tier t at schedule sched, for user index u
// (-1: the default class) in direction d.
func (c *checker) rateKey(t *config.Tier, u int, src Source, sched int, field string, d config.Direction) string {
	up := ""
	if d == config.Ingress {
		up = "upload_"
	}
	tk := "tiers." + t.Name + "."
	tierKeys := []string{tk + up + field, tk + field, tk + up + "rate", tk + "rate"}
	switch src {
	case SourceSchedule:
		sk := fmt.Sprintf("%sschedule[%d].", tk, sched)
		return c.pick(sk+up+field, sk+field, sk+up+"rate", sk+"rate")
	case SourceUser:
		uk := fmt.Sprintf("user[%d].", u)
		return c.pick(append([]string{uk + up + field, uk + up + "rate", uk + up + "ceil"}, tierKeys...)...)
	case SourceQuota:
		if u >= 0 {
			uk := fmt.Sprintf("user[%d].", u)
			return c.pick(uk+"over_quota_"+field, uk+"over_quota_rate", tk+"over_quota_"+field, tk+"over_quota_rate")
		}
		return c.pick(tk+"over_quota_"+field, tk+"over_quota_rate")
	}
	return c.pick(tierKeys...)
}

// CheckOverrideBuild is CheckOverride followed by building what o changes:
// with o added to ov, every class o affects (the user's on every HTB
// interface, the tier's users and the default class of a default_tier, or
// the interface's root, default class and TBF) must build at now, or o is
// refused with the error, which names the interface, the user or tier and
// the reason. The daemon calls it before it accepts and saves an override,
// so an accepted override never stops an interface. (A user's configured
// burst that does not fit the override's rate is cut to fit and the
// user's explanation says so; see Explanation.BurstCut.)
func CheckOverrideBuild(plan *config.Plan, ov Overrides, o Override, now time.Time) error {
	if err := CheckOverride(plan, o); err != nil {
		return err
	}
	ov = ov.Clone()
	if err := ov.Set(o); err != nil {
		return err
	}
	// Only the users o affects are evaluated (one per distinct shape: a
	// set-rate on a plan of 65,000 users stays cheap).
	affected := *plan
	affected.Users = nil
	type shapeKey struct {
		tier                               string
		rate, ceil, uploadRate, uploadCeil tbf.Rate
	}
	shapes := map[shapeKey]bool{}
	for _, u := range plan.Users {
		switch {
		case o.Target.Kind == TargetUser && u.Name == o.Target.Name,
			o.Target.Kind == TargetTier && u.Tier == o.Target.Name:
			shape := shapeKey{u.Tier, u.Rate, u.Ceil, u.UploadRate, u.UploadCeil}
			if o.Target.Kind == TargetTier && shapes[shape] {
				continue
			}
			shapes[shape] = true
			affected.Users = append(affected.Users, u)
		}
	}
	res := Evaluate(&affected, ov, nil, now)
	for i := range res.Interfaces {
		in := &plan.Interfaces[i]
		t := res.Interfaces[i].Targets
		t.Tiers = nil
		if o.Target.Kind == TargetIface && !ifaceMatches(o.Target.Name, in) {
			continue
		}
		if _, err := model.Build(t, nil); err != nil {
			return fmt.Errorf("override of %s cannot be built: %w", o.Target, err)
		}
	}
	return nil
}

// Outcomes calls fn with plan evaluated, without overrides, at every
// outcome Check builds: each tier at its base rates and at each of its
// schedules (all tiers at their k-th together), with and without every
// quota exceeded. Results for a TBF interface are the same at every
// outcome. It serves tests and tools that want to build or apply them.
func Outcomes(plan *config.Plan, fn func(*Result)) {
	maxSched := 0
	for i := range plan.Tiers {
		maxSched = max(maxSched, len(plan.Tiers[i].Schedules))
	}
	loc := plan.Policy.Location
	if loc == nil {
		loc = time.UTC
	}
	now := time.Unix(0, 0).In(loc)
	for s := -1; s < maxSched; s++ {
		for _, oq := range []bool{false, true} {
			e := evaluator{plan: plan, ov: &Overrides{}, now: now, loc: loc, force: &outcome{sched: s, overQuota: oq}}
			res := &Result{At: now}
			for i := range plan.Interfaces {
				res.Interfaces = append(res.Interfaces, e.iface(&plan.Interfaces[i]))
			}
			fn(res)
		}
	}
}

// distinctClasses returns one user (without prefixes) per distinct set of
// class parameters in us, in order.
func distinctClasses(us []model.UserTarget) []model.UserTarget {
	type params struct {
		tier          string
		rate, ceil    tbf.Rate
		burst, cburst tbf.Size
		prio          uint32
	}
	seen := map[params]bool{}
	var out []model.UserTarget
	for _, u := range us {
		k := params{u.Tier, u.Rate, u.Ceil, u.Burst, u.CBurst, u.Prio}
		if seen[k] {
			continue
		}
		seen[k] = true
		u.Prefixes = nil
		out = append(out, u)
	}
	return out
}

// aggregateRate is t's configured aggregate rate for direction d (before
// any oversubscription scaling); 0 for a nil t.
func aggregateRate(t *config.Tier, d config.Direction) tbf.Rate {
	if t == nil {
		return 0
	}
	r, _ := t.AggregateRates(d)
	return r
}
