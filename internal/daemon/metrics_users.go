package daemon

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/policy"
)

// Per-tier sums, the per-user series selection of daemon.metrics_per_user
// and the quota metrics.

// tierCounts are a tier's users' counters on one interface, summed from
// the changes between dumps: they only grow (a user leaving the tier or a
// class being recreated takes nothing away), so they are real Prometheus
// counters. They start at 0 when the daemon starts.
type tierCounts struct {
	bytes, packets, drops uint64
}

var (
	tierLabels      = []string{"interface", "direction", "tier"}
	descTierBytes   = prometheus.NewDesc("shaperd_tier_bytes_total", "Bytes sent by the tier's user classes on the interface: the kernel's class counters (so they carry on across restarts of shaperd), a removed or recreated class's bytes kept (kept whatever daemon.metrics_per_user says).", tierLabels, nil)
	descTierPackets = prometheus.NewDesc("shaperd_tier_packets_total", "Packets sent by the tier's user classes on the interface, from the kernel's class counters.", tierLabels, nil)
	descTierDrops   = prometheus.NewDesc("shaperd_tier_drops_total", "Packets the tier's user classes dropped on the interface, from the kernel's class counters.", tierLabels, nil)
	descTierUsers   = prometheus.NewDesc("shaperd_tier_users", "Users of the tier with a class on the interface.", tierLabels, nil)
	// A tier's ceil above an interface's bandwidth is capped to it: the
	// two differ on such an interface.
	descTierCeilConfigured = prometheus.NewDesc("shaperd_tier_ceil_configured_bytes_per_second", "The tier's ceil for the interface's direction as configured (schedules and overrides not applied), bytes per second.", tierLabels, nil)
	descTierCeilEffective  = prometheus.NewDesc("shaperd_tier_ceil_effective_bytes_per_second", "The tier's configured ceil capped to the interface's configured bandwidth (what its users get at most there), bytes per second.", tierLabels, nil)
)

// collectTiers sends s's per-tier sums, user counts and ceilings.
func collectTiers(ch chan<- prometheus.Metric, s *ifaceSnapshot) {
	for _, c := range s.tierCeils {
		ch <- prometheus.MustNewConstMetric(descTierCeilConfigured, prometheus.GaugeValue, float64(c.configured)/8, s.iface, s.direction, c.tier)
		ch <- prometheus.MustNewConstMetric(descTierCeilEffective, prometheus.GaugeValue, float64(c.effective)/8, s.iface, s.direction, c.tier)
	}
	users := map[string]int{}
	for i := 0; i < s.classes.len(); i++ {
		l := s.classes.at(i).labels
		if l.Kind == "user" {
			users[l.Tier]++
		}
	}
	for tier, n := range users {
		ch <- prometheus.MustNewConstMetric(descTierUsers, prometheus.GaugeValue, float64(n), s.iface, s.direction, tier)
		c := s.tierSums[tier] // zero until counted
		ch <- prometheus.MustNewConstMetric(descTierBytes, prometheus.CounterValue, float64(c.bytes), s.iface, s.direction, tier)
		ch <- prometheus.MustNewConstMetric(descTierPackets, prometheus.CounterValue, float64(c.packets), s.iface, s.direction, tier)
		ch <- prometheus.MustNewConstMetric(descTierDrops, prometheus.CounterValue, float64(c.drops), s.iface, s.direction, tier)
	}
	for tier, c := range s.tierSums {
		if _, ok := users[tier]; ok {
			continue
		}
		// A tier whose users all left keeps its counters (they never go back).
		ch <- prometheus.MustNewConstMetric(descTierUsers, prometheus.GaugeValue, 0, s.iface, s.direction, tier)
		ch <- prometheus.MustNewConstMetric(descTierBytes, prometheus.CounterValue, float64(c.bytes), s.iface, s.direction, tier)
		ch <- prometheus.MustNewConstMetric(descTierPackets, prometheus.CounterValue, float64(c.packets), s.iface, s.direction, tier)
		ch <- prometheus.MustNewConstMetric(descTierDrops, prometheus.CounterValue, float64(c.drops), s.iface, s.direction, tier)
	}
}

// userFilter returns which user classes of s get series under m: nil
// when every user does; else the set of class indexes that do (empty for
// m.None; for m.Top the Top user classes with the most bytes in the last
// dump, ties by user name).
func userFilter(s *ifaceSnapshot, m config.UserMetrics) map[int]bool {
	switch {
	case m.None:
		return map[int]bool{}
	case m.Top <= 0:
		return nil
	}
	type ranked struct {
		i     int
		user  string
		bytes uint64
	}
	var users []ranked
	j := 0
	for i := 0; i < s.classes.len(); i++ {
		h, l := s.classes.at(i).handle, s.classes.at(i).labels
		for j < len(s.counters) && s.counters[j].handle < h {
			j++
		}
		if l.Kind != "user" {
			continue
		}
		r := ranked{i: i, user: l.User}
		if j < len(s.counters) && s.counters[j].handle == h {
			r.bytes = s.counters[j].stats.Bytes
		}
		users = append(users, r)
	}
	slices.SortFunc(users, func(a, b ranked) int {
		if c := cmp.Compare(b.bytes, a.bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.user, b.user)
	})
	keep := make(map[int]bool, m.Top)
	for _, u := range users[:min(m.Top, len(users))] {
		keep[u.i] = true
	}
	return keep
}

// quotaStats are shaperd_users_over_quota and shaperd_quota_exhausted_total.
type quotaStats struct {
	over      *prometheus.GaugeVec
	exhausted *prometheus.CounterVec
	// overUsers are the users over quota at the last evaluation (owned by
	// the loop); nil before the first.
	overUsers map[string]bool
}

func newQuotaStats() *quotaStats {
	return &quotaStats{
		over:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shaperd_users_over_quota", Help: "Users of the tier over their quota at the last policy evaluation (tiers with a quota)."}, []string{"tier"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shaperd_quota_exhausted_total", Help: "Times a user of the tier went over quota (seen at a policy evaluation; users already over quota at the daemon's first evaluation are not counted)."}, []string{"tier"}),
	}
}

func (q *quotaStats) Describe(ch chan<- *prometheus.Desc) {
	q.over.Describe(ch)
	q.exhausted.Describe(ch)
}

func (q *quotaStats) Collect(ch chan<- prometheus.Metric) {
	q.over.Collect(ch)
	q.exhausted.Collect(ch)
}

// observe records an evaluation of plan: per tier with a quota, how many
// users are over it, and which went over since the last evaluation.
func (q *quotaStats) observe(plan *config.Plan, res *policy.Result) {
	over := map[string]bool{}
	perTier := map[string]int{}
	for _, t := range plan.Tiers {
		if t.Quota != 0 {
			perTier[t.Name] = 0
		}
	}
	for _, in := range res.Interfaces {
		for _, x := range in.Users {
			if x.Quota == nil || !x.Quota.Exceeded || over[x.User] {
				continue
			}
			over[x.User] = true
			perTier[x.Tier]++
			if q.overUsers != nil && !q.overUsers[x.User] {
				q.exhausted.WithLabelValues(x.Tier).Inc()
			}
		}
	}
	q.over.Reset()
	for tier, n := range perTier {
		q.over.WithLabelValues(tier).Set(float64(n))
		q.exhausted.WithLabelValues(tier)
	}
	q.overUsers = over
}
