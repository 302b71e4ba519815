package daemon

import (
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// daemonStats are the daemon's own counters, safe for concurrent use.
type daemonStats struct {
	reconcileSeconds prometheus.Histogram
	reconciles       *prometheus.CounterVec // result="ok"|"error"
	writes           prometheus.Counter
	errors           *prometheus.CounterVec // kind="kernel"|"verify"|"build"|"state"
	drift            prometheus.Counter
	reloads          *prometheus.CounterVec // result="ok"|"refused"
	stateErrors      *prometheus.CounterVec // file, kind="corrupt"|"read"|"write"
	stateFailing     *prometheus.GaugeVec   // file: 1 while its writes fail
	takeovers        prometheus.Counter
	tcEvents         prometheus.Counter
	policyEvents     *prometheus.CounterVec // kind: see eventKinds
}

func (s *daemonStats) init() {
	s.reconcileSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "shaperd_reconcile_duration_seconds", Help: "Time of one interface's reconcile (dump, diff, apply, verify).",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
	})
	s.reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shaperd_reconciles_total", Help: "Interface reconciles by result (ok, error).",
	}, []string{"result"})
	s.writes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shaperd_kernel_writes_total", Help: "Write requests the kernel accepted (qdiscs, classes, filters).",
	})
	s.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shaperd_errors_total", Help: "Errors by kind: kernel (refused or failed request; one per refused object), verify (kernel differs after apply), build (plan cannot be built), state (state file not written), panic (an internal error while reconciling an interface, recovered).",
	}, []string{"kind"})
	s.drift = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shaperd_drift_repairs_total", Help: "Reconciles that found the kernel changed behind shaperd's back and repaired it.",
	})
	s.takeovers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shaperd_takeovers_total", Help: "Root qdiscs of other tools replaced by shaperd's (interface takeover = true or shaperd --takeover).",
	})
	s.tcEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shaperd_tc_events_total", Help: "Traffic-control changes by other programs on managed interfaces (or notification overruns), each followed by a reconcile of that interface.",
	})
	s.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shaperd_reloads_total", Help: "Configuration reloads by result (ok, refused).",
	}, []string{"result"})
	s.stateErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shaperd_state_errors_total", Help: "State file faults by file and kind: corrupt (unparsable at start, moved aside), read (unreadable at start), write (a save failed).",
	}, []string{"file", "kind"})
	s.stateFailing = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "shaperd_state_write_failing", Help: "1 while the last write of the state file failed (retried on every reconcile tick).",
	}, []string{"file"})
	s.policyEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shaperd_policy_events_total", Help: "Policy events by kind: quota_exceeded, quota_restored, schedule_entered, schedule_left (per tier), override_set, override_expired, override_cleared.",
	}, []string{"kind"})
	for _, k := range eventKinds {
		s.policyEvents.WithLabelValues(k)
	}
	for _, f := range stateFiles {
		for _, k := range []string{StateCorrupt, StateRead, StateWrite} {
			s.stateErrors.WithLabelValues(f, k)
		}
		s.stateFailing.WithLabelValues(f)
	}
	for _, r := range []string{"ok", "error"} {
		s.reconciles.WithLabelValues(r)
	}
	for _, k := range []string{"kernel", "verify", "build", "state", "panic"} {
		s.errors.WithLabelValues(k)
	}
	for _, r := range []string{"ok", "refused"} {
		s.reloads.WithLabelValues(r)
	}
}

// reconcileDone records one reconcile of duration d; a missing interface
// counts as ok (it is waited for, not failed).
func (s *daemonStats) reconcileDone(d time.Duration, err error) {
	s.reconcileSeconds.Observe(d.Seconds())
	if err != nil && !onlyMissing(err) {
		s.reconciles.WithLabelValues("error").Inc()
		return
	}
	s.reconciles.WithLabelValues("ok").Inc()
}

// Registry returns a new registry with the daemon's collectors (classes,
// daemon) and the Go runtime and process collectors.
func (d *Daemon) Registry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(
		&classCollector{d: d},
		&daemonCollector{d: d},
		d.buildInfo(),
		d.quota,
		&quotaCollector{d: d},
		&nodeCollector{d: d},
		&fleetCollector{d: d},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return r
}

