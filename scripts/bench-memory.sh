#!/usr/bin/env bash
# bench-memory.sh: the daemon's memory with many users, as the unit runs it
# (inside a network namespace, real kernel): for each USERS count (default
# 10000 and 60000) TestRSS10kUsers runs shaperd shaping one direction
# (egress) and both directions, and this prints, per run, the time to the
# first apply, VmRSS after it, the idle VmRSS (median of 30 s), VmHWM (the
# peak, reached during the first apply) and the idle VmRSS split into
# anonymous memory and the binary's pages. One HTB tree holds at most 65,279
# users: 100,000 need per-queue trees (-q). Goals: idle <= 60 MB at 10,000
# users (both directions), <= 300 MB at 100,000.
#
# Usage (root): scripts/bench-memory.sh [-q QUEUES] [-d egress|both]
#                   [-m MEMORY_LIMIT] [-p PROFILE_DIR] [USERS...]
#   -q N      the LAN device gets N transmit queues and the interfaces
#             queues = N (per-queue trees)
#   -d DIR    only one direction ("egress") or only both ("both")
#   -m SIZE   daemon.memory_limit (e.g. 256mb)
#   -p DIR    heap profiles during the first apply and after the idle time,
#             and a CPU profile of the idle time, into DIR (go tool pprof)
# e.g. scripts/bench-memory.sh 10000; scripts/bench-memory.sh -q 4 -d egress 100000
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-memory.sh: must run as root (network namespaces)" >&2; exit 1; }
env=()
while getopts "q:d:m:p:h" o; do
	case $o in
	q) env+=("SHAPERD_RSS_QUEUES=$OPTARG") ;;
	d) env+=("SHAPERD_RSS_DIRECTION=$OPTARG") ;;
	m) env+=("SHAPERD_RSS_MEMORY_LIMIT=$OPTARG") ;;
	p) mkdir -p "$OPTARG" && env+=("SHAPERD_RSS_PROFILE=$(cd "$OPTARG" && pwd)") ;;
	*) sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(10000 60000)
for n in "${counts[@]}"; do
	echo "== $n users ${env[*]}"
	env "${env[@]}" SHAPERD_RSS_TEST=1 SHAPERD_RSS_USERS="$n" SHAPERD_REQUIRE_NETNS=1 \
		go test -count=1 -run 'TestRSS10kUsers' -v -timeout 60m ./cmd/shaperd 2>&1 |
		grep -E -- '^=== RUN|first apply of|VmRSS after the first apply|VmRSS while idle|VmRSS at the end|memory_limit|not ready|users.toml:|^ *--- |^(ok|FAIL)' |
		sed -e 's/^ *rss_integration_test.go:[0-9]*: /    /'
done
