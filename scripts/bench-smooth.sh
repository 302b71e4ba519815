#!/bin/bash
# bench-smooth.sh: measured smoothness of rate changes (a rate change must
# neither overshoot, dip nor release a burst). In network namespaces, a saturating iperf3 download (4 TCP
# streams) runs through a shaperd tree on the router while the rate changes
# 50 -> 10 Mbit and 10 -> 50 Mbit, on an HTB user class and on a TBF root;
# the shaper's exit byte counter (the class's or the qdisc's, read with
# pkg/kernel's Dump) is sampled every 100 ms. Each case runs twice:
#   shaperd: `set-rate` override, policy.Ramper over a 2 s ramp, one step per
#            policy tick (Build, Dump, Diff, Apply, Verify: the daemon's path);
#   naive:   one `tc class change` (tc's default burst) / `tc qdisc change`
#            (the configured burst) straight to the new rate.
# Printed per case: max 100 ms window, min window from 1 s after the change,
# time from which every window has reached the new rate within 5% (at most
# new*1.05 after a decrease, at least new*0.95 after an increase), bytes released above
# the installed rates (bursts granted by changes), kernel writes, missed
# targets, and the per-100 ms series. Needs root, ip, tc and iperf3.
#
# Usage (from anywhere in the repo): scripts/bench-smooth.sh
#   SHAPERD_SMOOTH_TBF_BURST=256kb  TBF burst (tc units; "default": shaperd's
#                                   default, 5 ms of the rate)
#   SHAPERD_SMOOTH_INTERVAL=250ms   policy tick of the shaperd way
# The shaperd way is the daemon itself (in-process, internal/lab/daemonlab):
# set-rate through its control API, ramp steps on its own free-running
# policy ticker, so the first tick after a change falls anywhere in one
# interval (the result shows where).
# Takes about 1-2 minutes (8 measurements of ~7 s, repeated when the shared
# machine disturbs one).
set -euo pipefail
cd "$(dirname "$0")/.."
SHAPERD_SMOOTH_BENCH=1 go test -count=1 -timeout 10m -run '^TestBenchSmooth$' -v ./internal/lab/smoothness/ 2>&1 |
	grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS$' -e '^ok '
