#!/bin/sh
# bench-classifier.sh: the eBPF classifier's figures (docs/classifier.md).
#   1. p50/p99 of one user's change (a map update) with 100,000 users
#      (BenchmarkUserChangeAt100k);
#   2. TCP throughput through HTB with 10,000 and 100,000 users vs 1 user
#      (TestThroughputIndependentOfUsers, medians of alternating iperf3
#      runs; goal: ratio >= 0.95).
# Needs root (network namespaces, bpf), iperf3, ip, tc.
#
# Usage (from anywhere in the repo): sudo scripts/bench-classifier.sh
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/bpfcls.test" ./pkg/kernel/bpfcls/
"$tmp/bpfcls.test" -test.run '^$' -test.bench UserChangeAt100k -test.benchtime 20000x -test.v | grep -E 'updates at|^Benchmark'
"$tmp/bpfcls.test" -test.run '^TestThroughputIndependentOfUsers$' -test.count 1 -test.v | grep -E 'throughput ratio|FAIL'
SHAPERD_BPF_100K=1 "$tmp/bpfcls.test" -test.run '^TestThroughputIndependentOfUsers$' -test.count 1 -test.v | grep -E 'throughput ratio|FAIL'
