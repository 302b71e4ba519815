#!/bin/sh
# bench-fleet.sh: fleet mode's figures with a real etcd (Debian's etcd-server)
# and three shaperd routers in network namespaces (root): a fleet set-rate's
# propagation to the three kernels (p50/p99), the time until a plan of
# USERS users is in force on all three, and etcd's database size.
#   USERS=10000 SETRATES=50 scripts/bench-fleet.sh
set -eu
cd "$(dirname "$0")/.."
SHAPERD_BENCH_FLEET=1 SHAPERD_BENCH_USERS="${USERS:-10000}" SHAPERD_BENCH_SETRATES="${SETRATES:-50}" \
	go test ./cmd/shaperd/ -run '^TestFleetBench$' -count=1 -v -timeout 15m | grep -E 'BENCH|FAIL|ok|PASS|---'
