#!/usr/bin/env bash
# A day on a router, compressed: shaperd started as its systemd unit starts it
# in a router lab of network namespaces, real iperf3 traffic (downloads and
# uploads, IPv4 and IPv6), and a seeded, reproducible stream of operations and
# faults (set-rate/clear, run-time users, reloads valid and invalid, SIGHUP
# storms, kill -9 also during a first apply, restarts, interfaces and the IFB
# deleted, classes and filters changed by hand, a foreign filter, state_dir
# read-only; with --fleet etcd outages and fleet overrides), with invariants
# checked every second and after every operation settles. It prints a report
# (and writes it as JSON with --json) and exits non-zero on any violation.
# The program is TestSoak in cmd/shaperd (docs/testing.md). Needs root.
#
#   sudo scripts/soak.sh [--duration 3m] [--seed N] [--users 2000] [--fleet] [--json FILE]
set -euo pipefail
cd "$(dirname "$0")/.."

duration=3m seed="" users=2000 fleet=0 json=""
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) duration="$2"; shift 2 ;;
	--seed) seed="$2"; shift 2 ;;
	--users) users="$2"; shift 2 ;;
	--fleet) fleet=1; shift ;;
	--json) json="$(realpath -m "$2")"; shift 2 ;;
	-h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
[ -n "$seed" ] || seed=$(( $(date +%s) % 1000000000 ))
if [ "$(id -u)" != 0 ]; then
	echo "soak.sh: needs root (network namespaces, tc)" >&2
	exit 2
fi
# go test's timeout: the duration, plus the lab's setup and the report.
secs=0 rest="$duration"
while [[ "$rest" =~ ^([0-9]+)(h|m|s)(.*)$ ]]; do
	n=${BASH_REMATCH[1]}
	case ${BASH_REMATCH[2]} in h) n=$((n * 3600)) ;; m) n=$((n * 60)) ;; esac
	secs=$((secs + n)) rest=${BASH_REMATCH[3]}
done
if [ -n "$rest" ] || [ "$secs" = 0 ]; then
	echo "soak.sh: --duration $duration: want a duration such as 3m, 1h or 1h30m" >&2
	exit 2
fi
echo "soak: --duration $duration --seed $seed --users $users$([ "$fleet" = 1 ] && echo ' --fleet')"
set +e
SHAPERD_SOAK="$duration" SHAPERD_SOAK_SEED="$seed" SHAPERD_SOAK_USERS="$users" \
	SHAPERD_SOAK_FLEET="$fleet" SHAPERD_SOAK_JSON="$json" SHAPERD_REQUIRE_NETNS=1 \
	go test -count=1 -v -run '^TestSoak$' -timeout "$((secs + 900))s" ./cmd/shaperd 2>&1 | grep --line-buffered -v '^=== RUN'
exit "${PIPESTATUS[0]}"
