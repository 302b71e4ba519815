package daemon

import (
	"cmp"
	"maps"
	"slices"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// ifaceSnapshot is what the metrics collectors read of one interface.
// The loop publishes a new one after each dump or plan change. It holds
// copies: the desired classes' labels and rates (a classView, shared
// between snapshots and never modified) and the dumped counters (replaced,
// never modified), so a scrape never touches the kernel or the loop's
// state.
type ifaceSnapshot struct {
	iface, direction string
	present, inSync  bool
	// classes are the desired classes (labels, rates in force), sorted by
	// handle but for run-time user changes (see each); counters the last
	// dump's, sorted by handle.
	classes  classView
	counters []classCounters
	// tbf is the desired TBF root (nil for HTB) with the dumped rootStats.
	tbf       *model.TBFParams
	rootStats *model.Stats
	// tierSums are the interface's per-tier counters; perUser is
	// daemon.metrics_per_user.
	tierSums map[string]tierCounts
	perUser  config.UserMetrics
	// tierCeils are the tiers' ceilings on an HTB interface, as configured
	// and as capped to its bandwidth (sorted by tier).
	tierCeils []tierCeil
	// nodes are the nodes on an HTB interface (parents first) with their
	// configured rates; nodeDrops the drops behind each (addNodeDrops).
	nodes     []nodeConfigured
	nodeDrops map[string]uint64
}

// tierCeil is a tier's ceil for an interface's direction, as configured
// and in effect (capped to the interface's configured bandwidth).
type tierCeil struct {
	tier                  string
	configured, effective tbf.Rate
}

// tierCeilsOf lists plan's tiers' ceilings on the HTB interface in.
func tierCeilsOf(plan *config.Plan, in *config.Interface) []tierCeil {
	if in.Shaper != config.ShaperHTB {
		return nil
	}
	out := make([]tierCeil, 0, len(plan.Tiers))
	for i := range plan.Tiers {
		_, c := plan.Tiers[i].Rates(in.Direction)
		out = append(out, tierCeil{tier: plan.Tiers[i].Name, configured: c, effective: min(c, in.Bandwidth)})
	}
	return out
}

// classRow is what the metrics show of a desired class.
type classRow struct {
	handle     model.Handle
	labels     model.Labels
	rate, ceil tbf.Rate
}

// viewChunk is the number of rows in a chunk of a classView.
const viewChunk = 256

// classView is an immutable copy of a desired tree's classes for the
// metrics, in chunks, so that a ramp step changing a few classes copies
// only their chunks (patched) rather than every class.
type classView struct {
	chunks [][]classRow
	n      int
}

// newClassView copies classes.
func newClassView(classes []model.Class) classView {
	v := classView{chunks: make([][]classRow, 0, (len(classes)+viewChunk-1)/viewChunk), n: len(classes)}
	for i := 0; i < len(classes); i += viewChunk {
		c := make([]classRow, 0, min(viewChunk, len(classes)-i))
		for _, x := range classes[i:min(i+viewChunk, len(classes))] {
			c = append(c, classRow{handle: x.Handle, labels: x.Labels, rate: x.Rate, ceil: x.Ceil})
		}
		v.chunks = append(v.chunks, c)
	}
	return v
}

// len is the number of classes in v.
func (v classView) len() int { return v.n }

// at is class i of v.
func (v classView) at(i int) *classRow { return &v.chunks[i/viewChunk][i%viewChunk] }

// patched is v with classes[i] for each i in idx; v is unchanged (the
// chunks that change are copied).
func (v classView) patched(classes []model.Class, idx []int) classView {
	if len(idx) == 0 {
		return v
	}
	out := classView{chunks: slices.Clone(v.chunks), n: v.n}
	copied := map[int]bool{}
	for _, i := range idx {
		k := i / viewChunk
		if !copied[k] {
			out.chunks[k] = slices.Clone(out.chunks[k])
			copied[k] = true
		}
		x := &classes[i]
		out.chunks[k][i%viewChunk] = classRow{handle: x.Handle, labels: x.Labels, rate: x.Rate, ceil: x.Ceil}
	}
	return out
}

// appended is v with x added at the end; v is unchanged (only the last
// chunk is copied).
func (v classView) appended(x model.Class) classView {
	row := classRow{handle: x.Handle, labels: x.Labels, rate: x.Rate, ceil: x.Ceil}
	out := classView{chunks: slices.Clone(v.chunks), n: v.n + 1}
	if k := v.n % viewChunk; k == 0 {
		out.chunks = append(out.chunks, []classRow{row})
	} else {
		last := len(out.chunks) - 1
		out.chunks[last] = append(slices.Clip(out.chunks[last]), row)
	}
	return out
}

// removed is v without row i, the last row taking its place (as a
// run-time user's removal does to the desired classes); v is unchanged
// (the chunks that change are copied).
func (v classView) removed(i int) classView {
	out := classView{chunks: slices.Clone(v.chunks), n: v.n - 1}
	lastRow := *v.at(v.n - 1)
	if i < v.n-1 {
		k := i / viewChunk
		out.chunks[k] = slices.Clone(out.chunks[k])
		out.chunks[k][i%viewChunk] = lastRow
	}
	last := (v.n - 1) / viewChunk
	if (v.n-1)%viewChunk == 0 {
		out.chunks = out.chunks[:last]
	} else {
		out.chunks[last] = slices.Clip(out.chunks[last][:(v.n-1)%viewChunk])
	}
	return out
}

// publish replaces the snapshot the collectors read.
func (d *Daemon) publish() {
	snaps := make([]*ifaceSnapshot, 0, len(d.ifaces))
	for _, st := range d.ifaces {
		if st.viewStale {
			st.view, st.viewStale = newClassView(st.tree().Classes), false
		}
		s := &ifaceSnapshot{iface: st.cfg.Name, direction: string(st.cfg.Direction),
			present: st.built() && st.state != stateMissing, inSync: st.state == stateOK,
			classes: st.view, counters: st.counters, rootStats: st.rootStats,
			tierSums: st.copyTierSums(), perUser: d.plan.Daemon.MetricsPerUser,
			tierCeils: tierCeilsOf(d.plan, &st.cfg),
			nodes:     nodesOf(d.plan, &st.cfg), nodeDrops: maps.Clone(st.nodeDrops)}
		if st.cfg.Shaper == config.ShaperTBF && st.tree().Root != nil {
			s.tbf = st.tree().Root.TBF
		}
		snaps = append(snaps, s)
	}
	d.snap.Store(&snaps)
}

// each calls f for every class of s (a TBF root counts as one class of
// kind "tbf") with its last counters (nil before the first dump) and its
// throughput since the dump before (bits/s; 0 for a TBF root), found by
// handle: the classes are not in handle order after run-time user changes
// (added at the end, a removed one's place taken by the last).
func (s *ifaceSnapshot) each(f func(l model.Labels, rate, ceil uint64, stats *model.Stats, throughput tbf.Rate)) {
	if s.tbf != nil {
		f(model.Labels{Kind: "tbf"}, uint64(s.tbf.Rate), uint64(s.tbf.Rate), s.rootStats, 0)
		return
	}
	for i := 0; i < s.classes.len(); i++ {
		c := s.classes.at(i)
		var stats *model.Stats
		var throughput tbf.Rate
		if j, ok := slices.BinarySearchFunc(s.counters, c.handle, func(x classCounters, h model.Handle) int { return cmp.Compare(x.handle, h) }); ok {
			stats, throughput = &s.counters[j].stats, s.counters[j].throughput
		}
		f(c.labels, uint64(c.rate), uint64(c.ceil), stats, throughput)
	}
}
