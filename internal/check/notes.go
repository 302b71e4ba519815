package check

import (
	"fmt"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// planNotes returns what `shaperd --check` tells about a valid
// configuration besides "ok": each interface and tier aggregate whose
// guaranteed rates add up to more than its bandwidth, with the factor the
// guarantees are scaled by (information, not an error). Overrides and
// quota usage are not considered: it is the plan as written, at now. It
// also probes the running kernel's leaf qdisc kinds and names each
// configured kind it lacks (and the default) with the bfifo that replaces
// it (leafNotes). plan is the plan --check checked (routerPlan), so that a
// fleet router's notes cover the shared tiers and users too.
func planNotes(plan *config.Plan, now time.Time) []string {
	notes := policy.Evaluate(plan, policy.Overrides{}, nil, now).OversubscriptionNotes()
	return append(notes, leafNotes(plan)...)
}

// keyNotes returns what `shaperd --check` tells about keys of a valid
// configuration, each at the key's position: a ceil above an HTB
// interface's bandwidth, capped to it, and a guaranteed rate above it,
// scaled with the others (policy.CheckWithNotes). One plan may serve
// links of different sizes, so neither is an error. The loader's notes
// (config.Plan.Notes: a rate written in bytes per second) come first.
func keyNotes(plan *config.Plan) []config.Error {
	_, notes := policy.CheckWithNotes(plan)
	return append(slices.Clip(plan.Notes), notes...)
}

// leafNotes are --check's notes about leaf qdiscs on this kernel (probed
// as the daemon does): each configured kind it lacks, and the default,
// with the bfifo that replaces them, and each bfifo leaf_limit too small
// for the aggregates of the interface (measured here, where it exists).
func leafNotes(plan *config.Plan) []string {
	MeasureLinks(plan, kernel.LinkSizesHere)
	kinds, err := kernel.LeafKindsAvailable()
	var notes []string
	if err != nil {
		notes = append(notes, fmt.Sprintf("could not probe the kernel's leaf qdisc kinds (%v): kinds it could not probe count as missing", err))
	}
	if kinds == nil {
		return append(notes, policy.LeafNotes(plan)...)
	}
	plan.LeafKinds = kinds
	return append(notes, policy.LeafNotes(plan)...)
}

// MeasureLinks gives plan the largest frame and aggregate of each of its
// interfaces, from sizes; an interface it cannot measure (not there yet)
// keeps the defaults.
func MeasureLinks(plan *config.Plan, sizes func(string) (tbf.Size, tbf.Size, error)) {
	links := make(map[string]config.LinkSizes, len(plan.Interfaces))
	for _, in := range plan.Interfaces {
		if frame, aggregate, err := sizes(in.Name); err == nil {
			links[in.Name] = config.LinkSizes{Frame: frame, Aggregate: aggregate}
		}
	}
	plan.Links = links
}
