package policy

import (
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Source is the rule that decided a class's rates; see the precedence in
// the package documentation.
type Source string

// Sources, strongest first.
const (
	SourceUserOverride  Source = "user-override"  // set-rate USER
	SourceTierOverride  Source = "tier-override"  // set-rate tier:NAME
	SourceIfaceOverride Source = "iface-override" // set-rate iface:NAME (interface bandwidth)
	SourceQuota         Source = "quota"          // over quota: over_quota_rate/ceil
	SourceUser          Source = "user"           // the user's own rates in users.toml
	SourceSchedule      Source = "schedule"       // a tier schedule window
	SourceTier          Source = "tier"           // the tier's rates
	SourceConfig        Source = "config"         // interface bandwidth, default_rate/default_ceil
)

// QuotaState is a user's data quota at the time of evaluation: Used of
// Limit bytes in the period [PeriodStart, PeriodEnd); Exceeded when Used >=
// Limit.
type QuotaState struct {
	Used, Limit            uint64
	PeriodStart, PeriodEnd time.Time
	Exceeded               bool
}

// Explanation says what one class has and why. For a user class User and
// Tier are set; for the default class User is "" and Tier is the
// default_tier (or ""); for the interface itself (InterfaceResult.Link)
// both are "" and Rate = Ceil is the bandwidth.
type Explanation struct {
	User, Tier string
	// Node is the node a node class's explanation is for (Result's
	// InterfaceResult.Nodes); "" otherwise.
	Node string
	// Interface is the configured interface name; Direction its direction.
	Interface string
	Direction model.Direction
	// Rate and Ceil are in force (before any ramp); Burst and CBurst are the
	// effective bucket sizes in bytes (configured, else
	// tbf.RecommendedBurst of Rate and Ceil).
	Rate, Ceil    tbf.Rate
	Burst, CBurst tbf.Size
	// BurstCut says that the configured burst (or cburst) was larger than
	// the kernel can hold at Rate (Ceil) and was cut to tbf.MaxBurst of it,
	// so that the class still builds; Reason says so. A configuration check
	// refuses every configured combination that needs a cut: only run-time
	// overrides get one.
	BurstCut bool
	// ConfiguredRate and ConfiguredCeil are the tier's (or the user's own)
	// rates without schedules, quota or overrides, for status.
	ConfiguredRate, ConfiguredCeil tbf.Rate
	// Oversubscribed is set when the guaranteed rates under the class's
	// parent add up to more than the parent, so Rate was scaled down from
	// Guaranteed (see Oversubscription); Reason then ends in
	// "; oversubscribed xF".
	Oversubscribed bool
	Guaranteed     tbf.Rate
	// CeilCapped is set when the ceil the rules gave was above the
	// interface's configured bandwidth, so Ceil was capped to it from
	// UncappedCeil (see Cap); Reason then ends in "; ceil 100mbit capped
	// to the bandwidth 50mbit".
	CeilCapped   bool
	UncappedCeil tbf.Rate
	// CappedBy is the node whose ceil capped Ceil last ("": the
	// interface's bandwidth).
	CappedBy string
	// Source is the rule that decided Rate/Ceil, Reason the same for people:
	// "tier gold", "schedule gold#0 mon,tue,wed,thu,fri 19:00-23:00",
	// "user config", "quota exceeded", "override until 12:00", "tier
	// override (gold)", "bandwidth", "default_rate".
	Source Source
	Reason string
	// OverrideUntil is when the deciding override expires; zero when
	// Source is not an override or it does not expire.
	OverrideUntil time.Time
	// Ramp is the deciding override's ramp (nil: the policy's default).
	Ramp *time.Duration
	// Quota is set for users of a tier with a quota (also when it is not
	// exceeded or an override decides).
	Quota *QuotaState
}

// overrideReason describes an override for people, its expiry in loc.
func overrideReason(what string, o Override, now time.Time, loc *time.Location) string {
	if o.Direction != DirBoth {
		what += " " + string(o.Direction)
	}
	if o.Until.IsZero() {
		return what
	}
	u := o.Until.In(loc)
	n := now.In(loc)
	layout := "15:04"
	if u.Format(time.DateOnly) != n.Format(time.DateOnly) {
		layout = "2006-01-02 15:04"
	}
	if u.Second() != 0 {
		layout += ":05"
	}
	return fmt.Sprintf("%s until %s", what, u.Format(layout))
}
