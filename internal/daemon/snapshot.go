package daemon

import (
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// ifaceSnapshot is what the metrics collectors read of one interface: an
// immutable copy made by the loop after each dump or plan change, so that
// a scrape never touches the kernel or the loop's state.
type ifaceSnapshot struct {
	iface, direction string
	present, inSync  bool
	classes          []classSample
}

// classSample is one desired class (or a TBF root) with its last counters.
type classSample struct {
	kind, tier, user string
	rate, ceil       tbf.Rate
	stats            model.Stats
	hasStats         bool
}

// publish replaces the snapshot the collectors read. Class samples are
// copied only for interfaces whose dump or plan changed (st.classSnap nil).
func (d *Daemon) publish() {
	snaps := make([]*ifaceSnapshot, 0, len(d.ifaces))
	for _, st := range d.ifaces {
		if st.classSnap == nil {
			cs := classSamples(st)
			st.classSnap = &cs
		}
		snaps = append(snaps, &ifaceSnapshot{iface: st.cfg.Name, direction: string(st.cfg.Direction),
			present: st.built && !st.missing, inSync: st.inSync, classes: *st.classSnap})
	}
	d.snap.Store(&snaps)
}

// classSamples copies the labels, rates in force and last counters of
// st's desired classes (classes the plan does not have are not reported:
// they have no labels and are removed by the next reconcile).
func classSamples(st *iface) []classSample {
	if st.cfg.Shaper == config.ShaperTBF {
		r := st.desired.Root
		if r == nil || r.TBF == nil {
			return nil
		}
		c := classSample{kind: "tbf", rate: r.TBF.Rate, ceil: r.TBF.Rate}
		if st.rootStats != nil {
			c.stats, c.hasStats = *st.rootStats, true
		}
		return []classSample{c}
	}
	out := make([]classSample, 0, len(st.desired.Classes))
	actual := st.counters
	j := 0
	for _, c := range st.desired.Classes {
		cs := classSample{kind: c.Labels.Kind, tier: c.Labels.Tier, user: c.Labels.User, rate: c.Rate, ceil: c.Ceil}
		for j < len(actual) && actual[j].handle < c.Handle {
			j++
		}
		if j < len(actual) && actual[j].handle == c.Handle {
			cs.stats, cs.hasStats = actual[j].stats, true
		}
		out = append(out, cs)
	}
	return out
}
