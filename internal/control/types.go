package control

import (
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Status is everything shaperctl status and top show: the managed interfaces
// and every user's configured and effective shaping with measured traffic.
// A user shaped on two interfaces (download and upload) appears twice in
// Users, once per interface.
type Status struct {
	Interfaces []InterfaceStatus `json:"interfaces"`
	Users      []UserStatus      `json:"users"`
	// Generated is when the daemon assembled this status (its clock).
	Generated time.Time `json:"generated"`
	// StateProblems are faults of the state files in daemon.state_dir
	// (corrupt at start, or failing to be written now); none when empty.
	StateProblems []StateProblem `json:"state_problems,omitempty"`
	// LastReload is the last reload's time and result; nil when the daemon
	// has not reloaded since it started.
	LastReload *ReloadStatus `json:"last_reload,omitempty"`
	// Overrides lists every override in force (see shaperctl overrides).
	Overrides []OverrideStatus `json:"overrides,omitempty"`
	// Fleet is the router's fleet link; nil without [fleet].
	Fleet *FleetStatus `json:"fleet,omitempty"`
}

// FleetStatus is a fleet router's view of the fleet: the link to etcd,
// the shared plan revision in force and what it refused.
type FleetStatus struct {
	Router    string `json:"router"`
	Prefix    string `json:"prefix"`
	Connected bool   `json:"connected"`
	// Revision is the shared plan revision in force (0: the local file's
	// plan); PushedAt when it was pushed.
	Revision int64      `json:"revision"`
	PushedAt *time.Time `json:"pushed_at,omitempty"`
	// Refused is the newest revision refused (0: none), Errors why, and
	// fleet overrides that cannot apply here.
	Refused int64    `json:"refused_revision,omitempty"`
	Errors  []string `json:"errors,omitempty"`
	// Overrides is how many fleet overrides are in force.
	Overrides int `json:"overrides" out:"override_count"`
}

// StateProblemWrite is StateProblem.Kind of a state file the daemon cannot
// write now (the others, "corrupt" and "read", were met at start).
const StateProblemWrite = "write"

// StateProblem is a fault of one state file in daemon.state_dir. Shaping
// goes on regardless; this says what was lost or is not being saved.
type StateProblem struct {
	// File is the state file's name, e.g. "usage.json".
	File string `json:"file"`
	// Kind is "corrupt" (unparsable at start, moved aside to MovedTo),
	// "read" (unreadable at start) or "write" (the last save failed; it is
	// retried on every reconcile tick and the problem goes once it works).
	Kind string `json:"kind"`
	// Error is the parse, read or write error, naming the file.
	Error string `json:"error"`
	// Since is when the daemon first met the problem (its clock).
	Since time.Time `json:"since"`
	// MovedTo is the path a corrupt file was moved to.
	MovedTo string `json:"moved_to,omitempty"`
	// Effect says what the daemon did about it: what it recovered and what
	// is lost.
	Effect string `json:"effect,omitempty"`
}

// InterfaceStatus is one managed interface.
type InterfaceStatus struct {
	// Name is the configured interface ("lan0").
	Name string `json:"name" out:"interface"`
	// Device carries the shaper: Name for egress, the IFB device for ingress.
	Device string `json:"device"`
	// Shaper is "htb" or "tbf" (model.ShaperKind as a string).
	Shaper string `json:"shaper"`
	// Direction is "egress" or "ingress" (model.Direction as a string);
	// shaperctl --json prints it as interface_direction and direction as
	// the users' word for it (Extra).
	Direction string `json:"direction" out:"interface_direction"`
	// Classifier is how an HTB interface's packets find their class:
	// "bpf" or "u32", as chosen at start (docs/classifier.md); empty for
	// TBF.
	Classifier string `json:"classifier,omitempty"`
	// Bandwidth is the interface's configured capacity ("1gbit").
	Bandwidth tbf.Rate `json:"bandwidth"`
	// Users names the users shaped on this interface, sorted.
	Users []string `json:"users"`
	// Tiers are the tiers in use on this interface, with their rates for this
	// interface's direction.
	Tiers []TierStatus `json:"tiers"`
	// State is "ok" (the kernel held the plan at the last reconcile),
	// "degraded" (the kernel refused some objects, named in Error and in
	// the users' Error; everything else is shaped), "missing" (the
	// interface does not exist; shaped when it appears), "failed" (see
	// Error) or "pending" (not reconciled yet).
	State string `json:"state"`
	// Error is the last failure to apply this interface's plan, e.g. the
	// kernel's refusal naming the object and user; empty when none.
	Error string `json:"error,omitempty"`
	// Foreign describes objects of other tools found on the device at the
	// last dump (a root qdisc shaperd did not create, filters of other
	// kinds or priorities); shaperd leaves them alone.
	Foreign []string `json:"foreign,omitempty"`
	// EffectiveBandwidth is the bandwidth in force (an iface override's
	// rate); 0 when it is Bandwidth, as configured.
	EffectiveBandwidth tbf.Rate `json:"effective_bandwidth,omitempty"`
	// Override is the iface override in force on this interface, if any.
	Override *OverrideStatus `json:"override,omitempty"`
	// DefaultTier is the tier the default class (unknown addresses) follows.
	DefaultTier string `json:"default_tier,omitempty"`
	// Capped lists the ceilings above the interface's configured bandwidth
	// that are capped to it (one plan may serve links of different sizes):
	// "tier gold: ceil 100mbit capped to the bandwidth 50mbit (3 users)".
	Capped []string `json:"capped,omitempty"`
	// Nodes are the nodes ([nodes.NAME]) behind an HTB interface, parents
	// first as configured; none without nodes.
	Nodes []NodeStatus `json:"nodes,omitempty"`
}

// NodeStatus is one node of the network behind an HTB interface: its
// class's rates for the interface's direction, its measured traffic and
// how many users are behind it.
type NodeStatus struct {
	Name string `json:"name" out:"node"`
	// Parent is the node this one is behind; "" for a top-level node (a
	// child of the interface's root class). Path is the names from the
	// top-level node down to this one, joined with "/" ("north/ap-1").
	Parent string `json:"parent,omitempty"`
	Path   string `json:"path"`
	// Rate and Ceil are configured for this direction (rate and ceil on
	// downloads, upload_rate and upload_ceil on uploads).
	Rate tbf.Rate `json:"rate"`
	Ceil tbf.Rate `json:"ceil"`
	// EffectiveRate and EffectiveCeil are in force now: after schedules,
	// node overrides (set-rate node:NAME), the cap to the parent's ceil
	// (the bandwidth for a top-level node), the scaling of oversubscribed
	// guarantees and ramps.
	EffectiveRate tbf.Rate `json:"effective_rate"`
	EffectiveCeil tbf.Rate `json:"effective_ceil"`
	// Reason says why the effective rates are what they are: "node ap-1",
	// "schedule ...", "node override (ap-1) until 12:00", with "; ceil ...
	// capped to ..." or "; oversubscribed xF" when they apply.
	Reason string `json:"reason"`
	// Throughput is the node class's measured rate in bits/s over the
	// daemon's last sampling interval (from the kernel's class byte
	// counters, as a user's); Bytes the class's byte counter since it was
	// created: the traffic of every user behind the node.
	Throughput tbf.Rate `json:"throughput"`
	Bytes      uint64   `json:"bytes"`
	// Drops are the packets dropped by the classes behind the node (the
	// kernel counts drops at the users' leaf classes), their counters
	// summed.
	Drops uint64 `json:"drops"`
	// Users is how many users hang directly from the node, TotalUsers how
	// many are behind it, through its child nodes too.
	Users      int `json:"users" out:"user_count"`
	TotalUsers int `json:"total_users"`
	// Ramp is set while the node's effective ceiling moves smoothly to a
	// new value (a node override with a ramp).
	Ramp *RampStatus `json:"ramp,omitempty" out:"ramping,omitempty"`
}

// Interface states.
const (
	StateOK       = "ok"
	StateDegraded = "degraded"
	StateMissing  = "missing"
	StateFailed   = "failed"
	StatePending  = "pending"
)

// TierStatus is one tier's plan on one interface (upload rates on ingress
// interfaces, download rates on egress ones).
type TierStatus struct {
	Name string `json:"name" out:"tier"`
	// Rate is guaranteed to each user of the tier, Ceil is what each may
	// borrow up to, as configured (schedules and overrides not applied).
	Rate tbf.Rate `json:"rate"`
	Ceil tbf.Rate `json:"ceil"`
	// Override is the tier override in force for this interface's
	// direction, if any, with the rates it gives here (EffectiveRate,
	// EffectiveCeil: scaled on upload for an override of both directions).
	Override      *OverrideStatus `json:"override,omitempty"`
	EffectiveRate tbf.Rate        `json:"effective_rate,omitempty"`
	EffectiveCeil tbf.Rate        `json:"effective_ceil,omitempty"`
	// CappedCeil is the interface's bandwidth when the tier's ceil here
	// (the override's, when one is in force) is above it: each user's ceil
	// is capped to it. 0 when the ceil fits.
	CappedCeil tbf.Rate `json:"capped_ceil,omitempty"`
}

// UserStatus is one user on one interface.
type UserStatus struct {
	Name string `json:"name" out:"user"`
	Tier string `json:"tier"`
	// Source is SourceFile (users.toml) or SourceRuntime (shaperctl user add).
	Source    string `json:"source,omitempty"`
	Interface string `json:"interface"`
	// Rate and Ceil are configured (tier or per-user settings).
	Rate tbf.Rate `json:"rate"`
	Ceil tbf.Rate `json:"ceil"`
	// EffectiveRate and EffectiveCeil are in force now, after schedules,
	// overrides, quotas and ramps.
	EffectiveRate tbf.Rate `json:"effective_rate"`
	EffectiveCeil tbf.Rate `json:"effective_ceil"`
	// Reason says why the effective rates are what they are, for people:
	// "tier", "schedule peak", "override until 12:00", "quota exceeded".
	Reason string `json:"reason"`
	// Throughput is the measured rate in bits/s over the daemon's last
	// sampling interval (from the kernel's class byte counters); 0 when
	// nothing was measured yet.
	Throughput tbf.Rate `json:"throughput"`
	// Bytes and Drops are the kernel's counters for the user's class: bytes
	// sent and packets dropped since the class was created.
	Bytes uint64 `json:"bytes"`
	Drops uint64 `json:"drops"`
	// QueueDelay is how long the bytes queued in the user's class at the
	// last sample take to leave it: the leaf's backlog (kernel counter)
	// over the rate the class drains at (its throughput held within its
	// effective rate and ceil). A Go duration string; "0s" with an empty
	// queue.
	QueueDelay Duration `json:"queue_delay"`
	// Ramp is set while the effective ceiling moves smoothly to a new value.
	Ramp *RampStatus `json:"ramp,omitempty" out:"ramping,omitempty"`
	// Quota is set for users with a data quota.
	Quota *QuotaStatus `json:"quota,omitempty"`
	// Error says why the kernel does not hold this user's plan on this
	// interface (its class or filter was refused, or not applied because
	// something it needs was), or that an old setting is still in force
	// (a change the kernel refused); empty when it does.
	Error string `json:"error,omitempty"`
	// Direction is "download" (an egress interface) or "upload" (ingress).
	Direction string `json:"direction,omitempty"`
	// Device carries the user's class: the interface, or its IFB device
	// for uploads.
	Device string `json:"device,omitempty"`
	// LimitedBy is what keeps the user from more now, from the simulator
	// on measured demand (shaperctl status --explain); empty otherwise.
	LimitedBy string `json:"limited_by,omitempty"`
	// Addresses are the user's configured prefixes ("198.18.1.10/32"), for
	// shaperctl export.
	Addresses []string `json:"addresses,omitempty"`
	// Node is the node ([nodes.NAME]) the user's class hangs from on this
	// interface (InterfaceStatus.Nodes); "" for a user behind none.
	Node string `json:"node,omitempty"`
}

// RampStatus is a smooth change in progress: the effective ceiling goes from
// From to To, arriving at Until.
type RampStatus struct {
	From  tbf.Rate  `json:"from" out:"from_ceil"`
	To    tbf.Rate  `json:"to" out:"to_ceil"`
	Until time.Time `json:"until"`
}

// QuotaStatus is a user's data quota: Used of Limit bytes in the period
// ending at PeriodEnd.
type QuotaStatus struct {
	Used      uint64    `json:"used"`
	Limit     uint64    `json:"limit"`
	PeriodEnd time.Time `json:"period_end"`
}

// SetRateRequest asks for an override of a target's rates.
//
// Target is a user name, "tier:NAME" (every user of the tier) or
// "iface:NAME" (the interface's total bandwidth). Rate is guaranteed and must be
// at least MinRate and at most the bandwidth of the target's interfaces (see
// CheckBound). Ceil is the most the target may borrow up to; nil means Rate
// (the server fills it in, so a Service always sees a non-nil Ceil), and it
// must not be below Rate. Ramp is how long the change takes: nil means the
// policy's default ramp, 0 at once. For is how long the override lasts: nil
// until it is cleared; when set it must be positive.
type SetRateRequest struct {
	Target string    `json:"target"`
	Rate   tbf.Rate  `json:"rate"`
	Ceil   *tbf.Rate `json:"ceil,omitempty"`
	Ramp   *Duration `json:"ramp,omitempty"`
	For    *Duration `json:"for,omitempty"`
	// Direction is "download", "upload" or "" (both; see
	// policy.UploadScale for how a user or tier override of both
	// directions sets uploads). An "iface:NAME/download" target gives it
	// too; the two must agree.
	Direction string `json:"direction,omitempty"`
	// RateText and CeilText are Rate and Ceil as the operator wrote them
	// ("1gbps"), so that messages show what was asked. They travel in place
	// of Rate and Ceil when they read as the same values (see MarshalJSON);
	// empty: the rates' own text form.
	RateText string `json:"-"`
	CeilText string `json:"-"`
}

// SetRateResponse says what a set-rate did.
type SetRateResponse struct {
	// Target is the request's target; Users are the users it affected.
	Target string   `json:"target"`
	Users  []string `json:"users"`
	// Rate and Ceil are the override now in force (the ramp's destination).
	Rate tbf.Rate `json:"rate"`
	Ceil tbf.Rate `json:"ceil"`
	// Ramp is the ramp duration applied (the policy default when the request
	// gave none); 0 means at once.
	Ramp Duration `json:"ramp"`
	// Until is when the override expires; nil until cleared.
	Until *time.Time `json:"until,omitempty"`
	// Direction is "download", "upload" or "both".
	Direction string `json:"direction,omitempty"`
	// UploadRate and UploadCeil are what an override of both directions
	// gives on upload interfaces when the tier's upload/download ratio
	// scales it; 0 when uploads get Rate and Ceil as they are.
	UploadRate tbf.Rate `json:"upload_rate,omitempty"`
	UploadCeil tbf.Rate `json:"upload_ceil,omitempty"`
	// DefaultOf lists the interfaces whose default class (addresses of no
	// user) follows the tier a tier override changes.
	DefaultOf []string `json:"default_of,omitempty"`
}

// ClearRequest removes the overrides of a target (same forms as
// SetRateRequest.Target); the target returns to its plan.
type ClearRequest struct {
	Target string `json:"target"`
	// Direction is "download", "upload" or "" (every override of the
	// target); an "iface:NAME/upload" target gives it too.
	Direction string `json:"direction,omitempty"`
}

// ErrorResponse is the body of every 4xx/5xx answer.
type ErrorResponse struct {
	// Error is a message for people, saying what went wrong and what to do.
	Error string `json:"error"`
	// Target is the unknown target of a 404.
	Target string `json:"target,omitempty"`
	// Problems lists the configuration errors of a refused reload (422),
	// one "file:line:col: message" each.
	Problems []string `json:"problems,omitempty"`
	// Usage is set on a 400 for a malformed value of the command line
	// (BadRequestError.Usage).
	Usage bool `json:"usage,omitempty"`
}
