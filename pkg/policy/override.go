package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// TargetKind is what an override applies to.
type TargetKind string

// Target kinds, as `shaperctl set-rate TARGET` spells them: "alice",
// "tier:gold", "iface:lan0".
const (
	TargetUser  TargetKind = "user"
	TargetTier  TargetKind = "tier"
	TargetIface TargetKind = "iface"
	TargetNode  TargetKind = "node"
)

// Target names a user, a tier (every user of it) or an interface (its
// total bandwidth).
type Target struct {
	Kind TargetKind
	Name string
}

// ParseTarget reads "NAME" (a user), "tier:NAME" or "iface:NAME". The name
// must not be empty; it is not checked against a plan (see CheckOverride).
func ParseTarget(s string) (Target, error) {
	t := Target{Kind: TargetUser, Name: s}
	if k, n, ok := strings.Cut(s, ":"); ok {
		switch TargetKind(k) {
		case TargetTier, TargetIface, TargetNode:
			t = Target{Kind: TargetKind(k), Name: n}
		default:
			return Target{}, fmt.Errorf("target %q: unknown kind %q: use a user name, tier:NAME, node:NAME or iface:NAME", s, k)
		}
	}
	if t.Name == "" {
		return Target{}, fmt.Errorf("target %q: empty name", s)
	}
	return t, nil
}

// String formats the target as ParseTarget reads it.
func (t Target) String() string {
	if t.Kind == TargetUser || t.Kind == "" {
		return t.Name
	}
	return string(t.Kind) + ":" + t.Name
}

