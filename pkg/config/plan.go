package config

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// Plan is a validated configuration with every default filled in.
// Interfaces and Users keep file order; Tiers are sorted by name.
type Plan struct {
	// Path is the main file as Load was given it; UsersPath is the users
	// file (daemon.users_file joined to Path's directory unless absolute).
	Path, UsersPath string
	Daemon          Daemon
	Policy          Policy
	Interfaces      []Interface
	Tiers           []Tier
	// Nodes are the network behind the router ([nodes.NAME]), parents
	// before their children (by depth, then name).
	Nodes []Node
	Users []User
	// Fleet is the [fleet] table; nil when the router works alone.
	Fleet *Fleet
	// SharedPath names the fleet's shared document the Policy and Tiers
	// come from (LoadShared); empty when they come from Path. UsersPath
	// then names the fleet's users document.
	SharedPath string
	// LeafKinds says which leaf qdisc kinds the running kernel has, as the
	// daemon probed them (kernel.LeafKindsAvailable); a kind missing from
	// the map was not probed and is used as configured. nil: not probed
	// (offline): every leaf is used as configured and an interface without
	// leaf_qdisc keeps the kernel's default (pfifo). Load leaves it nil.
	LeafKinds map[string]bool
	// Links are, by interface name, the largest frame and GSO or GRO
	// aggregate that reach the interface's qdisc, as the daemon measured
	// them (kernel.LinkSizes): they size byte-limited leaves. An interface
	// missing here (or nil: offline) gets the defaults, a 1500-byte MTU
	// and 64 KiB aggregates. Load leaves it nil.
	Links map[string]LinkSizes

	// Notes are remarks on keys of the valid configuration, at the key's
	// position, that `shaperd --check` prints (e.g. a rate written in
	// bytes per second, "10mbps", which is 80mbit).
	Notes []Error

	keys keyPos // where each key is written (see Errorf)
	// nodeAt indexes Nodes by name (see Node).
	nodeAt map[string]int
}

// LinkSizes are the largest packets that reach an interface's qdisc, in
// bytes: Frame (the MTU with the link header and VLAN tags) and Aggregate
// (the largest GSO or GRO aggregate the kernel may hand it). 0: unknown.
type LinkSizes struct {
	Frame, Aggregate tbf.Size
}

// Daemon is the [daemon] table.
type Daemon struct {
	// Socket is the control socket's path. Default /run/shaperd/shaperd.sock.
	Socket string
	// SocketGroup is the group whose members may read (status, top): the
	// socket file's group (mode 0660). Empty: only root and AdminGroup.
	// Default empty. Checked to exist.
	SocketGroup string
	// AdminGroup is the group whose members may also change (set-rate,
	// clear, reload); root always may. When SocketGroup is set too, the
	// socket file gets an ACL entry for it. Empty: only root changes.
	// Default empty. Checked to exist.
	AdminGroup string
	// StateDir keeps state across restarts. Default /var/lib/shaperd.
	StateDir string
	// Metrics is the host:port of the Prometheus endpoint; empty disables
	// it. Default empty (off).
	Metrics string
	// MetricsPerUser is daemon.metrics_per_user: per-user series for every
	// user (true, the default), none (false) or the "top:N" heaviest.
	MetricsPerUser UserMetrics
	// ReconcileInterval is how often the counters are read (status,
	// quotas, metrics) and, without traffic-control events, the kernel
	// dumped, diffed and repaired. Default 5s; at least 100ms.
	ReconcileInterval time.Duration
	// FullReconcileInterval is how often, while traffic-control events
	// report other programs' changes, an interface in sync is dumped,
	// diffed and repaired all the same (a safety net). Default 5m; at
	// least 100ms.
	FullReconcileInterval time.Duration
	// UsersFile is daemon.users_file as written (default "users.toml");
	// Plan.UsersPath is the resolved path.
	UsersFile string
	// LogLevel is daemon.log_level: debug, info (default), warn or error.
	LogLevel slog.Level
	// MaxReloadRemovals is daemon.max_reload_removals: the share of the
	// users in force, in percent, that a reload may remove without being
	// confirmed (see ReloadRemovalsRefused). Default 50; 100 turns the
	// guard off.
	MaxReloadRemovals int
	// MemoryLimit is daemon.memory_limit: the Go runtime's soft memory
	// limit (runtime/debug.SetMemoryLimit) in bytes; 0 (the default):
	// none.
	MemoryLimit tbf.Size
}

