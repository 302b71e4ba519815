#!/usr/bin/env bash
# bench-apply.sh: shaperd's daemon applying its plan vs tc -batch, ratios
# measured in the same run, in throwaway network namespaces on the real
# kernel. The shaperd side is the daemon itself (internal/daemon in the
# bench process through internal/lab/daemonlab, its kernel writes recorded):
# a cold apply is daemonlab.Start + Daemon.Once, a change is the control API
# call shaperctl makes (Daemon.SetRate, Daemon.ChangeUser), run by the
# daemon's loop.
#
# usage: sudo scripts/bench-apply.sh [-r ROUNDS] [-n USERS] [-c CHANGES] [-C KIND] [-H] [-T] [-U] [-P] [-k]
#                                    [-Q QUEUES [-B BIGUSERS] [-G RUNS] [-q]]
#        sudo scripts/bench-apply.sh hierarchy [-r ROUNDS] [-n USERS] [-c CHANGES] [-C KIND] [-k]
#   -r  rounds of (shaperd, tc flat, tc hashed), interleaved   (default 3)
#   -n  users in the big tree (hierarchy: users behind the APs) (default 10000)
#   -c  one-user rate changes (Daemon.SetRate) per tree for (b) (default 1000;
#       hierarchy: user moves and node changes of each kind, default 200)
#   -C  the daemon's classifier: bpf or u32; default: the daemon's own
#       default (bpf where the kernel allows it)
#   -H  skip the tc -batch peer building shaperd's hashed u32 layout
#   -T  skip (d), the iperf3 measurement
#   -U  also run pkg/kernel/u32's throughput test (go test -run Throughput)
#       and print its ratio line (~40 s more)
#   -P  also run pkg/kernel's BenchmarkApplyPipelined (2 iterations at USERS):
#       class writes through Apply (one request per sendmsg, ack awaited)
#       vs 64 requests per sendmsg with the acks read after (~1 min more)
#   -k  keep the work directory (batch files, the daemons' logs, raw logs)
#   -Q  per-queue trees (queues = N, one HTB per transmit queue) on a QUEUES-queue veth: (e), and (f)/(g)
#       when asked for; -q runs only these
#   -B  (f): BIGUSERS users (e.g. 100000) on one QUEUES-queue interface
#   -G  (g): iperf3 runs of 2 saturating users, one tree vs QUEUES trees
#
# Targets (what the daemon must do against tc -batch):
#   (a) cold apply of the plan (daemonlab.Start + Daemon.Once on an empty
#       device: configuration, policy, desired tree, Dump, Diff, Apply,
#       Verify) / tc -batch creating the same classes and a flat u32 list:
#       <= 1.0, goal 0.5
#   (b) one user's rate change in the big tree (Daemon.SetRate, ramp 0): the
#       kernel Apply inside it median <= 1 ms, and its ratio to the same
#       change in a 10-user tree <= 1.2 (end to end p50/p99 printed too)
#   (c) re-applying the unchanged big tree (Daemon.Once again): 0 writes, < 1 s
#   (d) iperf3 throughput to the user whose filter the daemon added last of
#       USERS / throughput with that user alone: >= 0.95 (median of 5 runs of
#       3 s each, interleaved; both trees applied by the daemon)
#   (e) with -Q: the daemon's cold apply of USERS users as QUEUES per-queue
#       trees under mq / tc -batch building the single tree (flat u32):
#       goal <= 0.5
#   (f) with -B: BIGUSERS users on one interface (beyond one qdisc's 65,535
#       class ids): cold apply, peak RSS, one user's change (Daemon.SetRate)
#       kernel Apply p99 < 5 ms, re-apply of the unchanged tree 0 writes;
#       also one run-time user's address added/removed (Daemon.ChangeUser:
#       p50/p99, map updates with bpf)
#   (g) with -G: 2 concurrent saturating users on different queues / in one
#       tree (total iperf3 throughput; > 1 means shaping is not one lock)
#   (h) hierarchy: USERS users behind 500 access points in 50 buildings at 5
#       sites (nodes): cold apply / tc -batch building the same node and user
#       classes with a flat u32 list <= 1.0; re-apply 0 writes, < 1 s; and,
#       without targets, one run-time user's move to another AP
#       (Daemon.ChangeUser move) and one AP's capacity change (Daemon.SetRate
#       node:ap-17) p50/p99, one run-time node added and removed
#       (Daemon.ChangeNode) p50/p99, the simulator on the whole plan
#       (Daemon.Simulate)
#
# Each measurement runs in its own namespace, which is deleted (root qdiscs
# first, synchronously) before the next one: every HTB class is a tc block on
# the kernel's host-wide flow_indir_dev_list, which class creation searches
# (docs/perf-class-creation.md), so other namespaces with big tc trees slow
# both sides; the script warns when there are any. Misses are results: the
# script exits 0 when it ran, 1 when it could not (not root, build failed,
# a kernel refusal).
set -uo pipefail

