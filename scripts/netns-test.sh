#!/usr/bin/env bash
# netns-test.sh: shaperd's network-namespace lab and integration tests.
#
#   scripts/netns-test.sh test    go test -race -count=1 ./... with SHAPERD_REQUIRE_NETNS=1
#                                 (as root; integration tests fail instead of skipping)
#   scripts/netns-test.sh lab     build a standing router lab: namespaces shaperd-router,
#                                 shaperd-lan, shaperd-wan (same topology as internal/netnslab)
#   scripts/netns-test.sh clean   remove the standing lab
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

test_all() {
	need_root
	if ! command -v iperf3 >/dev/null && command -v apt-get >/dev/null; then
		export DEBIAN_FRONTEND=noninteractive
		run apt-get install -y -qq iperf3 || { run apt-get update -qq && run apt-get install -y -qq iperf3; }
	fi
	for tool in ip tc iperf3 go; do
		command -v "$tool" >/dev/null || { echo "netns-test.sh: $tool not found" >&2; exit 1; }
	done
	export SHAPERD_REQUIRE_NETNS=1
	say "SHAPERD_REQUIRE_NETNS=1"
	# The tests remove their own namespaces (t.Cleanup); nothing to trap here.
	run go test -race -count=1 ./...
}

case "${1:-}" in
test) test_all ;;
lab) lab ;;
clean) need_root; clean ;;
*)
	echo "usage: $0 test|lab|clean" >&2
	exit 2
	;;
esac
