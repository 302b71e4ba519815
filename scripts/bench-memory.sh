#!/usr/bin/env bash
# bench-memory.sh: the daemon's memory with many users, as the unit runs it
# (inside a network namespace, real kernel): for each USERS count (default
# 10000 and 60000; one HTB tree holds at most 65,279 users, so 100,000 need
# per-queue trees, which the test does not build yet) TestRSS10kUsers runs shaperd shaping one direction
# (egress) and both directions, and this prints, per run, the time to the
# first apply, VmRSS after it, the idle VmRSS (median of 30 s) and VmHWM
# (the peak, reached during the first apply). Goals: idle <= 60 MB at 10,000
# users (both directions), peak <= 300 MB at 100,000.
#
# Usage (root): scripts/bench-memory.sh [USERS...]
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-memory.sh: must run as root (network namespaces)" >&2; exit 1; }
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(10000 60000)
for n in "${counts[@]}"; do
	echo "== $n users"
	SHAPERD_RSS_TEST=1 SHAPERD_RSS_USERS=$n SHAPERD_REQUIRE_NETNS=1 \
		go test -count=1 -run 'TestRSS10kUsers' -v -timeout 40m ./cmd/shaperd 2>&1 |
		grep -E -- '^=== RUN|first apply of|VmRSS after the first apply|VmRSS while idle|not ready|users.toml:|^ *--- |^(ok|FAIL)' |
		sed -e 's/^ *rss_integration_test.go:[0-9]*: /    /'
done
