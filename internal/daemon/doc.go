// Package daemon is shaperd's running daemon: it keeps the kernel's traffic
// control in step with the plan while the plan, the overrides, the quotas,
// the clock and the kernel change.
//
// One goroutine (the loop started by Run) owns all state. It reacts to the
// policy tick, the reconcile tick, traffic-control and link events, reload
// requests and control requests; every change reaches the kernel through
// one apply path per managed interface (a reconciler with a state: pending,
// ok, degraded, failed, missing). Stopping leaves the shaping in place and
// the next start adopts it with zero kernel writes.
//
// docs/architecture.md describes the loop, the daemon's files and the
// packages around it (offline checks are internal/check, state files
// internal/statefile).
package daemon
