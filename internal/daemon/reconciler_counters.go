package daemon

import (
	"cmp"
	"slices"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// A reconciler's counters: each dump's (or counter read's) class counters,
// the throughput and tier sums derived from them, and the quota usage they
// feed.

// classCounters are one class's counters in a dump and its throughput
// (bits/s) since the dump before.
type classCounters struct {
	handle     model.Handle
	stats      model.Stats
	throughput tbf.Rate
}

// sample records a dump's counters: throughput per class from the byte
// counter's change since the previous dump, and quota usage per user.
func (d *Daemon) sample(st *reconciler, actual model.Tree, now time.Time) {
	dt := now.Sub(st.dumpAt)
	prev := st.counters
	next := make([]classCounters, 0, len(actual.Classes))
	j := 0
	for _, c := range actual.Classes {
		if c.Stats == nil {
			continue
		}
		cc := classCounters{handle: c.Handle, stats: *c.Stats}
		for j < len(prev) && prev[j].handle < c.Handle {
			j++
		}
		if j < len(prev) && prev[j].handle == c.Handle && dt > 0 && c.Stats.Bytes >= prev[j].stats.Bytes {
			cc.throughput = bitsPerSecond(c.Stats.Bytes-prev[j].stats.Bytes, dt)
		}
		if j < len(prev) && prev[j].handle == c.Handle {
			st.addTierCounts(c.Handle, *c.Stats, &prev[j].stats)
			st.addNodeDrops(c.Handle, *c.Stats, &prev[j].stats)
		} else {
			st.addTierCounts(c.Handle, *c.Stats, nil)
			st.addNodeDrops(c.Handle, *c.Stats, nil)
		}
		if d.quotas && c.Handle.Minor() >= model.FirstUserMinor &&
			(j >= len(prev) || prev[j].handle != c.Handle || prev[j].stats.Bytes != c.Stats.Bytes) {
			d.policyDirty = true // quota usage may have moved across a limit
		}
		next = append(next, cc)
		if u, ok := userOfHandle(st, c.Handle); ok {
			d.usage.Observe(u, counterKey(st, c.Handle), c.Stats.Bytes, now)
		}
	}
	st.counters, st.dumpAt, st.rootStats = next, now, nil
	d.counterReads++
	if actual.Root != nil && actual.Root.Stats != nil {
		s := *actual.Root.Stats
		st.rootStats = &s
	}
	d.publish()
}

// counter returns the counters of class h in the last dump.
func (st *reconciler) counter(h model.Handle) (classCounters, bool) {
	i, ok := slices.BinarySearchFunc(st.counters, h, func(c classCounters, h model.Handle) int { return cmp.Compare(c.handle, h) })
	if !ok {
		return classCounters{}, false
	}
	return st.counters[i], true
}

// counterKey names class h of st for policy.Usage.
func counterKey(st *reconciler, h model.Handle) string {
	return policy.CounterKey(st.cfg.Name, st.cfg.Direction, h.String())
}

// addTierCounts adds user class h's counter change since the previous
// dump (before; nil when h was not in it) to its tier's sums. A class seen
// for the first time adds its whole counter: the tier's totals are the
// kernel's, so that they carry on across a restart of the daemon (as the
// classes' own counters do) instead of starting again at 0. A counter
// that went back (the class was recreated) counts from 0.
func (st *reconciler) addTierCounts(h model.Handle, now model.Stats, before *model.Stats) {
	if st.want == nil {
		return
	}
	if before == nil {
		before = &model.Stats{}
	}
	i, ok := st.want.Index(h)
	if !ok {
		return
	}
	l := st.tree().Classes[i].Labels
	if l.Kind != "user" || l.Tier == "" {
		return
	}
	if st.tierSums == nil {
		st.tierSums = map[string]*tierCounts{}
	}
	t := st.tierSums[l.Tier]
	if t == nil {
		t = &tierCounts{}
		st.tierSums[l.Tier] = t
	}
	t.bytes += grown(now.Bytes, before.Bytes)
	t.packets += grown(now.Packets, before.Packets)
	t.drops += grown(uint64(now.Drops), uint64(before.Drops))
}

// grown is how much a counter grew from before to now; a counter that
// went back was reset and grew by now.
func grown(now, before uint64) uint64 {
	if now >= before {
		return now - before
	}
	return now
}

// copyTierSums is a copy of st's sums for a snapshot.
func (st *reconciler) copyTierSums() map[string]tierCounts {
	out := make(map[string]tierCounts, len(st.tierSums))
	for k, v := range st.tierSums {
		out[k] = *v
	}
	return out
}

// readCounters samples st's counters with kernel.Counters; it reports
// false (the caller reconciles instead) when they cannot be read or the
// root is gone.
func (d *Daemon) readCounters(st *reconciler, now time.Time) bool {
	actual, err := d.k.Counters(st.tree().Device)
	if err != nil || actual.Root == nil {
		return false
	}
	d.sample(st, actual, now)
	return true
}

// queueDelay is how long a class's queued bytes take to leave it: its
// leaf's backlog (bytes, the last dump) over the rate it drains at. A
// class with a backlog is served at least at its rate in force and at most
// at its ceiling, so the drain rate is its measured throughput (bits/s over
// the last sampling interval) held within [rate, ceil]: a backlog that just
// arrived at an idle class is not divided by the idle interval's
// throughput. 0 with an empty queue or no rate at all.
func queueDelay(backlog uint32, throughput, rate, ceil tbf.Rate) time.Duration {
	drain := max(throughput, rate)
	if ceil > 0 {
		drain = min(drain, ceil)
	}
	if backlog == 0 || drain == 0 {
		return 0
	}
	return time.Duration(float64(backlog) * 8 / float64(drain) * float64(time.Second))
}
