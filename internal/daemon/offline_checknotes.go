package daemon

import (
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
