package sim

import (
	"math"
	"slices"

	"github.com/shaperd/shaperd/pkg/model"
)

// solveTBF shares a TBF's rate among flows, max-min fair: the flows that
// ask for less than an equal share get their demand, the others split the
// rest equally (ByFIFO: the fair case, not a guarantee).
func solveTBF(t *model.Tree, flows []Flow) (*Result, error) {
	p := t.Root.TBF
	res := &Result{Device: t.Device, Kind: model.ShaperTBF, Flows: make([]FlowResult, len(flows))}
	if p != nil {
		res.Bandwidth = float64(p.Rate.BytesPerSecond()) * 8
	}
	order := make([]int, len(flows))
	for i, f := range flows {
		d := max(float64(f.Demand), 0)
		res.Flows[i] = FlowResult{Name: f.Name, Demand: f.Demand}
		res.Demand += d
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		da, db := float64(flows[a].Demand), float64(flows[b].Demand)
		switch {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return 0
	})
	left := res.Bandwidth
	eps := max(res.Bandwidth*1e-9, 1e-6)
	for k, i := range order {
		share := left / float64(len(order)-k)
		d := max(float64(flows[i].Demand), 0)
		f := &res.Flows[i]
		if d <= share+eps {
			f.Rate, f.LimitedBy = d, ByDemand
		} else {
			f.Rate, f.LimitedBy = share, ByFIFO
			if k == len(order)-1 && !limitedBefore(res.Flows, order[:k]) {
				f.LimitedBy = ByBandwidth
			}
		}
		left -= f.Rate
		res.Total += f.Rate
	}
	res.Guaranteed = math.Min(res.Demand, res.Bandwidth)
	return res, nil
}

// limitedBefore reports whether one of the flows in order was limited
// by the shaper (so the last one shares it rather than being alone).
func limitedBefore(fs []FlowResult, order []int) bool {
	for _, i := range order {
		if fs[i].LimitedBy != ByDemand {
			return true
		}
	}
	return false
}
