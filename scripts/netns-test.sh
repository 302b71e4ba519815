#!/usr/bin/env bash
# netns-test.sh: shaperd's network-namespace lab and integration tests.
#
#   scripts/netns-test.sh deps    apt-get install what the tests use (iperf3, etcd-server, ...)
#   scripts/netns-test.sh test    deps, then go test -v -race -count=1 -p 1 ./... with SHAPERD_REQUIRE_NETNS=1
#                                 (as root; integration tests fail instead of skipping)
#   scripts/netns-test.sh lab     build a standing router lab: namespaces shaperd-router,
#                                 shaperd-lan, shaperd-wan (same topology as internal/lab/netnslab)
#   scripts/netns-test.sh clean   remove the standing lab
#   scripts/netns-test.sh fleet-demo
#                                 two routers (namespaces shaperd-fleet1, shaperd-fleet2)
#                                 following one plan through a loopback etcd (etcd-server):
#                                 a push, then one fleet set-rate, as the kernels show them
#
# Lab topology (addresses only from 198.18.0.0/15 and 2001:db8::/32):
#   shaperd-lan [l-eth] ---- [r-lan] shaperd-router [r-wan] ---- [w-eth] shaperd-wan
#   users 198.18.0.10-12/24   198.18.0.1/24       198.19.0.1/24       198.19.0.2/24
#         2001:db8:1::10-12   2001:db8:1::1/64    2001:db8:2::1/64    2001:db8:2::2/64
# shaperd shapes r-lan in shaperd-router: egress = downloads, ingress via IFB = uploads.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUTER=shaperd-router LAN=shaperd-lan WAN=shaperd-wan

say() { printf '+ %s\n' "$*" >&2; }
run() { say "$@"; "$@"; }

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "netns-test.sh: must run as root (network namespaces)" >&2
		exit 1
	fi
}

clean() {
	local ns
	for ns in "$ROUTER" "$LAN" "$WAN"; do
		if ip netns list | grep -qw "^$ns"; then
			run ip netns del "$ns"
		fi
	done
}

lab() {
	need_root
	clean
	trap 'echo "netns-test.sh: lab setup failed, cleaning up" >&2; clean' ERR INT TERM
	local ns
	for ns in "$ROUTER" "$LAN" "$WAN"; do
		run ip netns add "$ns"
		run ip -n "$ns" link set lo up
	done
	run ip -n "$ROUTER" link add r-lan type veth peer name l-eth netns "$LAN"
	run ip -n "$ROUTER" link add r-wan type veth peer name w-eth netns "$WAN"
	run ip -n "$ROUTER" link set r-lan up
	run ip -n "$ROUTER" link set r-wan up
	run ip -n "$LAN" link set l-eth up
	run ip -n "$WAN" link set w-eth up
	run ip netns exec "$ROUTER" sysctl -q -w net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
	run ip -n "$ROUTER" addr add 198.18.0.1/24 dev r-lan
	run ip -n "$ROUTER" addr add 2001:db8:1::1/64 dev r-lan nodad
	run ip -n "$ROUTER" addr add 198.19.0.1/24 dev r-wan
	run ip -n "$ROUTER" addr add 2001:db8:2::1/64 dev r-wan nodad
	run ip -n "$WAN" addr add 198.19.0.2/24 dev w-eth
	run ip -n "$WAN" addr add 2001:db8:2::2/64 dev w-eth nodad
	run ip -n "$WAN" route add 198.18.0.0/24 via 198.19.0.1
	run ip -n "$WAN" -6 route add 2001:db8:1::/64 via 2001:db8:2::1
	local i
	for i in 10 11 12; do
		run ip -n "$LAN" addr add "198.18.0.$i/24" dev l-eth
		run ip -n "$LAN" addr add "2001:db8:1::$i/64" dev l-eth nodad
	done
	run ip -n "$LAN" route add default via 198.18.0.1
	run ip -n "$LAN" -6 route add default via 2001:db8:1::1
	trap - ERR INT TERM
	echo "lab ready: shape r-lan in $ROUTER; users 198.18.0.10-12, 2001:db8:1::10-12 in $LAN; far end 198.19.0.2, 2001:db8:2::2 in $WAN" >&2
	echo "remove it with: $0 clean" >&2
}

