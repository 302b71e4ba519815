// Package lab is the home of shaperd's labs and benchmarks: code that tests,
// measures or packages shaperd and is never part of the shipped programs.
//
//   - netnslab: network-namespace routers, iperf3 and a daemon started from
//     the systemd unit's lines, for the integration tests
//   - etcdlab: a throwaway etcd on 127.0.0.1 for the fleet tests
//   - simlab: the simulator's predictions checked against the kernel
//   - smoothness: per-100 ms measurements of rate changes, smooth vs naive
//   - gencfg: generated configurations (check, build, the kernel accepts)
//   - packaging: tests of the .deb and of contrib's dashboard and alerts
//   - benchapply: the apply benchmark's program (scripts/bench-apply.sh)
//
// The product (cmd/shaperd, cmd/shaperctl and everything they import) never
// imports a package under internal/lab; this package's test enforces that.
package lab
