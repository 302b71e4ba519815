#!/usr/bin/env bash
# bench-simulate.sh: the plan simulator's solve time and its prediction
# error against the kernel (every class within 8 % or 0.5 Mbit/s, the
# total within 3 %).
#
# usage: scripts/bench-simulate.sh [-c COUNT] [-N]
#   -c  benchmark repetitions per size, the median is reported (default 5)
#   -N  skip the namespace validation (needs root and iperf3, ~2 min)
#
# (1) pkg/sim's BenchmarkSolve: one HTB interface of 1k/10k/50k users,
#     three tiers, 80 % backlogged. Target: 10k users < 50 ms, growth near
#     linear (time per user at 50k within 2x of that at 1k).
# (2) pkg/sim's BenchmarkRun: the packet-level mode (sim.Run) on the same
#     interface with 10 and 1,000 users, 1514-byte packets: simulated
#     seconds per wall-clock second (no target; reported).
# (3) internal/lab/simlab's TestValidate*: every scenario's prediction-error
#     table (per class, then max and median) from kernel class counters.
# (4) internal/lab/simlab's TestTransientRamp: shaperd's 2 s ramps measured per
#     100 ms at the shaper against sim.Run's replay; the largest and mean
#     window error per ramp (SIMLAB_VERBOSE=1 ... -v prints every window).
# Exit status: 0 when everything ran and met its target, 1 otherwise.
set -uo pipefail

COUNT=5
NETNS=1
while getopts "c:N" opt; do
	case $opt in
	c) COUNT=$OPTARG ;;
	N) NETNS=0 ;;
	*) sed -n '2,20p' "$0"; exit 2 ;;
	esac
done
cd "$(dirname "$0")/.." || exit 1
status=0

echo "== (1) steady-state solve time (go test ./pkg/sim -bench Solve, median of $COUNT)"
out=$(go test ./pkg/sim/ -run '^$' -bench 'Solve' -benchtime 20x -count "$COUNT" 2>&1) || { echo "$out"; exit 1; }
echo "$out" | awk '
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
$1 ~ /^BenchmarkSolve\/users=/ && $4 == "ns/op" {
	split($1, p, "="); n = p[2]; sub(/-[0-9]+$/, "", n); n += 0
	k = ++cnt[n]; ns[n, k] = $3; sizes[n] = 1
}
END {
	printf "%8s %12s %14s\n", "users", "median ms", "ns per user"
	split("1000 10000 50000", order, " ")
	for (i = 1; i <= 3; i++) {
		n = order[i]; if (!(n in sizes)) continue
		delete a; for (k = 1; k <= cnt[n]; k++) a[k] = ns[n, k]
		m[n] = median(a, cnt[n])
		printf "%8d %12.2f %14.1f\n", n, m[n] / 1e6, m[n] / n
	}
	ok = (10000 in m) && m[10000] < 50e6 && (50000 in m) && (1000 in m) && m[50000] / 50000 <= 2 * m[1000] / 1000
	print ok ? "target met: 10k users < 50 ms, near-linear growth" : "target missed: 10k users < 50 ms with near-linear growth"
	exit !ok
}' || status=1

echo
echo "== (2) packet-level speed (go test ./pkg/sim -bench Run, median of $COUNT)"
out=$(go test ./pkg/sim/ -run '^$' -bench 'Run' -benchtime 3x -count "$COUNT" 2>&1) || { echo "$out"; exit 1; }
echo "$out" | awk '
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
$1 ~ /^BenchmarkRun\/users=/ {
	split($1, p, "="); n = p[2]; sub(/-[0-9]+$/, "", n); n += 0
	for (i = 2; i < NF; i++) {
		if ($(i+1) == "sim-s/s") sps[n, ++cnt[n]] = $i
		if ($(i+1) == "pkts/sim-s") pk[n] = $i
	}
	sizes[n] = 1
}
END {
	printf "%8s %16s %16s\n", "users", "sim-s per wall-s", "packets per sim-s"
	split("10 1000", order, " ")
	for (k = 1; k <= 2; k++) {
		n = order[k]; if (!(n in sizes)) continue
		delete a; for (i = 1; i <= cnt[n]; i++) a[i] = sps[n, i]
		printf "%8d %16.3f %16d\n", n, median(a, cnt[n]), pk[n]
	}
}'

if [ "$NETNS" = 1 ]; then
	echo
	echo "== (3) prediction error against the kernel (go test ./internal/lab/simlab -run TestValidate)"
	if [ "$(id -u)" != 0 ]; then
		echo "skipped: needs root (network namespaces)"; status=1
	else
		log=$(go test ./internal/lab/simlab/ -run 'TestValidate' -count=1 -v 2>&1)
		rc=$?
		echo "$log" | sed -n 's/^ *validate_integration_test.go:[0-9]*: //p; /^ \{10\}/p' | sed 's/^ \{10\}/  /'
		echo "$log" | grep -E '^(--- FAIL|FAIL|ok)' || true
		[ "$rc" = 0 ] || status=1

		echo
		echo "== (4) transient error: 2 s ramps per 100 ms (go test ./internal/lab/simlab -run TestTransientRamp)"
		log=$(go test ./internal/lab/simlab/ -run 'TestTransientRamp' -count=1 -v 2>&1)
		rc=$?
		echo "$log" | awk '/^=== RUN +TestTransientRamp\// { name = $3; sub(/^[^\/]*\//, "", name); gsub(/_/, " ", name) }
			/largest window error/ { sub(/^ */, ""); print "  " name ": " $0 }
			/attempt [0-9]+ (missed|disturbed)/ { sub(/^.*test.go:[0-9]+: /, ""); print "  " name ": " $0 }'
		echo "$log" | grep -E '^(--- FAIL|FAIL|ok)' || true
		[ "$rc" = 0 ] || status=1
	fi
fi
exit $status