# deps installs (with apt-get, when missing) what the tests use besides Go:
# the lab (iproute2, iperf3, ping, ethtool, strace), the fleet tests (etcd),
# the package and monitoring tests (dpkg-deb, lintian, adduser, promtool,
# systemd-analyze) and the completion tests (zsh, fish).
deps() {
	local pair need=()
	for pair in ip:iproute2 tc:iproute2 iperf3:iperf3 ping:iputils-ping ethtool:ethtool strace:strace \
		etcd:etcd-server dpkg-deb:dpkg lintian:lintian addgroup:adduser promtool:prometheus \
		systemd-analyze:systemd zsh:zsh fish:fish; do
		command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
	done
	[ ${#need[@]} -gt 0 ] || return 0
	command -v apt-get >/dev/null || { echo "netns-test.sh: missing ${need[*]} (no apt-get to install them)" >&2; exit 1; }
	export DEBIAN_FRONTEND=noninteractive
	run apt-get update -qq
	run apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

test_all() {
	need_root
	deps
	for tool in ip tc iperf3 go; do
		command -v "$tool" >/dev/null || { echo "netns-test.sh: $tool not found" >&2; exit 1; }
	done
	export SHAPERD_REQUIRE_NETNS=1
	say "SHAPERD_REQUIRE_NETNS=1"
	# The tests remove their own namespaces (t.Cleanup); nothing to trap here.
	# -p 1: one package's tests at a time, so the throughput and smoothness
	# measurements of one package are not disturbed by another's traffic (nor
	# by another's bulk netlink work: the kernel's rtnl lock is one for all
	# namespaces). -v gives each test's time: the slowest tests, the
	# packages' times, slowest first, and the wall time close the run (the
	# suite's budget is watched there).
	local log start rc
	log=$(mktemp)
	start=$(date +%s)
	say go test -v -race -count=1 -p 1 -timeout 15m ./...
	set +e
	go test -v -race -count=1 -p 1 -timeout 15m ./... 2>&1 | tee "$log" | grep --line-buffered -Ev '^=== (RUN|PAUSE|CONT|NAME)'
	rc=${PIPESTATUS[0]}
	set -e
	echo "== slowest tests:"
	awk '/^--- (PASS|FAIL): / { t = $4; gsub(/[()s]/, "", t); printf "%9.2fs  %s %s\n", t, $3, $2 }' "$log" | sort -rn | head -20
	echo "== package times, slowest first; go test took $(($(date +%s) - start)) s in all:"
	awk '($1 == "ok" || $1 == "FAIL") && $3 ~ /^[0-9.]+s$/ { printf "%9s  %s\n", $3, $2 }' "$log" | sort -rn | head -12
	if [ "$rc" != 0 ]; then
		# The failing tests' own lines (file:line: message), last, where a
		# truncated CI log still shows them: -v streams them long before
		# the test's --- FAIL line.
		echo "== failing tests, their file:line lines (up to 40 each):"
		awk '
			/^=== (RUN|NAME|CONT) / { cur = $3; next }
			/^ +[^ ]+\.go:[0-9]+: / { if (n[cur] < 40) { lines[cur] = lines[cur] $0 "\n"; n[cur]++ } }
			/^ *--- FAIL: / { failed[$3] = 1 }
			END { for (name in failed) if (name in lines) printf "%s:\n%s", name, lines[name] }
		' "$log"
	fi
	rm -f "$log"
	return "$rc"
}

# demo: the standing lab with shaperd shaping r-lan (downloads on egress, uploads
# through an IFB): iperf3 to three users at once, then `shaperctl set-rate` on one.
# Needs root, go, iproute2 and iperf3. Removes everything it made on exit.
demo() {
	need_root
	if ! command -v iperf3 >/dev/null && command -v apt-get >/dev/null; then
		export DEBIAN_FRONTEND=noninteractive
		run apt-get install -y -qq iperf3 || { run apt-get update -qq && run apt-get install -y -qq iperf3; }
	fi
	for tool in ip tc iperf3 go; do
		command -v "$tool" >/dev/null || { echo "netns-test.sh: $tool not found" >&2; exit 1; }
	done
	# Globals, for the EXIT trap: the processes started and the temp dir.
	DEMO_PIDS="" DEMO_TMP=$(mktemp -d /tmp/shaperd-demo.XXXXXX)
	local tmp=$DEMO_TMP
	chmod 755 "$tmp"
	demo_cleanup() {
		local p
		for p in $DEMO_PIDS; do kill "$p" 2>/dev/null || true; done
		for p in $DEMO_PIDS; do wait "$p" 2>/dev/null || true; done
		clean
		rm -rf "$DEMO_TMP"
	}
	trap demo_cleanup EXIT
	trap 'exit 130' INT TERM
	run go build -o "$tmp/shaperd" ./cmd/shaperd
	run go build -o "$tmp/shaperctl" ./cmd/shaperctl
	lab
	trap 'exit 130' INT TERM

	# The example configuration, pointed at the lab: lan0 (downloads, and
	# uploads through an IFB) becomes r-lan.
	sed -e "s#^socket = .*#socket = \"$tmp/shaperd.sock\"#" \
		-e "s#^state_dir = .*#state_dir = \"$tmp/state\"#" \
		-e 's#^metrics = .*#metrics = ""#' \
		-e 's#^name = "lan0"#name = "r-lan"#' \
		-e 's#^ifb = "ifb-lan0"#ifb = "r-ifb"#' \
		-e 's#^bandwidth = "100mbit"#bandwidth = "1gbit"#' \
		-e 's#^leaf_[a-z]* = .*##' \
		configs/shaperd.toml >"$tmp/shaperd.toml"
	cat >"$tmp/users.toml" <<-EOF
		[[user]]
		name = "carol"
		tier = "bronze"
		addresses = ["198.18.0.10", "2001:db8:1::10"]

		[[user]]
		name = "bob"
		tier = "silver"
		addresses = ["198.18.0.11", "2001:db8:1::11"]

		[[user]]
		name = "alice"
		tier = "gold"
		addresses = ["198.18.0.12", "2001:db8:1::12"]
	EOF
	run "$tmp/shaperd" --config "$tmp/shaperd.toml" --check
	# As the systemd unit runs it on a router: inside the router's namespace.
	ip netns exec "$ROUTER" "$tmp/shaperd" --config "$tmp/shaperd.toml" >"$tmp/shaperd.log" 2>&1 &
	DEMO_PIDS="$DEMO_PIDS $!"
	say "ip netns exec $ROUTER shaperd --config $tmp/shaperd.toml started (log: $tmp/shaperd.log)"
	local i ctl="$tmp/shaperctl --socket $tmp/shaperd.sock"
	# status exits 1 while an interface is not ok: wait for that.
	for i in $(seq 100); do
		$ctl status >/dev/null 2>&1 && break
		sleep 0.1
	done
	$ctl status >/dev/null || { cat "$tmp/shaperd.log" >&2; echo "netns-test.sh: shaperd did not start (or an interface is not ok)" >&2; exit 1; }

	# measure SECONDS: downloads wan -> each user, all at once (dl_<user>),
	# then alice's upload alice -> wan on its own (ul_alice), in Mbit/s. Apart:
	# a download saturating its class delays the upload's ACKs queued behind
	# it (and the other way round), so measured together an upload shows well
	# below its rate although its class is not the limit.
	measure() {
		local secs=$1 u a port=5300 servers=() clients=() c waitfor=()
		for u in carol:10 bob:11 alice:12; do
			a=198.18.0.${u#*:}
			port=$((port + 1))
			ip netns exec "$LAN" iperf3 -s -1 -B "$a" -p "$port" >/dev/null 2>&1 &
			servers+=($!)
			clients+=("${u%:*} $a $port")
		done
		DEMO_PIDS="$DEMO_PIDS ${servers[*]}"
		sleep 0.5
		for c in "${clients[@]}"; do
			set -- $c
			ip netns exec "$WAN" iperf3 -c "$2" -p "$3" -B 198.19.0.2 -t "$secs" -O 1 -f m >"$tmp/dl_$1" 2>&1 &
			waitfor+=($!)
		done
		for c in "${waitfor[@]}" "${servers[@]}"; do wait "$c" 2>/dev/null || true; done
		ip netns exec "$WAN" iperf3 -s -1 -B 198.19.0.2 -p 5399 >/dev/null 2>&1 &
		c=$!
		DEMO_PIDS="$DEMO_PIDS $c"
		sleep 0.5
		ip netns exec "$LAN" iperf3 -c 198.19.0.2 -p 5399 -B 198.18.0.12 -t "$secs" -O 1 -f m >"$tmp/ul_alice" 2>&1 || true
		wait "$c" 2>/dev/null || true
	}
	mbits() { awk '/receiver/ {print $(NF-2); found=1} END {if (!found) print "?"}' "$1"; }
	# table: user, tier, rate and ceil in force (shaperctl status), measured.
	table() {
		local st u
		# Columns: USER INTERFACE DIRECTION DEVICE TIER RATE/CEIL EFFECTIVE ...
		st=$($ctl status || true)
		printf '%-8s %-8s %-10s %-16s %-10s %s\n' USER TIER DIRECTION RATE/CEIL MEASURED "(Mbit/s)"
		for u in carol bob alice; do
			echo "$st" | awk -v u="$u" -v m="$(mbits "$tmp/dl_$u")" \
				'$1 == u && $3 == "download" {printf "%-8s %-8s %-10s %-16s %s\n", u, $5, "download", $7, m}'
		done
		echo "$st" | awk -v m="$(mbits "$tmp/ul_alice")" \
			'$1 == "alice" && $3 == "upload" {printf "%-8s %-8s %-10s %-16s %s\n", "alice", $5, "upload", $7, m}'
	}

	say "measuring 5 s: downloads to carol, bob and alice at once, then alice's upload alone"
	measure 5
	table
	echo
	say "$ctl set-rate bob 3mbit --ramp 0s"
	$ctl set-rate bob 3mbit --ramp 0s
	say "measuring again"
	measure 5
	table
	echo
	say "the kernel's class for bob:"
	ip netns exec "$ROUTER" tc class show dev r-lan | grep -w "rate 3Mbit" || true
	say "done; cleaning up"
}

fleet_demo() {
	need_root
	command -v etcd >/dev/null || { echo "netns-test.sh: fleet-demo needs etcd (apt-get install etcd-server)" >&2; exit 1; }
	local tmp r ns
	tmp=$(mktemp -d /tmp/shaperd-fleet-demo.XXXXXX)
	FLEET_TMP=$tmp FLEET_PIDS=""
	cleanup_fleet() {
		local p n
		for p in $FLEET_PIDS; do kill "$p" 2>/dev/null || true; done
		wait 2>/dev/null || true
		for n in shaperd-fleet1 shaperd-fleet2; do ip netns del "$n" 2>/dev/null || true; done
		rm -rf "$FLEET_TMP"
	}
	trap cleanup_fleet EXIT INT TERM
	run go build -o "$tmp/shaperd" ./cmd/shaperd
	run go build -o "$tmp/shaperctl" ./cmd/shaperctl
	local ep=http://127.0.0.1:23791
	if curl -fs "$ep/health" >/dev/null 2>&1; then
		echo "netns-test.sh: something already answers on $ep (a leftover etcd?)" >&2
		exit 1
	fi
	say "etcd on $ep (loopback only; data in $tmp/etcd)"
	etcd --name demo --data-dir "$tmp/etcd" --listen-client-urls "$ep" --advertise-client-urls "$ep" \
		--listen-peer-urls http://127.0.0.1:23801 --initial-advertise-peer-urls http://127.0.0.1:23801 \
		--initial-cluster demo=http://127.0.0.1:23801 >"$tmp/etcd.log" 2>&1 &
	FLEET_PIDS="$FLEET_PIDS $!"
	for r in $(seq 50); do curl -fs "$ep/health" >/dev/null 2>&1 && break; sleep 0.2; done
	cat >"$tmp/plan.toml" <<EOT
[daemon]
users_file = "users.toml"
[policy]
ramp = "0s"
[[interface]]
name = "r-lan"
bandwidth = "100mbit"
default_tier = "basic"
[tiers.basic]
rate = "2mbit"
ceil = "10mbit"
[fleet]
endpoints = ["$ep"]
EOT
	printf '[[user]]\nname = "alice"\ntier = "basic"\naddresses = ["198.18.0.10"]\n' >"$tmp/users.toml"
	run "$tmp/shaperctl" fleet push --config "$tmp/plan.toml"
	for r in 1 2; do
		ns=shaperd-fleet$r
		run ip netns add "$ns"
		run ip -n "$ns" link add r-lan type veth peer name r-peer
		run ip -n "$ns" link set r-lan up
		run ip -n "$ns" link set r-peer up
		mkdir -p "$tmp/r$r"
		cat >"$tmp/r$r/shaperd.toml" <<EOT
[daemon]
socket = "$tmp/r$r/shaperd.sock"
state_dir = "$tmp/r$r/state"
[[interface]]
name = "r-lan"
bandwidth = "100mbit"
default_tier = "basic"
[fleet]
endpoints = ["$ep"]
router = "router$r"
EOT
		"$tmp/shaperd" --config "$tmp/r$r/shaperd.toml" --netns "$ns" >"$tmp/r$r/shaperd.log" 2>&1 &
		FLEET_PIDS="$FLEET_PIDS $!"
		say "shaperd --netns $ns started (log: $tmp/r$r/shaperd.log)"
	done
	sleep 2
	show() {
		for r in 1 2; do
			echo "router$r:"
			ip netns exec shaperd-fleet$r tc class show dev r-lan | sed 's/^/  /'
		done
	}
	show
	run "$tmp/shaperctl" set-rate alice 3mbit --fleet --config "$tmp/plan.toml"
	sleep 1
	show
	run "$tmp/shaperctl" fleet status --config "$tmp/plan.toml"
	say "done; cleaning up"
}

case "${1:-}" in
deps) need_root; deps ;;
test) test_all ;;
lab) lab ;;
clean) need_root; clean ;;
demo) demo ;;
fleet-demo) fleet_demo ;;
*)
	echo "usage: $0 test|deps|lab|clean|demo|fleet-demo" >&2
	exit 2
	;;
esac
