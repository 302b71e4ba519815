#!/usr/bin/env bash
# perf-class-creation.sh - measure how the cost of creating N HTB classes (and
# leaf qdiscs / u32 filters) with `tc -batch` grows with N, optionally under
# `perf record -g`. Findings: docs/perf-class-creation.md.
#
# Every run uses a fresh throwaway netns with a veth pair (random suffix); the
# tree is deleted synchronously (`tc qdisc del ... root`, also timed) before the
# netns goes, so no half-torn-down state leaks into the next run. A trap removes
# whatever is left on exit or failure (on Ctrl-C/TERM once the running tc batch
# has finished). Needs root, iproute2, bash, GNU time; perf for -p.
#
# Usage: scripts/perf-class-creation.sh [-n "2500 5000 10000"] [-r RUNS]
#            [-e "exp1 exp2 ..."] [-p] [-o OUTDIR] [-k]
#   -n  list of class counts N             (default "2500 5000 10000")
#   -r  runs per (experiment, N); median  (default 3; -r 0 -p: perf run only)
#   -e  experiments (default "classes"); see `-e list`
#   -p  also record one extra run of each (experiment, N) with perf record -g
#       (only the tc process and its kernel work; -a is not needed)
#   -o  directory for batch files, perf data and reports (default mktemp -d)
#   -k  keep OUTDIR (default: keep only when -p or -o is given)
#
# Output: one line per phase and run, "exp N phase real user sys", and a
# summary with the median real (user sys) time per phase. Phases of one run share a netns
# and follow each other, e.g. "classes" (root qdisc + classes), "leafq" (leaf
# qdiscs), "filters" (u32 filters), "all" (one batch with everything), "del"
# (tc qdisc del root).
set -euo pipefail

NS_LIST="2500 5000 10000"
RUNS=3
EXPS="classes"
PERF=0
OUT=""
KEEP=0

EXP_HELP='experiments:
  classes        root qdisc, root class 1:1, N leaf classes 1:100.. ascending
  classes-rand   the same classes, created in random order
  classes-desc   the same classes, created in descending order
  leafq          classes, then per class "qdisc add parent 1:X handle X: pfifo"
  leafq-auto     classes, then per class "qdisc add parent 1:X pfifo" (kernel picks handle)
  leafq-inline   class + its explicit leaf qdisc interleaved, in one batch
  tier           2 levels: 1:1 -> 100 tier classes 1:2..1:65 (hex) -> N leaves
  sharded        16 nested HTB qdiscs (one per shard class 1:2..1:11), N/16 leaves in each
  filters        classes, then N u32 /32 filters on 1: prio 1 (one linear list)
  filters-first  N u32 filters first (classes do not exist yet), then the classes
  filters-class  N u32 filters attached to class 1:1 (not the qdisc), then the leaf classes
  filters-hash   classes, then N u32 /32 filters in a 256-bucket hash table (key: last octet)
  change         the classes, then "class change" of every leaf (new rate/ceil)
  twodev         the classes on the veth, then the same classes on its peer (2nd HTB tree)
  dump           the classes, then "tc class show" and "tc qdisc show" (full dumps)
  baseline       ONE batch: N classes + N linear u32 /32 filters (peer baseline)'

while getopts "n:r:e:po:kh" opt; do
	case $opt in
	n) NS_LIST=$OPTARG ;;
	r) RUNS=$OPTARG ;;
	e) EXPS=$OPTARG ;;
	p) PERF=1 ;;
	o) OUT=$OPTARG ;;
	k) KEEP=1 ;;
	h) sed -n '2,26p' "$0"; echo "$EXP_HELP"; exit 0 ;;
	*) exit 2 ;;
	esac
done
if [[ $EXPS == list ]]; then echo "$EXP_HELP"; exit 0; fi
[[ $(id -u) == 0 ]] || { echo "must run as root" >&2; exit 1; }

if [[ -z $OUT ]]; then
	OUT=$(mktemp -d /tmp/perf-class-creation.XXXXXX)
else
	mkdir -p "$OUT"; KEEP=1
fi
[[ $PERF == 1 ]] && KEEP=1

SUF=$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
NS="pcc$SUF"
DEV="pa$SUF"  # inside $NS; peer "pb$SUF"
CUR_NS=""

