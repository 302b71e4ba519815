// Package policy decides what rate, ceiling and burst every user, tier
// aggregate, default class and interface should have now, and how to get
// there smoothly. It is pure: no goroutines, timers, files or clocks; time
// is always passed in.
//
// Evaluate is a pure function of (plan, overrides, usage, now): it returns a
// Result with one model.Targets per managed interface (in plan order) and an
// Explanation per user and interface saying why the user has the rates it has.
// A Ramper turns a sequence of Results into the Targets to apply at each
// policy tick, moving every changed class linearly to its new rates and
// choosing bursts so a change never releases more than it should.
//
// The package imports pkg/tbf, pkg/model and pkg/config: it reads the
// validated config.Plan directly instead of re-declaring tiers, schedules and
// quotas.
//
// # Precedence
//
// For a user on one interface (egress interfaces use the tier's
// rate/ceil, ingress interfaces upload_rate/upload_ceil), from strongest to
// weakest:
//
//  1. a user override (`shaperctl set-rate alice ...`)
//  2. a tier override (`set-rate tier:gold ...`), for every user of the tier
//  3. the quota: a user at or over its tier's quota is capped at
//     over_quota_rate/over_quota_ceil (min of those and what rules 4-6 give:
//     a quota never raises a rate), in both directions, until the period ends
//  4. the user's own rate/ceil/upload_rate/upload_ceil in users.toml
//  5. the first of the tier's schedules that contains now (read in
//     plan.Policy.Location), as config.Schedule.Contains defines it
//  6. the tier's rates
//
// A user's own burst, cburst, prio, quota, quota_period, over_quota_rate
// and over_quota_ceil in users.toml replace the tier's keys of the same
// name, key by key (config.TierFor); rule 3 then uses the user's quota
// settings. A user's leaf_qdisc (with its parameters) replaces the tier's,
// which replaces the interface's; queue_latency likewise (leaf.go).
//
// So an operator's user override wins over everything, including an exceeded
// quota. An override sets rate and ceil (Ceil 0 means Rate: `set-rate alice
// 3mbit` gives alice 3mbit guaranteed and as ceiling).
//
// An `iface:NAME` override sets the interface's total bandwidth: the HTB root
// class's rate and ceil, or the TBF rate (it is the only way to retune a TBF
// interface at run time). It matches every direction configured for NAME,
// or one ingress entry by its IFB device name. It does not touch the users'
// rates (HTB never lets them borrow more than the root has anyway).
//
// # Directions
//
// An override has a Direction: DirDownload applies on egress interfaces,
// DirUpload on ingress ones, DirBoth (the zero value, and every override of
// a state file written before directions existed) on both. For one target
// and interface the override set for that direction wins over the one for
// both (Overrides.For); setting one for both replaces the target's directed
// ones. A user or tier override for both directions gives downloads its
// rates as set and uploads the same scaled by the tier's own upload/download
// ratio (UploadScale): on a 50/100 down, 10/20 up tier, 30/40mbit gives
// 6/8mbit up. The ratio of a tier without upload rates of its own is 1. An
// iface override for both directions sets every interface of the name alike.
//
// The default class of an HTB interface gets default_rate/default_ceil when
// configured, else the default_tier's rates after rules 2, 5 and 6 (a tier
// override of the default tier applies to unclassified traffic too).
//
// # Links of different sizes
//
// One set of tiers may serve interfaces of different bandwidths (a 1gbit
// uplink and a 50mbit building link, or every router of a fleet). On an
// HTB interface a ceil above the interface's configured bandwidth (a
// user's, a tier's or schedule's, the default class's, a tier aggregate's)
// is capped to the bandwidth (capCeilings, Cap): Explanation.CeilCapped
// and UncappedCeil keep the ceil the rules gave and Reason says so.
// Guaranteed rates above the bandwidth are scaled with the others to fit
// it (Oversubscription). CheckWithNotes reports both as notes at the keys
// that set them. Run-time overrides are bounded by the daemon instead
// (a set-rate above the bandwidth is refused: likely a typo).
//
// # Quotas
//
// Usage counts each user's bytes from the kernel's class byte counters,
// summed over all interfaces and directions, and is reset when the period
// rolls over: only when the time is in a later period than the one counted,
// so a clock stepped back never resets it; see Usage.Observe and
// PeriodBounds. A lost usage state is rebuilt from the counters
// (Usage.Rebuild).
//
// # Bursts that do not fit
//
// The kernel keeps an HTB class's buckets as psched ticks of transmission
// in u32 fields, so a class at rate r holds at most tbf.MaxBurst(r) bytes
// (274 bytes at 8bit, 34359 bytes at 1kbit, 65146 at 1900bit). A tier's burst (cburst) that
// is larger than that at the rate (ceil) a user gets is cut to
// tbf.MaxBurst, Explanation.BurstCut is set and the Reason says so
// ("burst 64kb cut to 65146b, ..."): one user's impossible target never
// stops the interface's Build. Check refuses every combination the
// configuration itself produces (a tier rate, schedule, user rate or
// over_quota_rate with the tier's burst), so only run-time overrides
// (`set-rate alice 1900bit` on a tier with a 64kb burst) get a cut burst;
// CheckOverrideBuild builds every override before the daemon accepts it.
//
// # Smooth changes
//
// See Ramper for the ramp rules and burst.go (StepBurst, TBFBudget) for the
// burst rules on HTB and TBF.
package policy
