#!/bin/sh
# bench-limiter.sh: compare tbf.Bucket.Allow with golang.org/x/time/rate's
# Limiter.Allow, serially (BenchmarkAllow) and under b.RunParallel
# (BenchmarkAllowParallel), and at a rate and burst of 1e12 tokens
# (BenchmarkAllowExtreme), and print the ns/op ratio shaperd/xrate.
# Target: ratio <= 0.50 in all three and 0 allocs/op; exits 1 when missed.
#
# Usage (from anywhere in the repo): scripts/bench-limiter.sh [ROUNDS]
# ROUNDS (default 5) runs of the test binary, each one shaperd then xrate,
# so that the two sides of a pair see the same machine load; the ratio is
# the median of the per-round ratios. Plain equivalent without pairing:
#   go test -run '^$' -bench Allow -benchmem -count 5 ./pkg/tbf/
# With BENCHSTAT=1 it also prints benchstat's summary (a benchstat in PATH,
# else `go run golang.org/x/perf/cmd/benchstat@latest`). With TBF_TEST=FILE
# it runs that prebuilt test binary (`go test -c ./pkg/tbf/`) instead of
# building one, e.g. to compare two revisions on the same machine load.
set -eu
rounds=${1:-5}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bin=${TBF_TEST:-}
if [ -z "$bin" ]; then
	bin=$tmp/tbf.test
	go test -c -o "$bin" ./pkg/tbf/
fi
i=0
while [ "$i" -lt "$rounds" ]; do
	"$bin" -test.run '^$' -test.bench 'Allow' -test.benchmem | grep '^Benchmark' | tee -a "$tmp/out"
	i=$((i + 1))
done

if [ "${BENCHSTAT:-0}" = 1 ]; then
	if command -v benchstat >/dev/null 2>&1; then
		benchstat "$tmp/out" || true
	else
		go run golang.org/x/perf/cmd/benchstat@latest "$tmp/out" || true
	fi
fi

# Lines look like: BenchmarkAllow/shaperd-2  22315154  51.94 ns/op  0 B/op  0 allocs/op
awk '
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
$1 ~ /^Benchmark/ && $4 == "ns/op" {
	name = $1; sub(/-[0-9]+$/, "", name)
	n = split(name, p, "/"); g = p[1]; impl = p[n]
	k = ++cnt[g, impl]; ns[g, impl, k] = $3; sum[g, impl] += $3
	for (i = 5; i < NF; i++) if ($(i+1) == "allocs/op" && $i + 0 > allocs[g, impl]) allocs[g, impl] = $i + 0
	groups[g] = 1
}
END {
	status = 0
	printf "\n%-24s %11s %11s %13s %11s %7s\n", "benchmark", "shaperd ns", "xrate ns", "median ratio", "mean ratio", "allocs"
	for (g in groups) {
		m = cnt[g, "shaperd"] < cnt[g, "xrate"] ? cnt[g, "shaperd"] : cnt[g, "xrate"]
		if (m == 0) continue
		delete r
		for (k = 1; k <= m; k++) r[k] = ns[g, "shaperd", k] / ns[g, "xrate", k]
		med = median(r, m)
		ms = sum[g, "shaperd"] / cnt[g, "shaperd"]; mx = sum[g, "xrate"] / cnt[g, "xrate"]
		printf "%-24s %11.1f %11.1f %13.2f %11.2f %7d\n", g, ms, mx, med, ms / mx, allocs[g, "shaperd"]
		if (med > 0.5 || allocs[g, "shaperd"] > 0) status = 1
	}
	if (status) { print "target missed: shaperd/xrate must be <= 0.50 with 0 allocs/op"; exit 1 }
	print "target met: shaperd/xrate <= 0.50 with 0 allocs/op"
}' "$tmp/out"