// buildInfo is shaperd_build_info: 1, labelled with the daemon's version
// (Options.Version) and the Go version it was built with.
func (d *Daemon) buildInfo() prometheus.Collector {
	v := d.opts.Version
	if v == "" {
		v = "devel"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "shaperd_build_info",
		Help:        "Always 1; the labels are the shaperd version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": v, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// MetricsHandler serves the Prometheus text format of Registry.
func (d *Daemon) MetricsHandler() http.Handler {
	h := promhttp.HandlerFor(d.Registry(), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		d.returnMemory(memScrape, 0)
	})
}

var classLabels = []string{"interface", "direction", "kind", "tier", "user"}

// classCollector reports per-class counters and configured rates from the
// last published snapshot: one series per class and metric, labelled by
// interface, direction, kind (root, default, tier, user, tbf), tier and
// user; user classes only as daemon.metrics_per_user says (all, none or
// the top N by bytes). Cardinality is the number of classes (users + tiers
// + 2 per interface) times six. Per tier and interface it also reports the
// users' summed counters and their number (shaperd_tier_*). Node classes
// are nodeCollector's (shaperd_node_*): these labels cannot tell them apart.
type classCollector struct {
	d *Daemon
}

var (
	descBytes      = prometheus.NewDesc("shaperd_class_bytes_total", "Bytes sent by the class (kernel counter, last dump).", classLabels, nil)
	descPackets    = prometheus.NewDesc("shaperd_class_packets_total", "Packets sent by the class (kernel counter, last dump).", classLabels, nil)
	descDrops      = prometheus.NewDesc("shaperd_class_drops_total", "Packets dropped by the class (kernel counter, last dump).", classLabels, nil)
	descOverlimits = prometheus.NewDesc("shaperd_class_overlimits_total", "Times the class was over its limit (kernel counter, last dump).", classLabels, nil)
	descQueueDelay = prometheus.NewDesc("shaperd_class_queue_delay_seconds", "Time the bytes queued in the class at the last dump take to leave it: backlog over the rate it drains at (throughput within rate and ceil).", classLabels, nil)
	// Rates are in bytes per second, Prometheus's base unit (promtool check
	// metrics refuses bits); multiply by 8 for bits.
	descRate = prometheus.NewDesc("shaperd_class_rate_bytes_per_second", "Rate in force for the class, bytes per second (times 8: tc's bit/s).", classLabels, nil)
	descCeil = prometheus.NewDesc("shaperd_class_ceil_bytes_per_second", "Ceiling in force for the class, bytes per second (times 8: tc's bit/s).", classLabels, nil)
)

func (c *classCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBytes, descPackets, descDrops, descOverlimits, descQueueDelay, descRate, descCeil} {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{descTierBytes, descTierPackets, descTierDrops, descTierUsers, descTierCeilConfigured, descTierCeilEffective} {
		ch <- d
	}
}

func (c *classCollector) Collect(ch chan<- prometheus.Metric) {
	c.d.refreshForScrape()
	p := c.d.snap.Load()
	if p == nil {
		return
	}
	for _, s := range *p {
		collectTiers(ch, s)
		users := userFilter(s, s.perUser) // nil: every user
		i := -1
		s.each(func(l model.Labels, rate, ceil uint64, st *model.Stats, throughput tbf.Rate) {
			i++
			if users != nil && l.Kind == "user" && !users[i] {
				return
			}
			if l.Kind == "node" {
				return // the node collector's, labelled by node
			}
			lv := []string{s.iface, s.direction, l.Kind, l.Tier, l.User}
			ch <- prometheus.MustNewConstMetric(descRate, prometheus.GaugeValue, float64(rate)/8, lv...)
			ch <- prometheus.MustNewConstMetric(descCeil, prometheus.GaugeValue, float64(ceil)/8, lv...)
			if st == nil {
				return
			}
			ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(st.Bytes), lv...)
			ch <- prometheus.MustNewConstMetric(descPackets, prometheus.CounterValue, float64(st.Packets), lv...)
			ch <- prometheus.MustNewConstMetric(descDrops, prometheus.CounterValue, float64(st.Drops), lv...)
			ch <- prometheus.MustNewConstMetric(descOverlimits, prometheus.CounterValue, float64(st.Overlimits), lv...)
			delay := queueDelay(st.Backlog, throughput, tbf.Rate(rate), tbf.Rate(ceil))
			ch <- prometheus.MustNewConstMetric(descQueueDelay, prometheus.GaugeValue, delay.Seconds(), lv...)
		})
	}
}

// daemonCollector reports the daemon's own counters and, per interface,
// whether it exists and whether the kernel held the plan at the last look.
type daemonCollector struct {
	d *Daemon
}

var (
	descPresent = prometheus.NewDesc("shaperd_interface_present", "1 when the managed interface exists.", []string{"interface", "direction"}, nil)
	descInSync  = prometheus.NewDesc("shaperd_interface_in_sync", "1 when the kernel held the plan at the last reconcile.", []string{"interface", "direction"}, nil)
)

func (c *daemonCollector) metrics() []prometheus.Collector {
	s := &c.d.stats
	return []prometheus.Collector{s.reconcileSeconds, s.reconciles, s.writes, s.errors, s.drift, s.reloads,
		s.stateErrors, s.stateFailing, s.takeovers, s.tcEvents, s.policyEvents}
}

func (c *daemonCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics() {
		m.Describe(ch)
	}
	ch <- descPresent
	ch <- descInSync
}

func (c *daemonCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.metrics() {
		m.Collect(ch)
	}
	p := c.d.snap.Load()
	if p == nil {
		return
	}
	for _, s := range *p {
		ch <- prometheus.MustNewConstMetric(descPresent, prometheus.GaugeValue, b2f(s.present), s.iface, s.direction)
		ch <- prometheus.MustNewConstMetric(descInSync, prometheus.GaugeValue, b2f(s.inSync), s.iface, s.direction)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