// Policy is the [policy] table.
type Policy struct {
	// Interval is the policy tick. Default 1s; more than 0.
	Interval time.Duration
	// Ramp is the default duration of a smooth rate change; 0 changes at
	// once. Default 2s.
	Ramp time.Duration
	// SmoothWindow: after a decrease, keep at most new_rate*SmoothWindow of
	// burst. Default 1s; 0 disables the limit.
	SmoothWindow time.Duration
	// QuotaInterval is how often, while some tier has a quota, the class
	// counters are read for quota decisions (on the policy tick, between
	// the reconcile ticks). Default 1s: a user goes over quota at most
	// about that long after passing it (in a fleet, on every router).
	// Each read is a dump of the interface's classes.
	QuotaInterval time.Duration
	// Location is the time zone schedules and quota periods are read in.
	// policy.timezone: "local" (default), "UTC" or an IANA name.
	Location *time.Location
}

// ShaperKind is interface.shaper. Its values equal model.ShaperKind's.
type ShaperKind string

// Shaper kinds.
const (
	ShaperHTB ShaperKind = "htb" // per-user classes (default)
	ShaperTBF ShaperKind = "tbf" // one token bucket for the whole interface
)

// Direction is interface.direction. Its values equal model.Direction's.
type Direction string

// Directions.
const (
	Egress  Direction = "egress"  // leaving the interface (default; downloads on a LAN port)
	Ingress Direction = "ingress" // arriving, shaped on an IFB device (uploads)
)

// MatchField is interface.match. Its values equal model.MatchField's.
type MatchField string

// Match fields.
const (
	MatchDst MatchField = "dst" // the user's address is the destination (default for egress)
	MatchSrc MatchField = "src" // the user's address is the source (default for ingress)
)

// ClassifierKind is interface.classifier: how packets find their user's
// class (HTB only).
type ClassifierKind string

// Classifiers.
const (
	// ClassifierAuto (the key absent) is ClassifierBPF where the kernel
	// allows it (probed once at start), ClassifierU32 otherwise.
	ClassifierAuto ClassifierKind = ""
	// ClassifierBPF is a cls_bpf program looking addresses up in LPM-trie
	// maps: a user's change is a map update.
	ClassifierBPF ClassifierKind = "bpf"
	// ClassifierU32 is hashed u32 filters.
	ClassifierU32 ClassifierKind = "u32"
)

// Interface is one [[interface]] entry. The same Name may appear once per
// Direction.
type Interface struct {
	// Source is where the entry is written, "FILE:LINE:COL", for messages
	// about it at run time (a leaf qdisc the kernel refuses, ...).
	Source string
	// Name is the Linux interface (at most 15 bytes).
	Name      string
	Shaper    ShaperKind
	Direction Direction
	// IFB is the IFB device for Ingress: interface.ifb or "ifb-"+Name cut
	// to 15 bytes. Unique among IFBs and not the name of a managed
	// interface. Empty for Egress.
	IFB string
	// Bandwidth is the root class's rate and ceil (HTB) or the TBF rate.
	Bandwidth tbf.Rate
	Match     MatchField
	// Takeover allows shaperd to replace a root qdisc on the device that
	// it did not create (another tool's); without it such a root is left
	// alone and the interface fails, naming it. The kernel's default
	// roots (handle 0:, e.g. pfifo_fast, noqueue, mq) are always replaced.
	Takeover bool
	// Classifier is interface.classifier (HTB only); ClassifierAuto when
	// not set.
	Classifier ClassifierKind
	// Queues is interface.queues: 0 or 1 shapes with one HTB tree (the
	// default); N > 1 puts an mq root on the device with one HTB tree per
	// transmit queue and steers each user to its queue; QueuesAuto takes
	// the device's transmit queue count (resolved by the daemon). HTB only;
	// leaf qdiscs are not supported with more than one queue.
	Queues int

	// HTB only. Unclassified traffic goes to a default class. DefaultTier
	// names the tier whose (scheduled) rates it gets; DefaultRate and
	// DefaultCeil, when non-zero, are fixed values that take precedence.
	// With neither set, DefaultRate is Bandwidth/100 (at least 8bit) and
	// DefaultCeil is Bandwidth. So DefaultTier != "" || DefaultRate != 0.
	// DefaultCeil >= DefaultRate whenever DefaultRate != 0.
	DefaultTier              string
	DefaultRate, DefaultCeil tbf.Rate
	// Leaf is the qdisc under every user class and the default class
	// (leaf_qdisc and its parameters); Kind "": shaperd's default, fq_codel
	// where the kernel has it, else a bfifo sized to QueueLatency.
	// Classful, root-only and options-only kinds are refused.
	Leaf Leaf
	// QueueLatency sizes bfifo leaves without leaf_limit (and the bfifo
	// that replaces a kind the kernel lacks): ceil * QueueLatency bytes, at
	// least two full frames. Default DefaultQueueLatency.
	QueueLatency time.Duration

	// Framing is the link's per-packet accounting (keys overhead, mpu,
	// linklayer): the kernel charges every packet len+overhead bytes, at
	// least mpu, in 53-byte cells per 48 bytes on ATM. Zero: Ethernet.
	Framing psched.Framing

	// TBF only. Burst is the bucket size (0: a default from the rate; else
	// at least 1514b), Latency bounds queueing (limit = rate*latency +
	// burst; default 50ms), PeakRate (0: none; else above Bandwidth) needs
	// MTU (the peak bucket's size).
	Burst    tbf.Size
	Latency  time.Duration
	PeakRate tbf.Rate
	MTU      tbf.Size
}

