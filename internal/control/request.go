package control

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/shaperd/shaperd/pkg/tbf"

	"github.com/shaperd/shaperd/pkg/policy"
)

// TargetKind is what a target names (pkg/policy's kinds).
type TargetKind = policy.TargetKind

// Target kinds.
const (
	TargetUser  = policy.TargetUser  // "alice"
	TargetTier  = policy.TargetTier  // "tier:gold"
	TargetIface = policy.TargetIface // "iface:lan0"
	TargetNode  = policy.TargetNode  // "node:ap-3"
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

// Direction is an override's direction (pkg/policy's): "download",
// "upload" or "" for both.
type Direction = policy.Direction

// Directions of an override.
const (
	DirBoth     = policy.DirBoth
	DirDownload = policy.DirDownload
	DirUpload   = policy.DirUpload
)

// ParseDirectedTarget parses a target with ParseTarget's checks, plus an
// interface target's "/download" or "/upload" suffix, and direction (the
// --direction flag: "download", "upload", "" or "both"). A suffix and a
// direction that disagree are an error. Errors are *BadRequestError.
func ParseDirectedTarget(target, direction string) (Target, Direction, error) {
	d, err := policy.ParseDirection(direction)
	if err != nil {
		return Target{}, d, BadRequest("%v", err)
	}
	if len(target) > maxTargetLen {
		return Target{}, d, BadRequest("target is %d bytes long; at most %d", len(target), maxTargetLen)
	}
	t, sd, err := policy.ParseDirectedTarget(target)
	if err != nil {
		return Target{}, d, BadRequest("%v", err)
	}
	if _, err := ParseTarget(t.String()); err != nil {
		return Target{}, d, err
	}
	switch {
	case sd == policy.DirBoth:
	case d == policy.DirBoth:
		d = sd
	case d != sd:
		return Target{}, d, BadRequest("target %q is the %s side but --direction says %s", target, sd, d)
	}
	return t, d, nil
}

// MinRate is the smallest rate the socket accepts: the kernel works in whole
// bytes per second, so 8 bit/s. It equals config.MinRate.
const MinRate = 8 * tbf.Bit

// Validate checks the request on its own, as both shaperctl (before
// sending) and the server (before calling the Service) do: a valid target, a
// rate of at least MinRate, a ceiling not below the rate, a non-negative
// ramp of at most policy.MaxRamp and a positive duration of at most
// policy.MaxOverrideFor. The bandwidth of the target's interfaces is
// checked by the daemon with CheckBound. It returns a *BadRequestError.
func (r *SetRateRequest) Validate() error {
	if _, _, err := ParseDirectedTarget(r.Target, r.Direction); err != nil {
		return err
	}
	if r.Rate < MinRate {
		return BadRequest("rate %s for %s is below the minimum %s (the kernel counts whole bytes per second)",
			describeRate(r.RateText, r.Rate), r.Target, MinRate)
	}
	if r.Ceil != nil && *r.Ceil < r.Rate {
		return BadRequest("ceil %s is below rate %s for %s: the ceiling must be at least the guaranteed rate",
			describeRate(r.CeilText, *r.Ceil), describeRate(r.RateText, r.Rate), r.Target)
	}
	if r.Ramp != nil && *r.Ramp < 0 {
		return BadRequest("ramp %s for %s: must not be negative (0s changes at once)", r.Ramp, r.Target)
	}
	if r.For != nil && *r.For <= 0 {
		return BadRequest("for %s for %s: must be positive (omit it to keep the override until cleared)", r.For, r.Target)
	}
	var ramp, dur *time.Duration
	if r.Ramp != nil {
		v := r.Ramp.Std()
		ramp = &v
	}
	if r.For != nil {
		v := r.For.Std()
		dur = &v
	}
	if err := policy.CheckDurations(ramp, dur); err != nil {
		return BadRequest("%s: %v", r.Target, err)
	}
	return nil
}

// RateBound is the most a set-rate may give its target: the bandwidth of
// the interface it is shaped on, or the smallest one when it is shaped on
// several.
type RateBound struct {
	// Interface names the interface with the smallest bandwidth, as the
	// message should show it ("lan0", or "lan0 ingress" when lan0 is shaped
	// in both directions).
	Interface string
	// Bandwidth is that interface's configured bandwidth; 0: no bound (the
	// target is shaped nowhere).
	Bandwidth tbf.Rate
	// Several says the target is shaped on more than one interface, so the
	// message says that the smallest one bounds it.
	Several bool
}

// CheckBound refuses a rate or ceil above b.Bandwidth with a
// *BadRequestError that names the bound and echoes the rate as it was
// written, in bits when it was given in bytes ("1gbps (8gbit) is above
// r-lan's bandwidth 1gbit").
func (r *SetRateRequest) CheckBound(b RateBound) error {
	if b.Bandwidth == 0 {
		return nil
	}
	what, text, v := "rate", r.RateText, r.Rate
	if r.Ceil != nil && *r.Ceil > b.Bandwidth && r.Rate <= b.Bandwidth {
		what, text, v = "ceil", r.CeilText, *r.Ceil
	}
	if v <= b.Bandwidth {
		return nil
	}
	msg := fmt.Sprintf("%s %s is above %s's bandwidth %s", what, describeRate(text, v), b.Interface, b.Bandwidth)
	if b.Several {
		if t, err := ParseTarget(r.Target); err == nil && t.Kind == TargetIface {
			msg += fmt.Sprintf(" (the smallest of the interfaces %s names)", r.Target)
		} else {
			msg += fmt.Sprintf(" (the smallest of the interfaces %s is shaped on)", r.Target)
		}
	}
	return BadRequest("%s", msg)
}

// describeRate shows a rate as the operator wrote it (text, when it reads
// as v), adding its value in bits when the text is not in decimal bits:
// "1gbps (8gbit)", "1mibit (1048576bit)", "3mbit".
func describeRate(text string, v tbf.Rate) string {
	if text == "" {
		return v.String()
	}
	if p, err := tbf.ParseRate(text); err != nil || p != v {
		return v.String()
	}
	lower := strings.ToLower(text)
	for _, u := range []string{"kbit", "mbit", "gbit", "tbit", "bit"} {
		if strings.HasSuffix(lower, u) {
			if !strings.HasSuffix(lower, "i"+u) {
				return text
			}
			break
		}
	}
	return text + " (" + v.String() + ")"
}

// MarshalJSON sends Rate and Ceil as the operator wrote them (RateText,
// CeilText) when those read as the same values, so that the daemon's
// messages can echo them; otherwise in tbf.Rate's text form.
func (r SetRateRequest) MarshalJSON() ([]byte, error) {
	type wire SetRateRequest // no methods: no recursion
	out := struct {
		wire
		Rate string  `json:"rate"`
		Ceil *string `json:"ceil,omitempty"`
	}{wire: wire(r), Rate: rateText(r.RateText, r.Rate)}
	if r.Ceil != nil {
		c := rateText(r.CeilText, *r.Ceil)
		out.Ceil = &c
	}
	return json.Marshal(out)
}

// rateText is text when it parses to v, else v's text form.
func rateText(text string, v tbf.Rate) string {
	if p, err := tbf.ParseRate(text); err == nil && p == v && text != "" {
		return text
	}
	return v.String()
}

// decodeSetRate decodes a set-rate body strictly (see decodeBody) and keeps
// the rates' texts as sent.
func decodeSetRate(body io.Reader) (SetRateRequest, error) {
	var req SetRateRequest
	raw, err := decodeBody(body, &req)
	if err != nil {
		return req, err
	}
	json.Unmarshal(raw["rate"], &req.RateText) // stays "" unless a string
	if req.Ceil != nil {
		json.Unmarshal(raw["ceil"], &req.CeilText)
	}
	return req, nil
}

// normalize fills Ceil (and CeilText) with Rate when it is nil.
func (r *SetRateRequest) normalize() {
	if r.Ceil == nil {
		c := r.Rate
		r.Ceil, r.CeilText = &c, r.RateText
	}
}
