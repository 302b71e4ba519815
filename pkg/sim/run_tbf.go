package sim

import (
	"fmt"
	"math"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// tbfEngine is sch_tbf's dequeue: one FIFO behind a token bucket (and an
// optional peak-rate bucket), tokens in ns of transmission at the rate.
type tbfEngine struct {
	root    model.Qdisc
	rate    psched.RateConfig
	peak    psched.RateConfig
	hasPeak bool
	buffer  int64 // ns
	mtu     int64 // ns of the peak bucket
	tokens  int64
	ptokens int64
	tc      int64
	busy    bool // the queue is backlogged
}

func newTBFEngine(t *model.Tree) (*tbfEngine, error) {
	e := &tbfEngine{root: *t.Root}
	if err := e.change(t, 0); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *tbfEngine) sources() int  { return 1 }
func (e *tbfEngine) counters() int { return 1 }

func (e *tbfEngine) source(h model.Handle) (int, bool) { return 0, h == e.root.Handle }

func (e *tbfEngine) backlogged(_ int, on bool, _ int64) { e.busy = on }

// change is tbf_change with TCA_TBF_BURST (what shaperd sends): new
// parameters, and both buckets refilled to full.
func (e *tbfEngine) change(t *model.Tree, _ int64) error {
	if t.Root == nil || t.Root.Kind != model.ShaperTBF || t.Root.TBF == nil {
		return fmt.Errorf("not a TBF root (the shaper kind cannot change)")
	}
	p := t.Root.TBF
	if p.Rate.BytesPerSecond() == 0 {
		return fmt.Errorf("tbf rate %s: %w", p.Rate, psched.ErrZeroByteRate)
	}
	burst := p.Burst
	if burst == 0 {
		burst = tbf.RecommendedBurst(p.Rate)
	}
	e.rate = psched.NewRateConfig(p.Rate.BytesPerSecond(), 0, 0)
	e.buffer = psched.TBFFromBurst(e.rate, uint32(burst)).BufferNS
	e.hasPeak = p.PeakRate != 0 && p.MTU != 0
	if e.hasPeak {
		e.peak = psched.NewRateConfig(p.PeakRate.BytesPerSecond(), 0, 0)
		e.mtu = int64(e.peak.L2T(int(p.MTU)))
	}
	e.tokens, e.ptokens = e.buffer, e.mtu
	return nil
}

// dequeue is tbf_dequeue: the packet leaves when both buckets stay
// non-negative; otherwise the watchdog fires when the deeper deficit is
// paid off.
func (e *tbfEngine) dequeue(now, pkt int64) (int, []int, int64) {
	if !e.busy {
		return -1, nil, math.MaxInt64
	}
	elapsed := now - e.tc
	toks, ok := psched.TBFTokens(e.tokens, e.buffer, elapsed, int64(e.rate.L2T(int(pkt))))
	ptoks := int64(0)
	if e.hasPeak {
		// The peak bucket gains the elapsed time capped at the rate
		// bucket's depth, then is capped at its own (sch_tbf.c).
		ptoks = min(min(elapsed, e.buffer)+e.ptokens, e.mtu) - int64(e.peak.L2T(int(pkt)))
		ok = ok && ptoks >= 0
	}
	if !ok {
		return -1, nil, now + max(-toks, -ptoks)
	}
	e.tokens, e.ptokens, e.tc = toks, ptoks, now
	return 0, []int{0}, 0
}

func (e *tbfEngine) series(bytes [][]uint64) []ClassSeries {
	return []ClassSeries{{Handle: e.root.Handle, Labels: model.Labels{Kind: "root"}, Bytes: bytes[0]}}
}