cleanup() {
	if [[ -n $CUR_NS ]]; then ip netns del "$CUR_NS" 2>/dev/null || true; fi
	if [[ $KEEP == 0 ]]; then rm -rf "$OUT"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- batch generators (one command per line, ids in hex as tc expects) ----
R="rate 1mbit ceil 2mbit burst 15k cburst 15k quantum 1514"

gen_root() { # $1=N
	echo "qdisc add dev $DEV root handle 1: htb default 0 r2q 10"
	echo "class add dev $DEV parent 1: classid 1:1 htb rate 10gbit ceil 10gbit burst 1m cburst 1m quantum 200000"
}
ids() { # $1=N: decimal minors 256.. (hex 100..)
	seq 256 $((256 + $1 - 1))
}
cls() { printf "class add dev $DEV parent %s classid 1:%x htb $R\n" "$1" "$2"; }
gen_classes() { # $1=N $2=order(asc|rand|desc)
	gen_root
	case $2 in
	asc) ids "$1" ;;
	rand) ids "$1" | shuf ;;
	desc) ids "$1" | sort -rn ;;
	esac | while read -r i; do cls 1:1 "$i"; done
}
gen_tier() { # $1=N: 100 tier classes 1:2..1:65 (hex ids), leaves spread round-robin
	gen_root
	for t in $(seq 2 101); do
		printf "class add dev $DEV parent 1:1 classid 1:%x htb rate 1gbit ceil 10gbit burst 1m cburst 1m quantum 200000\n" "$t"
	done
	ids "$1" | while read -r i; do cls "1:$(printf %x $((2 + i % 100)))" "$i"; done
}
gen_sharded() { # $1=N: shard classes 1:2..1:11, each with an HTB qdisc (handle 11:..20:)
	gen_root
	local k h
	for k in $(seq 1 16); do
		h=$(printf %x $((0x10 + k)))
		printf "class add dev $DEV parent 1:1 classid 1:%x htb rate 1gbit ceil 10gbit burst 1m cburst 1m quantum 200000\n" $((1 + k))
		printf "qdisc add dev $DEV parent 1:%x handle %s: htb default 0 r2q 10\n" $((1 + k)) "$h"
		echo "class add dev $DEV parent $h: classid $h:1 htb rate 10gbit ceil 10gbit burst 1m cburst 1m quantum 200000"
	done
	ids "$1" | while read -r i; do
		h=$(printf %x $((0x11 + i % 16)))
		printf "class add dev $DEV parent $h:1 classid $h:%x htb $R\n" "$i"
	done
}
gen_leafq() { # $1=N $2=explicit|auto
	ids "$1" | while read -r i; do
		if [[ $2 == explicit ]]; then
			printf "qdisc add dev $DEV parent 1:%x handle %x: pfifo limit 100\n" "$i" "$i"
		else
			printf "qdisc add dev $DEV parent 1:%x pfifo limit 100\n" "$i"
		fi
	done
}
gen_leafq_inline() { # $1=N
	gen_root
	ids "$1" | while read -r i; do
		cls 1:1 "$i"
		printf "qdisc add dev $DEV parent 1:%x handle %x: pfifo limit 100\n" "$i" "$i"
	done
}
gen_filters() { # $1=N linear u32 list on 1: prio 1; dst 198.18.x.y from the index
	ids "$1" | while read -r i; do
		printf "filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dst 198.18.%d.%d/32 flowid 1:%x\n" $(((i - 256) / 256)) $(((i - 256) % 256)) "$i"
	done
}
gen_filters_hash() { # $1=N: table 2: with 256 buckets keyed on the last octet of dst
	echo "filter add dev $DEV parent 1: protocol ip prio 1 handle 2: u32 divisor 256"
	echo "filter add dev $DEV parent 1: protocol ip prio 1 u32 ht 800:: match ip dst 198.18.0.0/15 hashkey mask 0x000000ff at 16 link 2:"
	ids "$1" | while read -r i; do
		local k=$(((i - 256) % 256))
		printf "filter add dev $DEV parent 1: protocol ip prio 1 u32 ht 2:%x: match ip dst 198.18.%d.%d/32 flowid 1:%x\n" "$k" $(((i - 256) / 256)) "$k" "$i"
	done
}

# batch files are generated once per (exp, N) and cached in $OUT
batch() { # $1=name $2=N $3...=generator command -> prints path
	local f="$OUT/$1.$2.batch"
	[[ -s $f ]] || "${@:3}" >"$f"
	echo "$f"
}

