package control

import (
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// OverrideStatus is one override in force, as `shaperctl overrides` lists
// it: what it sets, for how long, who set it and when.
type OverrideStatus struct {
	// Target is "alice", "tier:gold" or "iface:lan0".
	Target string `json:"target"`
	// Direction is "download", "upload" or "both".
	Direction string   `json:"direction"`
	Rate      tbf.Rate `json:"rate"`
	Ceil      tbf.Rate `json:"ceil"`
	// Ramp is the override's own ramp; nil: the policy's default ramp.
	Ramp *Duration `json:"ramp,omitempty"`
	// Until is when it expires; nil: until cleared.
	Until *time.Time `json:"until,omitempty"`
	// Set is when it was set (the daemon's clock).
	Set time.Time `json:"set"`
	// SetBy is the uid of the caller who set it (SO_PEERCRED); nil when
	// not known.
	SetBy *uint32 `json:"set_by_uid,omitempty"`
	// Source is where the override was set: SourceLocal (this router's
	// set-rate) or SourceFleet (set-rate --fleet, from etcd).
	Source string `json:"source"`
	// Shadowed is set on a fleet override that a local override of the
	// same target and direction replaces on this router.
	Shadowed bool `json:"shadowed,omitempty"`
}

// Override sources (OverrideStatus.Source).
const (
	SourceLocal = "local"
	SourceFleet = "fleet"
)

// OverridesResponse answers GET /v1/overrides.
type OverridesResponse struct {
	Overrides []OverrideStatus `json:"overrides"`
}

// ClearResponse says what a clear did: the overrides it removed; none
// means nothing was set for the target (not an error).
type ClearResponse struct {
	Target    string           `json:"target"`
	Direction string           `json:"direction,omitempty"`
	Cleared   []OverrideStatus `json:"cleared" out:"cleared_overrides"`
	// Note explains an empty Cleared, e.g. that only an override of both
	// directions is set.
	Note string `json:"note,omitempty"`
}

// ReloadStatus is a reload's time and result.
type ReloadStatus struct {
	At time.Time `json:"at"`
	// Result is "ok" (applied, every interface ok), "degraded" (applied,
	// some interface is not ok: see Interfaces) or "refused" (invalid;
	// the old configuration stays, see Problems).
	Result     string            `json:"result"`
	Interfaces []InterfaceResult `json:"interfaces,omitempty"`
	Problems   []string          `json:"problems,omitempty"`
}

// ReloadRequest asks for a reload (the body of POST /v1/reload; an empty
// body is the zero value).
type ReloadRequest struct {
	// AllowRemovals confirms a reload that removes more users than
	// daemon.max_reload_removals allows (shaperctl reload --allow-removals);
	// without it such a reload is refused.
	AllowRemovals bool `json:"allow_removals,omitempty"`
}

// Reload results.
const (
	ReloadOK       = "ok"
	ReloadDegraded = "degraded"
	ReloadRefused  = "refused"
)

// InterfaceResult is one interface's state after a reload.
type InterfaceResult struct {
	Name string `json:"name" out:"interface"`
	// Direction is the interface's: "egress" or "ingress" (shaperctl
	// --json: interface_direction, and direction in users' words).
	Direction string `json:"direction" out:"interface_direction"`
	State     string `json:"state"`
	Error     string `json:"error,omitempty"`
}

// QuotaResetRequest asks to reset a user's quota usage for the current
// period.
type QuotaResetRequest struct {
	User string `json:"user"`
}

// QuotaResetResponse says what a quota reset did.
type QuotaResetResponse struct {
	User string `json:"user"`
	// Was is the usage before the reset, in bytes.
	Was uint64 `json:"was"`
	// Restored says the user was over quota and is back to the plan.
	Restored bool `json:"restored"`
}
