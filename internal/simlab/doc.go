// Package simlab validates pkg/sim against the kernel: its tests apply the
// trees the simulator reads to a network-namespace router (pkg/kernel),
// load every user with iperf3 and compare each class's byte rate from the
// kernel's counters with the prediction (scripts/bench-simulate.sh prints
// the tables; SIMLAB_VERBOSE=1 also logs `tc -s class show`). Measurement
// only; nothing imports it.
package simlab