MODE=flat
if [[ ${1:-} == hierarchy ]]; then
	MODE=hierarchy
	shift
fi
ROUNDS=3
USERS=10000
CHANGES=""
HASHED=true
THROUGHPUT=1
U32TEST=0
PIPELINE=0
KEEP=0
QUEUES=0
BIG=0
QTP=0
QONLY=false
CLS=""
while getopts "r:n:c:HTUPkQ:B:G:C:qh" opt; do
	case $opt in
	r) ROUNDS=$OPTARG ;;
	n) USERS=$OPTARG ;;
	c) CHANGES=$OPTARG ;;
	H) HASHED=false ;;
	T) THROUGHPUT=0 ;;
	U) U32TEST=1 ;;
	P) PIPELINE=1 ;;
	k) KEEP=1 ;;
	Q) QUEUES=$OPTARG ;;
	B) BIG=$OPTARG ;;
	G) QTP=$OPTARG ;;
	C) CLS=$OPTARG ;;
	q) QONLY=true ;;
	h) sed -n '2,67p' "$0"; exit 0 ;;
	*) exit 2 ;;
	esac
done
if [[ -z $CHANGES ]]; then
	CHANGES=1000
	[[ $MODE == hierarchy ]] && CHANGES=200
fi
[[ $(id -u) == 0 ]] || { echo "bench-apply: must run as root (network namespaces)" >&2; exit 1; }
cd "$(dirname "$0")/.." || exit 1

SUF=$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')
PREFIX="ba$SUF" # every namespace of this run is $PREFIX-...
WORK=$(mktemp -d /tmp/bench-apply.XXXXXX)
PID=""

