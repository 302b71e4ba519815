package daemon

import (
	"github.com/shaperd/shaperd/internal/check"
	"github.com/shaperd/shaperd/pkg/config"
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
		check.MeasureLinks(plan, ls.LinkSizes)
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
