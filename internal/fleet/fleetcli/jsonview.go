package fleetcli

import (
	"errors"
	"io"
	"time"

	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// The --json objects of the fleet commands, in the shape of every
// shaperctl --json output (docs/json.md, package jsonout).

// pushJSON is fleet push --json.
type pushJSON struct {
	Revision  int64  `json:"revision"`
	Prefix    string `json:"prefix"`
	TierCount int    `json:"tier_count"`
	UserCount int    `json:"user_count"`
}

// pushDiffJSON is fleet push --diff --json: the changes as lines.
type pushDiffJSON struct {
	Revision int64    `json:"revision"`
	Changes  []string `json:"changes"`
}

// pullJSON is fleet pull --json: the plan's documents as text.
type pullJSON struct {
	Prefix   string    `json:"prefix"`
	Revision int64     `json:"revision"`
	PushedBy string    `json:"pushed_by,omitempty"`
	PushedAt time.Time `json:"pushed_at,omitzero"`
	Source   string    `json:"source,omitempty"`
	// SharedTOML is [policy] and [tiers], UsersTOML the users' file.
	SharedTOML string `json:"shared_toml"`
	UsersTOML  string `json:"users_toml"`
}

func newPullJSON(prefix string, p *fleet.Plan) pullJSON {
	return pullJSON{Prefix: prefix, Revision: p.Revision, PushedBy: p.Meta.PushedBy, PushedAt: p.Meta.PushedAt,
		Source: p.Meta.Source, SharedTOML: string(p.Shared.Main), UsersTOML: string(p.Shared.Users)}
}

// statusJSON is fleet status --json.
type statusJSON struct {
	Prefix           string               `json:"prefix"`
	Revision         int64                `json:"revision"`
	Health           string               `json:"health"`
	Routers          []fleet.Registration `json:"routers"`
	OverrideCount    int                  `json:"override_count"`
	OverrideProblems []string             `json:"override_problems"`
}

// overrideJSON is set-rate --fleet --json: the override set, as
// overrides --json lists one.
type overrideJSON struct {
	Target    string     `json:"target"`
	Direction string     `json:"direction"`
	Rate      tbf.Rate   `json:"rate"`
	Ceil      tbf.Rate   `json:"ceil"`
	Ramp      string     `json:"ramp,omitempty"`
	Until     *time.Time `json:"until,omitempty"`
	Set       time.Time  `json:"set"`
	SetBy     *uint32    `json:"set_by_uid,omitempty"`
	Source    string     `json:"source"`
}

func newOverrideJSON(o policy.Override) overrideJSON {
	rate, ceil := o.Rates()
	j := overrideJSON{Target: o.Target.String(), Direction: string(o.Direction), Rate: rate, Ceil: ceil,
		Set: o.Set, SetBy: o.SetBy, Source: "fleet"}
	if j.Direction == "" {
		j.Direction = "both"
	}
	if o.Ramp != nil {
		j.Ramp = o.Ramp.String()
	}
	if !o.Until.IsZero() {
		u := o.Until
		j.Until = &u
	}
	return j
}

// clearJSON is clear --fleet --json.
type clearJSON struct {
	Target  string `json:"target"`
	Cleared int64  `json:"cleared"`
}

// quotaResetJSON is quota reset --fleet --json.
type quotaResetJSON struct {
	User             string    `json:"user"`
	Revision         int64     `json:"revision"`
	ResetAt          time.Time `json:"reset_at"`
	UsageKeysDeleted int64     `json:"usage_keys_deleted"`
}

// writeJSON writes v in the shape of docs/json.md.
func writeJSON(out io.Writer, v any) error { return jsonout.Encode(out, v) }

// writeError writes the one object a failing --json command prints on
// stdout: the message, the exit code and, for an invalid plan, its
// problems with file and line.
func writeError(out io.Writer, err error, code int) {
	e := jsonout.ErrorObject{Error: DoubleDash(err.Error()), ExitCode: code}
	var ce checkErr
	if errors.As(err, &ce) {
		e.Error = "the plan is invalid; nothing was written"
		e.Problems = jsonout.Problems(ce)
	}
	_ = jsonout.WriteError(out, e)
}