cleanup() {
	if [[ -n $PID ]]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; fi
	local ns
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX-"); do
		ip netns del "$ns" 2>/dev/null && echo "bench-apply: removed leftover netns $ns" >&2
	done
	if [[ $KEEP == 0 ]]; then rm -rf "$WORK"; else echo "bench-apply: kept $WORK" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# other_netns prints the other namespaces and how many tc classes each holds.
other_netns() {
	local ns d n total=0 list=""
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -v "^$PREFIX-"); do
		n=0
		for d in $(ip -n "$ns" -o link 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
			n=$((n + $(tc -n "$ns" class show dev "$d" 2>/dev/null | wc -l)))
		done
		list="$list $ns($n classes)"
		total=$((total + 1))
	done
	if ((total > 0)); then
		echo "WARNING: $total other network namespace(s) exist:$list."
		echo "         Their tc blocks sit on the host-wide flow_indir_dev_list and slow class creation for both sides."
	else
		echo "other network namespaces: none"
	fi
}

echo "# bench-apply $(date -u '+%F %T') UTC, $(uname -r), $(tc -V 2>&1 | head -1), $(nproc) CPUs"
echo "# uptime:$(uptime)"
other_netns

# Build everything before measuring (compiling competes for the CPU).
if ! go build -o "$WORK/benchapply" ./internal/lab/benchapply; then
	echo "bench-apply: building internal/lab/benchapply failed" >&2
	exit 1
fi
D_BIN=""
P_BIN=""
TP_RUNS=5
if [[ $MODE == hierarchy ]]; then
	TP_RUNS=0
	U32TEST=0
	PIPELINE=0
elif [[ $THROUGHPUT == 0 ]]; then
	TP_RUNS=0
elif ! command -v iperf3 >/dev/null; then
	echo "(d) not measured: iperf3 is missing (apt-get install -y iperf3)"
	TP_RUNS=0
	U32TEST=0
fi
if [[ $U32TEST == 1 ]]; then
	if go test -c -o "$WORK/u32.test" ./pkg/kernel/u32/ 2>"$WORK/u32.build"; then
		D_BIN="$WORK/u32.test"
	else
		echo "(d) not measured: the u32 test does not build:"; head -5 "$WORK/u32.build"
	fi
fi

if [[ $PIPELINE == 1 ]]; then
	if go test -c -o "$WORK/kernel.test" ./pkg/kernel/ 2>"$WORK/kernel.build"; then
		P_BIN="$WORK/kernel.test"
	else
		echo "pipelining experiment skipped: pkg/kernel's tests do not build:"; head -5 "$WORK/kernel.build"
	fi
fi

START=$(date +%s)
if [[ $MODE == hierarchy ]]; then
	ARGS=(-hierarchy -hier-users "$USERS" -hier-changes "$CHANGES")
else
	ARGS=(-users "$USERS" -changes "$CHANGES" -throughput-runs "$TP_RUNS" -hashed="$HASHED"
		-queues "$QUEUES" -queue-big "$BIG" -queue-tp-runs "$QTP" -queues-only="$QONLY")
fi
"$WORK/benchapply" -r "$ROUNDS" -classifier "$CLS" -prefix "$PREFIX" -dir "$WORK" "${ARGS[@]}" > >(tee "$WORK/apply.txt") &
PID=$! # benchapply itself: the traps stop it and remove its namespaces
wait "$PID"
RC=$?
PID=""
sleep 0.2 # let tee finish printing
if [[ $RC != 0 ]]; then
	echo "bench-apply: benchapply failed (exit $RC)" >&2
	exit 1
fi

D_LINE=""
if [[ -n $D_BIN ]]; then
	echo
	echo "(d') go test -run Throughput -v ./pkg/kernel/u32/ (10,000 filters, 101 classes) $(uptime | sed 's/.*load/load/')"
	(cd pkg/kernel/u32 && "$D_BIN" -test.run Throughput -test.v -test.count=1 -test.timeout 5m) >"$WORK/d.txt" 2>&1
	D_RC=$?
	grep -E 'Gbit/s|installed|ratio' "$WORK/d.txt" | sed 's/^ */    /'
	RATIO=$(grep -E 'throughput ratio' "$WORK/d.txt" | tail -1 |
		sed -nE 's/.*throughput ratio [^:=]*[:=] *([0-9]+\.[0-9]+).*/\1/p')
	if [[ -n $RATIO ]]; then
		OK=$(awk -v r="$RATIO" 'BEGIN{print (r >= 0.95) ? "PASS" : "MISS"}')
		D_LINE="(d') u32 test: throughput last-of-10000 / 1 user $RATIO >= 0.95: $OK (test exit $D_RC)"
	else
		echo "    no ratio line in the test output (exit $D_RC); its tail:"
		tail -5 "$WORK/d.txt" | sed 's/^/    /'
		D_LINE="(d') u32 test: not measured (see above)"
	fi
fi

if [[ -n $P_BIN ]]; then
	echo
	echo "(experiment) BenchmarkApplyPipelined, $USERS classes, 2 iterations, order alternating; $(uptime | sed 's/.*load/load/')"
	(cd pkg/kernel && BENCH_APPLY_USERS=$USERS "$P_BIN" -test.run XXX -test.bench ApplyPipelined -test.benchtime=2x) >"$WORK/p.txt" 2>&1
	awk '/^BenchmarkApplyPipelined/ {
		for (i = 3; i < NF; i += 2) v[$(i + 1)] = $i
		printf "    create %d classes: Apply %.2f s (sys %.2f), pipelined %.2f s (sys %.2f): %.2fx\n", n, v["s/create-apply"], v["sys-s/create-apply"], v["s/create-pipelined"], v["sys-s/create-pipelined"], v["s/create-pipelined"] / v["s/create-apply"]
		printf "    change them:        Apply %.3f s, pipelined %.3f s: %.2fx\n", v["s/change-apply"], v["s/change-pipelined"], v["s/change-pipelined"] / v["s/change-apply"]
		found = 1
	} END { if (!found) print "    no benchmark line (see the raw output with -k)" }' n="$USERS" "$WORK/p.txt"
fi

echo
echo "== targets ($MODE, $ROUNDS rounds, $USERS users; $(($(date +%s) - START)) s) =="
grep '^TARGET' "$WORK/apply.txt"
[[ $MODE == hierarchy ]] && grep '^(h) ' "$WORK/apply.txt"
[[ -n $D_LINE ]] && echo "$D_LINE"
echo "# uptime:$(uptime)"
other_netns
exit 0
