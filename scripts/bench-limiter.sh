#!/bin/sh
# bench-limiter.sh: compare tbf.Bucket.Allow with golang.org/x/time/rate's
# Limiter.Allow (serial and b.RunParallel) and print the ns/op ratio
# shaperd/xrate (target: <= 0.5 in both, 0 allocs).
#
# Usage: scripts/bench-limiter.sh [COUNT]   (default 5; from the repo root)
# With BENCHSTAT=1 it also runs `go run golang.org/x/perf/cmd/benchstat@latest`
# (or a benchstat in PATH) on the raw results.
set -eu
count=${1:-5}
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT

go test -run '^$' -bench 'Allow' -benchmem -count "$count" ./pkg/tbf/ | tee "$out"

if [ "${BENCHSTAT:-0}" = 1 ]; then
	if command -v benchstat >/dev/null 2>&1; then
		benchstat "$out" || true
	else
		go run golang.org/x/perf/cmd/benchstat@latest "$out" || true
	fi
fi

# Benchmark lines look like:
# BenchmarkAllow/shaperd-2  22315154  51.94 ns/op  0 B/op  0 allocs/op
awk '
$1 ~ /^Benchmark/ && $4 == "ns/op" {
	name = $1; sub(/-[0-9]+$/, "", name)          # drop -GOMAXPROCS
	n = split(name, p, "/"); group = p[1]; impl = p[n]
	sum[group, impl] += $3; cnt[group, impl]++
	if ($3 < best[group, impl] || best[group, impl] == "") best[group, impl] = $3
	for (i = 5; i < NF; i++) if ($(i+1) == "allocs/op" && $i + 0 > allocs[group, impl]) allocs[group, impl] = $i + 0
	groups[group] = 1
}
END {
	status = 0
	printf "\n%-24s %12s %12s %10s %10s %s\n", "benchmark", "shaperd ns", "xrate ns", "mean ratio", "best ratio", "allocs"
	for (g in groups) {
		if (!cnt[g, "shaperd"] || !cnt[g, "xrate"]) continue
		ms = sum[g, "shaperd"] / cnt[g, "shaperd"]; mx = sum[g, "xrate"] / cnt[g, "xrate"]
		r = ms / mx; rb = best[g, "shaperd"] / best[g, "xrate"]
		printf "%-24s %12.1f %12.1f %10.2f %10.2f %d\n", g, ms, mx, r, rb, allocs[g, "shaperd"]
		if (r > 0.5 || allocs[g, "shaperd"] > 0) status = 1
	}
	if (status) print "target missed: shaperd/xrate must be <= 0.50 with 0 allocs/op"
	else print "target met: shaperd/xrate <= 0.50 with 0 allocs/op"
}' "$out"
