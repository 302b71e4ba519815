// Package daemon is shaperd's running daemon: it wires config, policy,
// model and kernel together.
//
// One goroutine (the loop started by Run) owns all state: the Plan, the
// overrides, the quota usage, and per managed interface its class
// Assignment, the desired Tree and the last dump. It reacts to
//
//   - the policy tick (policy.interval; RampStep, 250 ms, while a ramp is
//     in progress): policy.Evaluate and model.Build run only when something
//     can have changed since the last evaluation (a reload, an override,
//     quota usage that moved, the next wall-clock minute where schedules
//     and quota periods turn, an override's expiry: policy.NextChange);
//     otherwise a tick steps only the ramping classes
//     (policy.Ramper.StepActive) or does nothing. Changes reach the kernel
//     without a dump when it held the previous desired tree: the diff of
//     the old and new desired trees, or one OpChange per ramping class;
//   - the reconcile tick (daemon.reconcile_interval): an interface is
//     dumped, diffed, repaired and verified when it is not ok, when no
//     traffic-control events arrive, or every
//     daemon.full_reconcile_interval. Counters are read when something
//     needs them (status, top, a /metrics scrape, quotas), not by the tick;
//   - traffic-control events made by other programs: the device is
//     reconciled after a short settle time;
//   - link events: a managed interface that appears (or comes back) is
//     reconciled after a short settle time (Options.LinkSettle);
//   - reload requests (SIGHUP, shaperctl reload): the new config is loaded,
//     validated and built first and swapped in only when all of that works,
//     so a refused reload writes nothing to the kernel;
//   - control requests (control.Service): set-rate and clear change the
//     overrides, which are saved crash-safely in state_dir before the
//     immediate policy step that applies them (for a user: that user alone
//     is re-evaluated and only their classes are rebuilt and changed);
//     run-time user changes (shaperctl user) are checked against indexes
//     by name and address, journaled (state_journal.go) and patched in
//     place, only that user's class and filters reaching the kernel, in
//     time that does not grow with the number of users.
//
// Stopping (Run's context ends) leaves the shaping in place; the next start
// adopts it: class minors come from the state file (or, without it, from
// the kernel's tree with model.AssignmentFromTree), so the first reconcile
// finds nothing to change and writes nothing. The Ramper is seeded with the
// adopted tree's rates, so a plan changed meanwhile ramps from them rather
// than jumping.
//
// Each managed interface has a reconciler with one state (pending, ok,
// degraded, failed, missing). Every change reaches the kernel through
// Daemon.apply, a delta without a dump when the reconciler is ok, else a
// full pass (dump, diff, apply, verify), and every apply ends in one
// post-apply hook (afterApply) that counts, reports refusals, starts quota
// usage and moves the state.
//
// Files, by the part of the daemon they hold:
//
//   - daemon.go: Options, the Daemon (its state in groups), New, Close;
//   - run.go, run_once.go: Run (control socket, /metrics, the loop), Once
//     and Teardown;
//   - loop.go, loop_events.go: the event loop (ticks, link and
//     traffic-control events, requests) and what follows each pass
//     (afterReconcile);
//   - reconciler*.go: one managed interface: its state and desired tree
//     (reconciler.go), the apply entry point and post-apply hook
//     (reconciler_apply.go), refusals, counters;
//   - desired*.go: what changes the desired trees: the policy step, ramp
//     steps, run-time user patches, the ramps' seeds, policy events and
//     the quota counters' reads;
//   - reload.go, leaves.go, classifier.go: reloading the configuration,
//     the leaf qdisc kinds and the classifier (u32 or bpf) per interface;
//   - service*.go: the control service (control.Service): set-rate,
//     status, top, quota reset, run-time users;
//   - metrics*.go: the Prometheus collectors, which read copies the loop
//     publishes (metrics_snapshot.go), never the loop's state;
//   - memory.go: the one place memory is returned to the OS;
//   - state*.go: the state files in daemon.state_dir (written, journaled
//     and locked with internal/statefile);
//   - fleet.go: fleet mode; notify.go: the service manager (sd_notify);
//   - offline*.go: the dry runs on the daemon's state (simulate, the plan
//     diff of --check --diff and reload --dry-run); --check itself is
//     internal/check.
//
// Time comes from the injected Clock; the kernel is behind the Kernel
// interface, so the loop is tested with a fake clock and modeltest.MemKernel.
package daemon
