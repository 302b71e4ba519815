package control

import (
	"strings"
	"unicode"
)

// TargetKind is what a target names.
type TargetKind string

// Target kinds.
const (
	TargetUser  TargetKind = "user"  // "alice"
	TargetTier  TargetKind = "tier"  // "tier:gold"
	TargetIface TargetKind = "iface" // "iface:lan0"
)

// Target is a parsed target: a user, every user of a tier, or every user on
// an interface.
type Target struct {
	Kind TargetKind
	Name string
}

// String formats t as ParseTarget reads it.
func (t Target) String() string {
	if t.Kind == TargetUser {
		return t.Name
	}
	return string(t.Kind) + ":" + t.Name
}

// maxTargetLen bounds a target's length in bytes.
const maxTargetLen = 256

// ParseTarget parses "alice", "tier:gold" or "iface:lan0". The name must be
// non-empty, at most 256 bytes, without spaces or control characters. A
// string with another "x:" prefix is refused rather than taken as a user.
func ParseTarget(s string) (Target, error) {
	t := Target{Kind: TargetUser, Name: s}
	if kind, name, ok := strings.Cut(s, ":"); ok {
		switch TargetKind(kind) {
		case TargetTier, TargetIface:
			t = Target{Kind: TargetKind(kind), Name: name}
		default:
			return Target{}, BadRequest("target %q: use a user name, tier:NAME or iface:NAME", s)
		}
	}
	if t.Name == "" {
		return Target{}, BadRequest("target %q: empty name; use a user name, tier:NAME or iface:NAME", s)
	}
	if len(s) > maxTargetLen {
		return Target{}, BadRequest("target is %d bytes long; at most %d", len(s), maxTargetLen)
	}
	if i := strings.IndexFunc(t.Name, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar
	}); i >= 0 {
		return Target{}, BadRequest("target %q: names have no spaces or control characters", s)
	}
	return t, nil
}

// Validate checks the request as the server does before calling the
// Service: a valid target, a positive rate, a ceiling not below the rate, a
// non-negative ramp and a positive duration. It returns a *BadRequestError.
func (r *SetRateRequest) Validate() error {
	if _, err := ParseTarget(r.Target); err != nil {
		return err
	}
	if r.Rate == 0 {
		return BadRequest("rate of %s: must be positive (e.g. \"10mbit\")", r.Target)
	}
	if r.Ceil != nil && *r.Ceil < r.Rate {
		return BadRequest("ceil %s is below rate %s for %s: the ceiling must be at least the guaranteed rate",
			r.Ceil, r.Rate, r.Target)
	}
	if r.Ramp != nil && *r.Ramp < 0 {
		return BadRequest("ramp %s for %s: must not be negative (0s changes at once)", r.Ramp, r.Target)
	}
	if r.For != nil && *r.For <= 0 {
		return BadRequest("for %s for %s: must be positive (omit it to keep the override until cleared)", r.For, r.Target)
	}
	return nil
}

// normalize fills Ceil with Rate when it is nil.
func (r *SetRateRequest) normalize() {
	if r.Ceil == nil {
		c := r.Rate
		r.Ceil = &c
	}
}
