// Package simlab validates pkg/sim against the kernel: its tests apply the
// trees the simulator reads to a network-namespace router (pkg/kernel),
// load every user with iperf3 and compare each class's byte rate from the
// kernel's counters with the prediction (scripts/bench-simulate.sh prints
// the tables; SIMLAB_VERBOSE=1 also logs `tc -s class show`). The
// transient test (TestTransientRamp) measures shaperd's 2 s set-rate ramps
// per 100 ms with internal/lab/smoothness and compares them with sim.Run's
// replay of the same kernel writes. Measurement only; nothing imports it.
package simlab
