package daemon

import (
	"fmt"
	"strings"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
)

// Policy events: each is one INFO log line ("policy event", with kind,
// the user or target, the old and new rates and the reason) and one count
// of shaperd_policy_events_total{kind}.
//
// Quota events are per user. Schedule events are per tier (one line when a
// tier's window opens or closes, naming how many users it has, not one per
// user: a campus tier has thousands). Override events are per override.
const (
	EventQuotaExceeded   = "quota_exceeded"
	EventQuotaRestored   = "quota_restored"
	EventScheduleEntered = "schedule_entered"
	EventScheduleLeft    = "schedule_left"
	EventOverrideSet     = "override_set"
	EventOverrideExpired = "override_expired"
	EventOverrideCleared = "override_cleared"
)

// eventKinds lists every kind, so that each counter exists from the start.
var eventKinds = []string{EventQuotaExceeded, EventQuotaRestored, EventScheduleEntered, EventScheduleLeft,
	EventOverrideSet, EventOverrideExpired, EventOverrideCleared}

// event logs and counts one policy event.
func (d *Daemon) event(kind string, attrs ...any) {
	d.stats.policyEvents.WithLabelValues(kind).Inc()
	d.log.Info("policy event", append([]any{"kind", kind}, attrs...)...)
}

// policyEvents reports the quota and schedule transitions between the
// previous evaluation prev (nil: none, nothing to report) and res.
func (d *Daemon) policyEvents(prev, res *policy.Result) {
	if prev == nil || res == nil {
		return
	}
	// Quota: a user is over quota or not (the same on every interface).
	before := map[string]bool{}
	for i := range prev.Interfaces {
		for _, x := range prev.Interfaces[i].Users {
			if x.Quota != nil {
				before[x.User] = x.Quota.Exceeded
			}
		}
	}
	done := map[string]bool{}
	for i := range res.Interfaces {
		for _, x := range res.Interfaces[i].Users {
			was, known := before[x.User]
			if x.Quota == nil || !known || was == x.Quota.Exceeded || done[x.User] {
				continue
			}
			done[x.User] = true
			kind, reason := EventQuotaRestored, "quota usage below the limit (new period or reset): "+explainNow(res, x.User)
			if x.Quota.Exceeded {
				kind, reason = EventQuotaExceeded, "quota exceeded"
			}
			d.event(kind, "user", x.User, "tier", x.Tier, "old", ratesText(prev.User(x.User)), "new", ratesText(res.User(x.User)),
				"reason", reason, "used_bytes", x.Quota.Used, "limit_bytes", x.Quota.Limit)
		}
	}
	// Schedules: a tier's active window changed.
	loc := d.plan.Policy.Location
	for i := range d.plan.Tiers {
		t := &d.plan.Tiers[i]
		if len(t.Schedules) == 0 {
			continue
		}
		a, b := policy.ActiveSchedule(t, prev.At, loc), policy.ActiveSchedule(t, res.At, loc)
		if a == b {
			continue
		}
		users := 0
		for _, u := range d.plan.Users {
			if u.Tier == t.Name {
				users++
			}
		}
		old, nw := d.tierRatesText(t, prev), d.tierRatesText(t, res)
		if a >= 0 {
			_, _, why := policy.TierRatesAt(t, config.Egress, prev.At, loc)
			d.event(EventScheduleLeft, "tier", t.Name, "users", users, "old", old, "new", nw, "reason", "left "+why)
		}
		if b >= 0 {
			_, _, why := policy.TierRatesAt(t, config.Egress, res.At, loc)
			d.event(EventScheduleEntered, "tier", t.Name, "users", users, "old", old, "new", nw, "reason", "entered "+why)
		}
	}
}

// explainNow is the reason of user's first explanation in res.
func explainNow(res *policy.Result, user string) string {
	if xs := res.User(user); len(xs) > 0 {
		return xs[0].Reason
	}
	return ""
}

// tierRatesText is tier t's rates at res.At on every HTB direction the
// plan shapes: "download 50mbit/60mbit, upload 10mbit/20mbit".
func (d *Daemon) tierRatesText(t *config.Tier, res *policy.Result) string {
	var parts []string
	seen := map[config.Direction]bool{}
	for _, in := range d.plan.Interfaces {
		if in.Shaper != config.ShaperHTB || seen[in.Direction] {
			continue
		}
		seen[in.Direction] = true
		r, c, _ := policy.TierRatesAt(t, in.Direction, res.At, d.plan.Policy.Location)
		parts = append(parts, fmt.Sprintf("%s %s/%s", policy.DirectionOf(in.Direction), r, c))
	}
	return strings.Join(parts, ", ")
}

// ratesText is a user's rates on each interface: "lan0 download
// 50mbit/100mbit, lan0 upload 10mbit/20mbit"; "-" when none.
func ratesText(xs []policy.Explanation) string {
	if len(xs) == 0 {
		return "-"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%s %s %s/%s", x.Interface, policy.DirectionOf(config.Direction(x.Direction)), x.Rate, x.Ceil)
	}
	return strings.Join(parts, ", ")
}

// targetRates is what target t has in res, for override events: a user's
// rates, a tier's (those of its first user, else of the default class it
// sets), an interface's bandwidth.
func (d *Daemon) targetRates(res *policy.Result, t policy.Target) string {
	if res == nil {
		return "-"
	}
	switch t.Kind {
	case policy.TargetUser:
		return ratesText(res.User(t.Name))
	case policy.TargetTier:
		for _, u := range d.plan.Users {
			if u.Tier == t.Name {
				return ratesText(res.User(u.Name))
			}
		}
		var xs []policy.Explanation
		for i := range res.Interfaces {
			if x := res.Interfaces[i].Default; x != nil && x.Tier == t.Name {
				xs = append(xs, *x)
			}
		}
		return ratesText(xs)
	default:
		var parts []string
		for i := range res.Interfaces {
			l := res.Interfaces[i].Link
			if i < len(d.plan.Interfaces) {
				in := &d.plan.Interfaces[i]
				if in.Name != t.Name && in.IFB != t.Name {
					continue
				}
			}
			parts = append(parts, fmt.Sprintf("%s %s %s", l.Interface, policy.DirectionOf(config.Direction(l.Direction)), l.Rate))
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, ", ")
	}
}
