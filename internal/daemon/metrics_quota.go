package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaperd/pkg/policy"
)

// quotaSample is one user's quota at the last policy evaluation.
type quotaSample struct {
	user, tier  string
	used, limit uint64
}

// publishQuota publishes the quota of every user with one (from res) for
// the metrics: the collector runs on the scrape's goroutine.
func (d *Daemon) publishQuota(res *policy.Result) {
	var qs []quotaSample
	seen := map[string]bool{}
	for i := range res.Interfaces {
		for _, x := range res.Interfaces[i].Users {
			if x.Quota == nil || seen[x.User] {
				continue
			}
			seen[x.User] = true
			qs = append(qs, quotaSample{user: x.User, tier: x.Tier, used: x.Quota.Used, limit: x.Quota.Limit})
		}
	}
	d.quotaSnap.Store(&qs)
}

var (
	descQuotaUsed  = prometheus.NewDesc("shaperd_quota_used_bytes", "Bytes the user moved in the current quota period (users of tiers with a quota), at the last policy evaluation.", []string{"user", "tier"}, nil)
	descQuotaLimit = prometheus.NewDesc("shaperd_quota_limit_bytes", "The user's quota per period, bytes.", []string{"user", "tier"}, nil)
)

// quotaCollector reports shaperd_quota_used_bytes and
// shaperd_quota_limit_bytes per user with a quota.
type quotaCollector struct{ d *Daemon }

func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descQuotaUsed
	ch <- descQuotaLimit
}

func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.d.quotaSnap.Load()
	if p == nil {
		return
	}
	for _, q := range *p {
		ch <- prometheus.MustNewConstMetric(descQuotaUsed, prometheus.GaugeValue, float64(q.used), q.user, q.tier)
		ch <- prometheus.MustNewConstMetric(descQuotaLimit, prometheus.GaugeValue, float64(q.limit), q.user, q.tier)
	}
}