# ---- netns lifecycle ----
# foreign_classes counts tc classes in all other named netns: each HTB class there
# is a tc block on the machine-wide indirect-block list that our class creation searches.
foreign_classes() {
	local ns d c=0
	for ns in $(ip netns list | awk '{print $1}'); do
		for d in $(ip -n "$ns" -o link 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
			c=$((c + $(tc -n "$ns" class show dev "$d" 2>/dev/null | wc -l)))
		done
	done
	echo "$c"
}
ns_up() {
	CUR_NS=$NS
	ip netns add "$NS"
	ip -n "$NS" link add "$DEV" type veth peer name "pb$SUF"
	ip -n "$NS" link set "$DEV" up
	ip -n "$NS" link set "pb$SUF" up
}
ns_down() {
	ip netns del "$NS"
	CUR_NS=""
	# netns teardown is asynchronous; let it finish before the next run
	while ip netns list | grep -qw "$NS"; do sleep 0.1; done
	sleep 0.5
}

# timed PHASE: run a batch in the netns, record "real user sys".
# Uses /usr/bin/time so user/sys are those of the tc process itself.
RESULTS="$OUT/results.txt"
: >"$RESULTS"
phase() { # $1=exp $2=N $3=run $4=phase $5=batchfile|cmd...
	local exp=$1 n=$2 run=$3 ph=$4 t
	shift 4
	local tf="$OUT/time.txt"
	if [[ $1 == -c ]]; then
		shift
		/usr/bin/time -o "$tf" -f "%e %U %S" ip netns exec "$NS" "$@" >/dev/null 2>"$OUT/tc.err" || true
	else
		/usr/bin/time -o "$tf" -f "%e %U %S" ip netns exec "$NS" tc -force -batch "$1" >/dev/null 2>"$OUT/tc.err" || true
	fi
	if grep -q . "$OUT/tc.err"; then
		echo "tc errors in $exp/$n/$ph:" >&2; head -3 "$OUT/tc.err" >&2
	fi
	t=$(tail -1 "$tf")
	printf "%-14s %6d %d %-8s %s\n" "$exp" "$n" "$run" "$ph" "$t" | tee -a "$RESULTS"
}
# perf variant: record tc and its kernel work with call graphs
perf_phase() { # $1=exp $2=N $3=phase $4=batchfile
	local data="$OUT/perf.$1.$2.$3.data"
	ip netns exec "$NS" perf record -q -g -o "$data" -- tc -force -batch "$4" >/dev/null 2>"$OUT/tc.err" || true
	perf report -i "$data" --stdio --no-children --percent-limit 2 -g caller,0.5,callee,function,percent \
		>"$OUT/perf.$1.$2.$3.report.txt" 2>/dev/null || true
	perf report -i "$data" --stdio --no-children --sort symbol -g none --percent-limit 0.5 \
		>"$OUT/perf.$1.$2.$3.flat.txt" 2>/dev/null || true
	echo "perf: $OUT/perf.$1.$2.$3.{data,report.txt,flat.txt}"
}

DEL="-c tc qdisc del dev"
run_exp() { # $1=exp $2=N $3=run $4=0|1(perf)
	local e=$1 n=$2 r=$3 p=$4 cb
	local -a steps=() # "phase file" pairs
	case $e in
	classes) steps=(classes "$(batch classes "$n" gen_classes "$n" asc)") ;;
	classes-rand) steps=(classes "$(batch classes-rand "$n" gen_classes "$n" rand)") ;;
	classes-desc) steps=(classes "$(batch classes-desc "$n" gen_classes "$n" desc)") ;;
	leafq) steps=(classes "$(batch classes "$n" gen_classes "$n" asc)" leafq "$(batch leafq "$n" gen_leafq "$n" explicit)") ;;
	leafq-auto) steps=(classes "$(batch classes "$n" gen_classes "$n" asc)" leafq "$(batch leafq-auto "$n" gen_leafq "$n" auto)") ;;
	leafq-inline) steps=(all "$(batch leafq-inline "$n" gen_leafq_inline "$n")") ;;
	tier) steps=(classes "$(batch tier "$n" gen_tier "$n")") ;;
	sharded) steps=(classes "$(batch sharded "$n" gen_sharded "$n")") ;;
	filters) steps=(classes "$(batch classes "$n" gen_classes "$n" asc)" filters "$(batch filters "$n" gen_filters "$n")") ;;
	filters-first)
		cb=$(batch classes "$n" gen_classes "$n" asc)
		head -2 "$cb" >"$OUT/root.$n.batch"; tail -n +3 "$cb" >"$OUT/leaves.$n.batch"
		steps=(root "$OUT/root.$n.batch" filters "$(batch filters "$n" gen_filters "$n")" classes "$OUT/leaves.$n.batch") ;;
	filters-class)
		cb=$(batch classes "$n" gen_classes "$n" asc)
		head -2 "$cb" >"$OUT/root.$n.batch"; tail -n +3 "$cb" >"$OUT/leaves.$n.batch"
		sed 's/ parent 1: / parent 1:1 /' "$(batch filters "$n" gen_filters "$n")" >"$OUT/filters-class.$n.batch"
		steps=(root "$OUT/root.$n.batch" filters "$OUT/filters-class.$n.batch" classes "$OUT/leaves.$n.batch") ;;
	filters-hash) steps=(classes "$(batch classes "$n" gen_classes "$n" asc)" filters "$(batch filters-hash "$n" gen_filters_hash "$n")") ;;
	change)
		cb=$(batch classes "$n" gen_classes "$n" asc)
		tail -n +3 "$cb" | sed 's/^class add /class change /; s/rate 1mbit ceil 2mbit/rate 3mbit ceil 4mbit/' >"$OUT/change.$n.batch"
		steps=(classes "$cb" change "$OUT/change.$n.batch") ;;
	twodev)
		cb=$(batch classes "$n" gen_classes "$n" asc)
		sed "s/dev $DEV /dev pb$SUF /" "$cb" >"$OUT/peer.$n.batch"
		steps=(classes "$cb" peer "$OUT/peer.$n.batch") ;;
	dump)
		echo "class show dev $DEV" >"$OUT/dumpc.batch"; echo "qdisc show dev $DEV" >"$OUT/dumpq.batch"
		steps=(classes "$(batch classes "$n" gen_classes "$n" asc)" dumpcls "$OUT/dumpc.batch" dumpqd "$OUT/dumpq.batch") ;;
	baseline)
		cb=$(batch classes "$n" gen_classes "$n" asc)
		[[ -s $OUT/baseline.$n.batch ]] || cat "$cb" "$(batch filters "$n" gen_filters "$n")" >"$OUT/baseline.$n.batch"
		steps=(all "$OUT/baseline.$n.batch") ;;
	*) echo "unknown experiment $e (try -e list)" >&2; exit 2 ;;
	esac
	# context: host load and other netns (their HTB classes slow ours: see docs)
	echo "# $(date -u +%T) loadavg $(cut -d' ' -f1-3 /proc/loadavg), classes in other netns: $(foreign_classes)" >&2
	ns_up
	local i
	for ((i = 0; i < ${#steps[@]}; i += 2)); do
		if [[ $p == 1 ]]; then
			perf_phase "$e" "$n" "${steps[i]}" "${steps[i + 1]}"
		else
			phase "$e" "$n" "$r" "${steps[i]}" "${steps[i + 1]}"
		fi
	done
	if [[ $e == twodev ]]; then ip netns exec "$NS" tc qdisc del dev "pb$SUF" root; fi
	if [[ $p == 1 ]]; then
		ip netns exec "$NS" tc qdisc del dev "$DEV" root
	else
		# shellcheck disable=SC2086
		phase "$e" "$n" "$r" del $DEL "$DEV" root
	fi
	ns_down
}

echo "# exp N run phase real user sys   (seconds; out: $OUT)"
for e in $EXPS; do
	for n in $NS_LIST; do
		for ((r = 1; r <= RUNS; r++)); do run_exp "$e" "$n" "$r" 0; done
		if [[ $PERF == 1 ]]; then run_exp "$e" "$n" 0 1; fi
	done
done

echo "# median real (user sys) per exp N phase over $RUNS runs"
awk '{k=$1" "$2" "$4; r[k]=r[k]" "$5; u[k]=u[k]" "$6; s[k]=s[k]" "$7; if(!(k in o)){o[k]=++m; key[m]=k}}
function med(str,   a,n,i,j,t){n=split(str,a," "); for(i=1;i<=n;i++)for(j=i+1;j<=n;j++)if(a[j]+0<a[i]+0){t=a[i];a[i]=a[j];a[j]=t}; return a[int((n+1)/2)]}
END{for(i=1;i<=m;i++){k=key[i]; printf "%-30s %7.2f  (%5.2f %5.2f)\n", k, med(r[k]), med(u[k]), med(s[k])}}' "$RESULTS"