// MarshalText implements encoding.TextMarshaler.
func (t Target) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseTarget.
func (t *Target) UnmarshalText(b []byte) error {
	v, err := ParseTarget(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Override is an operator's `set-rate`: Rate guaranteed, Ceil the most the
// target may borrow up to (0 means Rate), from Set until Until (zero: until
// cleared). Ramp is how long the change to it (and only to it) takes: nil
// means the policy's default ramp, 0 at once. For an iface target Rate is the
// interface's bandwidth and Ceil must be 0 or equal to Rate.
//
// Direction limits it to downloads or uploads; DirBoth (the zero value, and
// what a state file written before directions existed holds) applies to
// both, with UploadScale's rule for users and tiers. SetBy is the uid of
// the caller who set it (from the control socket's SO_PEERCRED; nil when
// unknown, e.g. set before this was recorded).
type Override struct {
	Target    Target         `json:"target"`
	Direction Direction      `json:"direction,omitempty"`
	Rate      tbf.Rate       `json:"rate"`
	Ceil      tbf.Rate       `json:"ceil,omitempty"`
	Ramp      *time.Duration `json:"ramp_ns,omitempty"`
	Set       time.Time      `json:"set"`
	Until     time.Time      `json:"until,omitzero"`
	SetBy     *uint32        `json:"set_by_uid,omitempty"`
}

// Key is what identifies an override in Overrides: its target and direction.
type Key struct {
	Target    Target
	Direction Direction
}

// Key returns the override's key.
func (o Override) Key() Key { return Key{o.Target, o.Direction} }

// String is the target, with "/download" or "/upload" for a directed one.
func (k Key) String() string {
	if k.Direction == DirBoth {
		return k.Target.String()
	}
	return k.Target.String() + "/" + string(k.Direction)
}

// Rates returns the override's rate and ceil, with Ceil 0 read as Rate.
func (o Override) Rates() (rate, ceil tbf.Rate) {
	return o.Rate, max(o.Ceil, o.Rate)
}

// ActiveAt reports whether the override is in force at now: not expired
// (now before Until, when Until is set).
func (o Override) ActiveAt(now time.Time) bool {
	return o.Until.IsZero() || now.Before(o.Until)
}

// Validate checks the override on its own: a known kind, a rate of at least
// config.MinRate, a ceil not below it (and equal to it for an interface),
// a ramp that is not negative.
func (o Override) Validate() error {
	switch {
	case o.Target.Kind != TargetUser && o.Target.Kind != TargetTier && o.Target.Kind != TargetIface && o.Target.Kind != TargetNode:
		return fmt.Errorf("override of %q: unknown target kind %q", o.Target.Name, o.Target.Kind)
	case o.Target.Name == "":
		return fmt.Errorf("override: empty target name")
	case o.Rate < config.MinRate:
		return fmt.Errorf("override of %s: rate %s is below %s", o.Target, o.Rate, config.MinRate)
	case o.Ceil != 0 && o.Ceil < o.Rate:
		return fmt.Errorf("override of %s: ceil %s is below rate %s", o.Target, o.Ceil, o.Rate)
	case o.Target.Kind == TargetIface && o.Ceil != 0 && o.Ceil != o.Rate:
		return fmt.Errorf("override of %s: an interface has one bandwidth; ceil %s must equal rate %s", o.Target, o.Ceil, o.Rate)
	case o.Ramp != nil && *o.Ramp < 0:
		return fmt.Errorf("override of %s: negative ramp %s", o.Target, *o.Ramp)
	case o.Direction != DirBoth && o.Direction != DirDownload && o.Direction != DirUpload:
		return fmt.Errorf("override of %s: unknown direction %q: use download or upload", o.Target, o.Direction)
	}
	return nil
}

// Bounds of a run-time override's durations (set-rate --ramp and --for).
// A ramp longer than a day is no smooth change but a schedule, and an
// override for longer than a year is a plan change: both are far more
// likely a typo (876000h) than meant.
const (
	// MaxRamp is the longest ramp an override may ask for.
	MaxRamp = 24 * time.Hour
	// MaxOverrideFor is the longest an override may be set for.
	MaxOverrideFor = 365 * 24 * time.Hour
)

// CheckDurations checks an override's requested ramp and duration (nil:
// not given): a ramp from 0 to MaxRamp, a duration above 0 and at most
// MaxOverrideFor. The error names the flag and the bound.
func CheckDurations(ramp, dur *time.Duration) error {
	if ramp != nil && (*ramp < 0 || *ramp > MaxRamp) {
		return fmt.Errorf("--ramp %s: must be from 0s (at once) to %s", *ramp, fmtBound(MaxRamp))
	}
	if dur != nil && (*dur <= 0 || *dur > MaxOverrideFor) {
		return fmt.Errorf("--for %s: must be above 0 and at most %s (omit it to keep the override until cleared)", *dur, fmtBound(MaxOverrideFor))
	}
	return nil
}

// fmtBound writes a bound in hours ("24h"), with the days from two days up.
func fmtBound(d time.Duration) string {
	s := strings.TrimSuffix(d.String(), "0m0s")
	if d < 48*time.Hour {
		return s
	}
	return fmt.Sprintf("%s (%d days)", s, d/(24*time.Hour))
}

// ErrUnknownTarget is returned (wrapped) by CheckOverride for a target the
// plan does not have.
var ErrUnknownTarget = errors.New("unknown target")

// CheckOverride validates o against plan: the user, tier or interface must
// exist (ErrUnknownTarget otherwise; for a directed interface override an
// interface of that name and direction), and an interface override must stay
// below the peak rate of a TBF interface that has one.
func CheckOverride(plan *config.Plan, o Override) error {
	if err := o.Validate(); err != nil {
		return err
	}
	switch o.Target.Kind {
	case TargetUser:
		if !slices.ContainsFunc(plan.Users, func(u config.User) bool { return u.Name == o.Target.Name }) {
			return fmt.Errorf("override of %s: %w: no user %q", o.Target, ErrUnknownTarget, o.Target.Name)
		}
	case TargetTier:
		if _, ok := plan.Tier(o.Target.Name); !ok {
			return fmt.Errorf("override of %s: %w: no tier %q", o.Target, ErrUnknownTarget, o.Target.Name)
		}
	case TargetNode:
		if _, ok := plan.Node(o.Target.Name); !ok {
			return fmt.Errorf("override of %s: %w: no node %q", o.Target, ErrUnknownTarget, o.Target.Name)
		}
	case TargetIface:
		found := false
		for _, in := range plan.Interfaces {
			if !ifaceMatches(o.Target.Name, &in) || !o.Direction.Covers(in.Direction) {
				continue
			}
			found = true
			if in.PeakRate != 0 && o.Rate.BytesPerSecond() >= in.PeakRate.BytesPerSecond() {
				return fmt.Errorf("override of %s: rate %s must be below the interface's peak rate %s", o.Target, o.Rate, in.PeakRate)
			}
		}
		if !found && o.Direction != DirBoth {
			return fmt.Errorf("override of %s: %w: interface %q has no %s side", o.Key(), ErrUnknownTarget,
				o.Target.Name, o.Direction)
		}
		if !found {
			return fmt.Errorf("override of %s: %w: no interface %q", o.Target, ErrUnknownTarget, o.Target.Name)
		}
	}
	return nil
}

// ifaceMatches reports whether an iface:NAME target names in: its Name
// (every direction) or, for ingress, its IFB device.
func ifaceMatches(name string, in *config.Interface) bool {
	return in.Name == name || (in.IFB != "" && in.IFB == name)
}

// Overrides is the set of operator overrides, at most one per target and
// direction (Key). The zero value is empty and ready to use. It marshals to
// JSON for the daemon's state file. Not safe for concurrent use; Evaluate
// only reads it.
type Overrides struct {
	m map[Key]Override
}

// Set adds o, replacing any override of the same target and direction,
// after o.Validate. An override for both directions also replaces the
// target's download and upload overrides (it sets both); a directed one
// leaves the target's both-directions override in place and takes
// precedence over it in its direction. (Check it against the plan with
// CheckOverride first.)
func (s *Overrides) Set(o Override) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if s.m == nil {
		s.m = make(map[Key]Override)
	}
	if o.Direction == DirBoth {
		delete(s.m, Key{o.Target, DirDownload})
		delete(s.m, Key{o.Target, DirUpload})
	}
	s.m[o.Key()] = o
	return nil
}

// Clear removes every override of t (all directions) and reports whether
// there was one.
func (s *Overrides) Clear(t Target) bool {
	return len(s.ClearDirection(t, DirBoth)) > 0
}

// ClearDirection removes the overrides of t in direction d and returns
// them: DirBoth removes all of t's overrides; download or upload removes
// only the override set for that direction (an override for both
// directions stays: clear it without a direction).
func (s *Overrides) ClearDirection(t Target, d Direction) []Override {
	var gone []Override
	for _, dir := range []Direction{DirBoth, DirDownload, DirUpload} {
		if d != DirBoth && dir != d {
			continue
		}
		if o, ok := s.m[Key{t, dir}]; ok {
			gone = append(gone, o)
			delete(s.m, Key{t, dir})
		}
	}
	return gone
}

// Get returns the override of t for both directions if it is in force at
// now (see For for what applies to one direction).
func (s *Overrides) Get(t Target, now time.Time) (Override, bool) {
	return s.get(Key{t, DirBoth}, now)
}

// For returns the override of t that applies on interfaces with direction
// d at now: the one set for that direction, else the one for both.
func (s *Overrides) For(t Target, d config.Direction, now time.Time) (Override, bool) {
	if o, ok := s.get(Key{t, DirectionOf(d)}, now); ok {
		return o, true
	}
	return s.get(Key{t, DirBoth}, now)
}

func (s *Overrides) get(k Key, now time.Time) (Override, bool) {
	if s == nil {
		return Override{}, false
	}
	o, ok := s.m[k]
	if !ok || !o.ActiveAt(now) {
		return Override{}, false
	}
	return o, true
}

// List returns every override (expired ones too, until Expire removes them),
// sorted by target kind, name and direction (both, download, upload).
func (s *Overrides) List() []Override {
	if s == nil {
		return nil
	}
	out := make([]Override, 0, len(s.m))
	for _, o := range s.m {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b Override) int {
		if c := strings.Compare(string(a.Target.Kind), string(b.Target.Kind)); c != 0 {
			return c
		}
		if c := strings.Compare(a.Target.Name, b.Target.Name); c != 0 {
			return c
		}
		return strings.Compare(string(a.Direction), string(b.Direction))
	})
	return out
}

