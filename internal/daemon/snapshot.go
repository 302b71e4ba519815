package daemon

import (
	"cmp"
	"slices"
	"sync"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
)

// ifaceSnapshot is what the metrics collectors read of one interface.
// The loop publishes a new one after each dump or plan change. It refers
// to the desired classes and the dumped counters without copying them:
// counters are replaced, never modified; classes are replaced, or, by a
// ramp step or a single-user change, modified in place under mu (one
// class each), so a scrape reads them safely and never touches the kernel
// or the loop's state.
type ifaceSnapshot struct {
	iface, direction string
	present, inSync  bool
	// classes are the desired classes (labels, rates in force), sorted by
	// handle but for run-time user changes (see each); counters the last
	// dump's, sorted by handle.
	classes  []model.Class
	counters []classCounters
	// mu guards the elements of classes (Daemon.classMu).
	mu *sync.RWMutex
	// tbf is the desired TBF root (nil for HTB) with the dumped rootStats.
	tbf       *model.TBFParams
	rootStats *model.Stats
	// tierSums are the interface's per-tier counters; perUser is
	// daemon.metrics_per_user.
	tierSums map[string]tierCounts
	perUser  config.UserMetrics
}

// publish replaces the snapshot the collectors read.
func (d *Daemon) publish() {
	snaps := make([]*ifaceSnapshot, 0, len(d.ifaces))
	for _, st := range d.ifaces {
		s := &ifaceSnapshot{iface: st.cfg.Name, direction: string(st.cfg.Direction),
			present: st.built && !st.missing, inSync: st.inSync,
			classes: st.desired.Classes, counters: st.counters, rootStats: st.rootStats, mu: &d.classMu,
			tierSums: st.copyTierSums(), perUser: d.plan.Daemon.MetricsPerUser}
		if st.cfg.Shaper == config.ShaperTBF && st.desired.Root != nil {
			s.tbf = st.desired.Root.TBF
		}
		snaps = append(snaps, s)
	}
	d.snap.Store(&snaps)
}

// each calls f for every class of s (a TBF root counts as one class of
// kind "tbf") with its last counters (nil before the first dump), once
// per handle: a run-time user's removal moves the last class into the
// removed one's place while a scrape may be reading (userpatch.go), and
// classes added at run time come after the sorted ones.
func (s *ifaceSnapshot) each(f func(l model.Labels, rate, ceil uint64, stats *model.Stats)) {
	if s.tbf != nil {
		f(model.Labels{Kind: "tbf"}, uint64(s.tbf.Rate), uint64(s.tbf.Rate), s.rootStats)
		return
	}
	seen := make(map[model.Handle]bool, len(s.classes))
	for i := range s.classes {
		s.mu.RLock()
		h, l, rate, ceil := s.classes[i].Handle, s.classes[i].Labels, s.classes[i].Rate, s.classes[i].Ceil
		s.mu.RUnlock()
		if seen[h] {
			continue
		}
		seen[h] = true
		var stats *model.Stats
		if j, ok := slices.BinarySearchFunc(s.counters, h, func(c classCounters, h model.Handle) int { return cmp.Compare(c.handle, h) }); ok {
			stats = &s.counters[j].stats
		}
		f(l, uint64(rate), uint64(ceil), stats)
	}
}
