package control

import (
	"strings"
	"unicode"

	"github.com/shaperd/shaperd/pkg/policy"
)

// TargetKind is what a target names (pkg/policy's kinds).
type TargetKind = policy.TargetKind

// Target kinds.
const (
	TargetUser  = policy.TargetUser  // "alice"
	TargetTier  = policy.TargetTier  // "tier:gold"
	TargetIface = policy.TargetIface // "iface:lan0"
)

// Target is a parsed target: a user, every user of a tier, or an interface
// (its total bandwidth). It is pkg/policy's Target, so the daemon uses what
// the server parsed as it is.
type Target = policy.Target

// maxTargetLen bounds a target's length in bytes.
const maxTargetLen = 256

// ParseTarget parses "alice", "tier:gold" or "iface:lan0" with
// policy.ParseTarget and adds the checks of the wire: at most 256 bytes, no
// spaces or control characters. Errors are *BadRequestError.
func ParseTarget(s string) (Target, error) {
	if len(s) > maxTargetLen {
		return Target{}, BadRequest("target is %d bytes long; at most %d", len(s), maxTargetLen)
	}
	t, err := policy.ParseTarget(s)
	if err != nil {
		return Target{}, BadRequest("%v", err)
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