// Tier is one [tiers.NAME] table with its values resolved: Ceil >= Rate,
// UploadCeil >= UploadRate, all at least 8bit.
type Tier struct {
	Name string
	// Source is where the tier's table is written, "FILE:LINE:COL".
	Source string
	// Rate and Ceil apply on Egress interfaces (downloads); Ceil defaults
	// to Rate.
	Rate, Ceil tbf.Rate
	// UploadRate and UploadCeil apply on Ingress interfaces. UploadRate
	// defaults to Rate, UploadCeil to the larger of Ceil and UploadRate.
	UploadRate, UploadCeil tbf.Rate
	// Burst and CBurst are HTB bucket sizes; 0: the default for the rate.
	Burst, CBurst tbf.Size
	// Prio is the HTB priority, 0 (first) to 7. Default 0.
	Prio uint32
	// AggregateRate/AggregateCeil (Egress) and AggregateUploadRate/
	// AggregateUploadCeil (Ingress, defaulting to the Egress values) make
	// a parent class that all of the tier's users share; 0: no such class.
	AggregateRate, AggregateCeil             tbf.Rate
	AggregateUploadRate, AggregateUploadCeil tbf.Rate
	// Schedules replace the tier's rates during their windows; the first
	// one that contains the time applies.
	Schedules []Schedule
	// Quota, when non-zero, is the bytes a user of this tier may move
	// (sent and received, all interfaces) per QuotaPeriod; beyond it the
	// user gets OverQuotaRate/OverQuotaCeil in both directions until the
	// period ends.
	Quota                        tbf.Size
	QuotaPeriod                  Period
	OverQuotaRate, OverQuotaCeil tbf.Rate
	// Leaf is the leaf qdisc of the tier's users (Kind "": the
	// interface's); QueueLatency (0: the interface's) sizes its bfifo.
	Leaf         Leaf
	QueueLatency time.Duration
	// Interfaces names the interfaces ([[interface]] name) the tier's
	// users are shaped on; empty: every HTB interface. A user's own
	// interfaces replace it.
	Interfaces []string
	// ifaceKeys are the key paths of Interfaces' entries (for errors).
	ifaceKeys []string
}

// Period is a quota period; periods start at midnight in Policy.Location,
// weeks on Monday, months on the 1st.
type Period string

// Quota periods.
const (
	PeriodDay   Period = "day"
	PeriodWeek  Period = "week"
	PeriodMonth Period = "month" // the default
)

