package daemon

import (
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
)

// CheckNotes returns what `shaperd --check` tells about a valid
// configuration besides "ok": each interface and tier aggregate whose
// guaranteed rates add up to more than its bandwidth, with the factor the
// guarantees are scaled by (information, not an error). Overrides and
// quota usage are not considered: it is the plan as written, now. It also
// probes the running kernel's leaf qdisc kinds and names each configured
// kind it lacks (and the default) with the bfifo that replaces it. plan is
// the plan --check checked (CheckRouterPlan), so that a fleet router's
// notes cover the shared tiers and users too.
func CheckNotes(plan *config.Plan) []string {
	notes := policy.Evaluate(plan, policy.Overrides{}, nil, time.Now()).OversubscriptionNotes()
	return append(notes, leafCheckNotes(plan)...)
}

// CheckKeyNotes returns what `shaperd --check` tells about keys of a
// valid configuration, each at the key's position: a ceil above an HTB
// interface's bandwidth, capped to it, and a guaranteed rate above it,
// scaled with the others (policy.CheckWithNotes). One plan may serve
// links of different sizes, so neither is an error. The loader's notes
// (config.Plan.Notes: a rate written in bytes per second) come first.
func CheckKeyNotes(plan *config.Plan) []config.Error {
	_, notes := policy.CheckWithNotes(plan)
	return append(slices.Clip(plan.Notes), notes...)
}
