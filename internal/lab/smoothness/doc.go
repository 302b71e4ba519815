// Package smoothness measures how smoothly a rate change reaches the kernel:
// in a netnslab router lab it installs a shaperd tree (an HTB user class, or
// a TBF root), saturates it with an iperf3 download, samples the shaper's
// exit byte counter (the user class's, or the TBF qdisc's) every 100 ms and
// changes the rate in one of two ways:
//
//   - WayShaperd: the daemon itself (internal/daemon, run in-process by
//     internal/lab/daemonlab on the router's kernel, its writes recorded):
//     set-rate through its control API, then its own policy ticker ramps
//     the change, every step on its own path (policy step, the incremental
//     desired tree, kernel.Apply, kernel.Verify);
//   - WayNaive: one `tc class change` (HTB, tc's default burst) or
//     `tc qdisc change` (TBF, the configured burst) straight to the new rate.
//
// Run returns the per-window series and the verdicts against what a smooth
// rate change must do (no overshoot, no dip, a bounded settling time, no
// burst released by the change itself): the highest window (target: at most max(old, new) * 1.05), the lowest
// window starting at least 1 s after the change (target: at least
// min(old, new) * 0.9), the time until the new rate is reached within 5%
// for good (target: ramp + 0.5 s) and the bytes released above the rates
// that were installed (the bursts that changes granted).
//
// Run needs real time: the clock is injected (Options.Clock), the lab
// comes from the caller. Evaluate (verdicts) and Format (the side-by-side
// table) are pure.
package smoothness
