package daemon

import (
	"fmt"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// leafProber is a kernel that can say which leaf qdisc kinds it has
// (*kernel.Kernel: probed once per process in a throwaway namespace).
type leafProber interface {
	LeafKinds() (map[string]bool, error)
}

// linkSizer is a kernel that can say how large the packets reaching a
// device's qdisc get (*kernel.Kernel).
type linkSizer interface {
	LinkSizes(name string) (frame, aggregate tbf.Size, err error)
}

// measureLinks gives plan the largest frame and aggregate of each of its
// interfaces, from sizes; an interface it cannot measure (not there yet)
// keeps the defaults.
func measureLinks(plan *config.Plan, sizes func(string) (tbf.Size, tbf.Size, error)) {
	links := make(map[string]config.LinkSizes, len(plan.Interfaces))
	for _, in := range plan.Interfaces {
		if frame, aggregate, err := sizes(in.Name); err == nil {
			links[in.Name] = config.LinkSizes{Frame: frame, Aggregate: aggregate}
		}
	}
	plan.Links = links
}

// resolveLeaves gives plan the sizes of its links' largest packets (which
// size byte-limited leaves) and the kernel's leaf qdisc kinds, so that the
// policy uses fq_codel by default where it exists and a latency-sized
// bfifo for kinds the kernel lacks, and logs each such fallback as a
// warning. A kernel that cannot probe (the unit tests' fake) leaves the
// plan offline: leaves as configured.
func (d *Daemon) resolveLeaves(plan *config.Plan) {
	probed, err := d.probeLeaves(plan)
	if err != nil {
		d.log.Warn("probing the kernel's leaf qdisc kinds failed; kinds it could not probe are replaced by bfifo", "err", err)
	}
	if !probed {
		return
	}
	for _, n := range policy.LeafNotes(plan) {
		d.log.Warn(n)
	}
}

// probeLeaves is resolveLeaves without its logs (for previews that must
// plan what a reload would): it reports whether the leaf kinds were set and
// the probe's error.
func (d *Daemon) probeLeaves(plan *config.Plan) (bool, error) {
	if ls, ok := d.k.(linkSizer); ok {
		measureLinks(plan, ls.LinkSizes)
	}
	p, ok := d.k.(leafProber)
	if !ok {
		return false, nil
	}
	kinds, err := p.LeafKinds()
	if kinds == nil {
		return false, err
	}
	plan.LeafKinds = kinds
	return true, err
}

// leafCheckNotes are --check's notes about leaf qdiscs on this kernel
// (probed as the daemon does): each configured kind it lacks, and the
// default, with the bfifo that replaces them, and each bfifo leaf_limit
// too small for the aggregates of the interface (measured here, where it
// exists).
func leafCheckNotes(plan *config.Plan) []string {
	measureLinks(plan, kernel.LinkSizesHere)
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