// Len is the number of overrides held.
func (s *Overrides) Len() int {
	if s == nil {
		return 0
	}
	return len(s.m)
}

// Expire removes the overrides no longer in force at now and returns them
// (for the log). Evaluate ignores expired overrides anyway; Expire keeps the
// state file small.
func (s *Overrides) Expire(now time.Time) []Override {
	var gone []Override
	for _, o := range s.List() {
		if !o.ActiveAt(now) {
			gone = append(gone, o)
			delete(s.m, o.Key())
		}
	}
	return gone
}

// Prune removes the overrides whose target plan no longer has (after a
// reload) and returns them.
func (s *Overrides) Prune(plan *config.Plan) []Override {
	var gone []Override
	for _, o := range s.List() {
		if err := CheckOverride(plan, o); errors.Is(err, ErrUnknownTarget) {
			gone = append(gone, o)
			delete(s.m, o.Key())
		}
	}
	return gone
}

// Clone returns an independent copy.
func (s *Overrides) Clone() Overrides {
	var c Overrides
	for _, o := range s.List() {
		_ = c.Set(o)
	}
	return c
}

type overridesJSON struct {
	Version   int        `json:"version"`
	Overrides []Override `json:"overrides"`
}

// MarshalJSON writes {"version":1,"overrides":[...]}, sorted as List.
func (s *Overrides) MarshalJSON() ([]byte, error) {
	l := s.List()
	if l == nil {
		l = []Override{}
	}
	return json.Marshal(overridesJSON{Version: 1, Overrides: l})
}

// UnmarshalJSON reads what MarshalJSON writes, replacing the contents.
// Every override is validated; duplicates (same target and direction) are
// an error. Files written before overrides had a direction load as
// overrides for both directions.
func (s *Overrides) UnmarshalJSON(b []byte) error {
	var v overridesJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("overrides: %w", err)
	}
	if v.Version != 1 {
		return fmt.Errorf("overrides: unsupported version %d", v.Version)
	}
	var n Overrides
	for i, o := range v.Overrides {
		if _, dup := n.m[o.Key()]; dup {
			return fmt.Errorf("overrides[%d]: duplicate target %s", i, o.Key())
		}
		if err := n.Set(o); err != nil {
			return fmt.Errorf("overrides[%d]: %w", i, err)
		}
	}
	*s = n
	return nil
}