// User is one [[user]] entry of the users file.
type User struct {
	// Source is where the entry is written, "FILE:LINE:COL".
	Source string
	// Name follows the name rule ([a-z0-9_-]+, at most 64 bytes) and is unique.
	Name string
	// Tier names an existing tier.
	Tier string
	// Node is the name of the node ([nodes.NAME]) the user is behind; ""
	// for none. The users file may write it as the node's path.
	Node string
	// Interfaces names the interfaces the user is shaped on; empty: its
	// tier's (see Plan.UserOn).
	Interfaces []string
	// Prefixes are the user's addresses, masked; a bare address is a /32
	// or /128. No prefix overlaps another user's (or another of the same
	// user's).
	Prefixes []netip.Prefix
	// Rate/Ceil and UploadRate/UploadCeil override the tier's (scheduled)
	// values; 0 keeps the tier's. When a rate is set and its ceil is not,
	// the ceiling is the larger of that rate and the tier's ceil; when a
	// ceil is set and its rate is not, the rate is the smaller of the
	// tier's rate and that ceil. When both are set, ceil >= rate. The
	// policy applies these rules to the tier's current (scheduled) values.
	Rate, Ceil             tbf.Rate
	UploadRate, UploadCeil tbf.Rate
	// Leaf is the user's own leaf qdisc (Kind "": the tier's, else the
	// interface's); QueueLatency (0: the tier's, else the interface's)
	// sizes its bfifo.
	Leaf         Leaf
	QueueLatency time.Duration
	// The user's own HTB and quota settings; each one that is set replaces
	// the tier's (TierFor merges them): Burst, CBurst (0: the tier's),
	// Prio (when PrioSet), Quota (0: the tier's), QuotaPeriod ("": the
	// tier's), OverQuotaRate/OverQuotaCeil (0: the tier's).
	Burst, CBurst                tbf.Size
	Prio                         uint32
	PrioSet                      bool
	Quota                        tbf.Size
	QuotaPeriod                  Period
	OverQuotaRate, OverQuotaCeil tbf.Rate
}

// OwnTierSettings reports whether the user replaces any of its tier's
// burst, cburst, prio or quota settings.
func (u *User) OwnTierSettings() bool {
	return u.Burst != 0 || u.CBurst != 0 || u.PrioSet || u.Quota != 0 || u.QuotaPeriod != "" ||
		u.OverQuotaRate != 0 || u.OverQuotaCeil != 0
}

// TierFor returns the tier settings that apply to user u of tier t: t
// itself when u sets none of its own, else a copy of t with the user's
// burst, cburst, prio, quota, quota_period, over_quota_rate and
// over_quota_ceil in place of the tier's (each only when set). A user's
// over_quota_rate without over_quota_ceil gets a ceil equal to that rate
// when the tier has none above it (the same rule as in a tier).
func TierFor(t *Tier, u *User) *Tier {
	if t == nil || u == nil || !u.OwnTierSettings() {
		return t
	}
	c := *t
	if u.Burst != 0 {
		c.Burst = u.Burst
	}
	if u.CBurst != 0 {
		c.CBurst = u.CBurst
	}
	if u.PrioSet {
		c.Prio = u.Prio
	}
	if u.Quota != 0 {
		c.Quota = u.Quota
	}
	if u.QuotaPeriod != "" {
		c.QuotaPeriod = u.QuotaPeriod
	}
	if u.OverQuotaRate != 0 {
		c.OverQuotaRate = u.OverQuotaRate
		c.OverQuotaCeil = max(u.OverQuotaRate, u.OverQuotaCeil)
		if u.OverQuotaCeil == 0 && t.OverQuotaCeil >= u.OverQuotaRate && t.Quota != 0 {
			c.OverQuotaCeil = t.OverQuotaCeil
		}
	} else if u.OverQuotaCeil != 0 {
		c.OverQuotaCeil = max(u.OverQuotaCeil, c.OverQuotaRate)
	}
	return &c
}

// Tier returns the tier called name.
func (p *Plan) Tier(name string) (*Tier, bool) {
	i := tierIndex(p.Tiers, name)
	if i < 0 {
		return nil, false
	}
	return &p.Tiers[i], true
}

// Rates returns the tier's rate and ceil for direction d.
func (t *Tier) Rates(d Direction) (rate, ceil tbf.Rate) {
	if d == Ingress {
		return t.UploadRate, t.UploadCeil
	}
	return t.Rate, t.Ceil
}

// AggregateRates returns the tier's aggregate rate and ceil for direction
// d; 0, 0 when the tier has no aggregate class.
func (t *Tier) AggregateRates(d Direction) (rate, ceil tbf.Rate) {
	if d == Ingress {
		return t.AggregateUploadRate, t.AggregateUploadCeil
	}
	return t.AggregateRate, t.AggregateCeil
}
