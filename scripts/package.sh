#!/bin/sh
# package.sh builds Debian packages of shaperd: shaperd_VERSION_ARCH.deb for
# each ARCH (default: amd64 arm64), cross-compiled with CGO_ENABLED=0, in
# OUTDIR (default: the current directory).
#
#   scripts/package.sh [-o OUTDIR] [ARCH...]
#
# VERSION comes from scripts/version.sh (git describe). The package holds
#   /usr/sbin/shaperd, /usr/bin/shaperctl (built with -X main.version=VERSION)
#   /lib/systemd/system/shaperd.service   systemd/shaperd.service with the
#                                         binaries' packaged paths
#   /etc/shaperd/shaperd.toml, users.toml the example configuration (conffiles;
#                                         socket_group = "shaperd")
#   /var/lib/shaperd                      state
#   /usr/share/doc/shaperd                copyright, changelog, README,
#                                         examples/: contrib's Grafana
#                                         dashboard and Prometheus alerts
#   /usr/share/man/man8/shaperd.8.gz, shaperctl.8.gz,
#   /usr/share/man/man5/shaperd.toml.5.gz docs/man (internal/cmd/genman; the
#                                         build stops when they are stale)
#   /usr/share/bash-completion/completions/shaperctl, /usr/share/zsh/
#   vendor-completions/_shaperctl, /usr/share/fish/vendor_completions.d/
#   shaperctl.fish                       shaperctl completion bash|zsh|fish
# postinst creates the system group "shaperd" (the control socket's read
# group) and reloads systemd's units; it never enables or starts shaperd.
# Needs go, git and dpkg-deb.
set -eu

usage() {
	echo "usage: scripts/package.sh [-o OUTDIR] [ARCH...]   (ARCH: amd64, arm64, ...; default amd64 arm64)" >&2
	exit 2
}

out=.
while getopts o:h opt; do
	case $opt in
	o) out=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- amd64 arm64

for tool in go git dpkg-deb gzip; do
	command -v "$tool" >/dev/null || {
		echo "package.sh: $tool is not installed" >&2
		exit 1
	}
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
version=$(scripts/version.sh)
describe=$(git describe --tags --always --dirty)
# The changelog's date: the last commit's, so a rebuild gives the same package.
date=$(git log -1 --format=%cd --date=rfc2822)
# dpkg-deb clamps file times to it: the same commit gives the same package.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
export SOURCE_DATE_EPOCH

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The man pages ship as committed; they must say what --help says.
go run ./internal/cmd/genman -check || {
	echo "package.sh: docs/man is out of date: run go run ./internal/cmd/genman and commit" >&2
	exit 1
}
# The completion scripts, from a shaperctl for this machine (the packaged
# ones may be for another architecture; the scripts are the same).
install -d "$work/completions"
go build -o "$work/shaperctl-host" ./cmd/shaperctl
for sh in bash zsh fish; do
	"$work/shaperctl-host" completion "$sh" >"$work/completions/$sh"
done

for arch in "$@"; do
	case $arch in
	amd64 | arm64) ;;
	*)
		echo "package.sh: unsupported architecture $arch (amd64 or arm64)" >&2
		exit 1
		;;
	esac

	root=$work/$arch
	rm -rf "$root"
	install -d -m 0755 "$root/DEBIAN" "$root/usr/sbin" "$root/usr/bin" \
		"$root/lib/systemd/system" "$root/etc/shaperd" "$root/usr/share/doc/shaperd"
	install -d -m 0750 "$root/var/lib/shaperd"

	for b in shaperd:usr/sbin shaperctl:usr/bin; do
		name=${b%%:*}
		# Position-independent (ASLR), as Debian builds its binaries; with
		# CGO_ENABLED=0 it needs no library, only the dynamic loader.
		CGO_ENABLED=0 GOOS=linux GOARCH=$arch \
			go build -buildmode=pie -trimpath -buildvcs=false \
			-ldflags "-s -w -X main.version=$version" \
			-o "$root/${b#*:}/$name" "./cmd/$name"
	done
	chmod 0755 "$root/usr/sbin/shaperd" "$root/usr/bin/shaperctl"

	# The unit in systemd/ runs binaries from /usr/local/bin (an install
	# from source); the package's are in /usr/sbin and /usr/bin.
	sed -e 's#/usr/local/bin/shaperd\b#/usr/sbin/shaperd#g' \
		-e 's#/usr/local/bin/shaperctl\b#/usr/bin/shaperctl#g' \
		systemd/shaperd.service >"$root/lib/systemd/system/shaperd.service"
	if grep -n /usr/local "$root/lib/systemd/system/shaperd.service" >&2; then
		echo "package.sh: systemd/shaperd.service names a /usr/local path the package does not rewrite" >&2
		exit 1
	fi
	chmod 0644 "$root/lib/systemd/system/shaperd.service"

	# The example configuration; the socket is readable by group shaperd.
	sed -e 's/^# *socket_group = .*/socket_group = "shaperd"/' \
		configs/shaperd.toml >"$root/etc/shaperd/shaperd.toml"
	if ! grep -q '^socket_group = "shaperd"$' "$root/etc/shaperd/shaperd.toml"; then
		echo "package.sh: configs/shaperd.toml has no '# socket_group = ...' line to set to shaperd" >&2
		exit 1
	fi
	install -m 0644 configs/users.toml "$root/etc/shaperd/users.toml"
	chmod 0644 "$root/etc/shaperd/shaperd.toml"

	# Man pages, compressed as Debian policy asks (-n: no name or time,
	# so the same commit gives the same package).
	install -d -m 0755 "$root/usr/share/man/man8" "$root/usr/share/man/man5"
	for page in shaperd.8:man8 shaperctl.8:man8 shaperd.toml.5:man5; do
		gzip -9n -c "docs/man/${page%%:*}" >"$root/usr/share/man/${page#*:}/${page%%:*}.gz"
		chmod 0644 "$root/usr/share/man/${page#*:}/${page%%:*}.gz"
	done
	install -d -m 0755 "$root/usr/share/bash-completion/completions" \
		"$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d"
	install -m 0644 "$work/completions/bash" "$root/usr/share/bash-completion/completions/shaperctl"
	install -m 0644 "$work/completions/zsh" "$root/usr/share/zsh/vendor-completions/_shaperctl"
	install -m 0644 "$work/completions/fish" "$root/usr/share/fish/vendor_completions.d/shaperctl.fish"

	doc=$root/usr/share/doc/shaperd
	install -m 0644 README.md "$doc/README.md"
	# The monitoring files: a Grafana dashboard and Prometheus alerts.
	install -d -m 0755 "$doc/examples"
	install -m 0644 contrib/grafana/shaperd.json "$doc/examples/grafana-shaperd.json"
	install -m 0644 contrib/prometheus/alerts.yml "$doc/examples/prometheus-alerts.yml"
	cat >"$doc/copyright" <<-COPYRIGHT
		Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
		Upstream-Name: shaperd
		Source: https://github.com/shaperd/shaperd

		Files: *
		Copyright: 2026 the shaperd authors
		License: none-yet
		 The shaperd repository carries no license file yet.
	COPYRIGHT
	cat >"$work/changelog" <<-CHANGELOG
		shaperd ($version) unstable; urgency=medium

		  * Built from git $describe.

		 -- shaperd maintainers <shaperd@users.noreply.github.com>  $date
	CHANGELOG
	gzip -9n -c "$work/changelog" >"$doc/changelog.gz"
	chmod 0644 "$doc/copyright" "$doc/changelog.gz"

	printf '%s\n' /etc/shaperd/shaperd.toml /etc/shaperd/users.toml >"$root/DEBIAN/conffiles"

	size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
	cat >"$root/DEBIAN/control" <<-CONTROL
		Package: shaperd
		Version: $version
		Architecture: $arch
		Maintainer: shaperd maintainers <shaperd@users.noreply.github.com>
		Installed-Size: $size
		Depends: adduser
		Recommends: iproute2
		Section: net
		Priority: optional
		Homepage: https://github.com/shaperd/shaperd
		Description: traffic-shaping daemon for routers
		 shaperd shapes users' bandwidth with HTB and TBF over netlink: tiers,
		 schedules, quotas and smooth rate changes from TOML files, kept in step
		 with the kernel by a reconcile loop. shaperctl inspects and changes it
		 at run time. iproute2's tc is not needed, but handy to look at the
		 kernel's queues.
	CONTROL

	cat >"$root/DEBIAN/postinst" <<-'POSTINST'
		#!/bin/sh
		set -e
		if [ "$1" = configure ]; then
		    # The control socket's read group (daemon.socket_group).
		    if ! getent group shaperd >/dev/null; then
		        addgroup --system --quiet shaperd
		    fi
		fi
		if [ "$1" = configure ] || [ "$1" = abort-upgrade ] || [ "$1" = abort-deconfigure ] || [ "$1" = abort-remove ]; then
		    # shaperd is neither enabled nor started: the operator edits
		    # /etc/shaperd first. deb-systemd-helper records the links an
		    # enable makes, so that purge removes them.
		    if command -v deb-systemd-helper >/dev/null; then
		        deb-systemd-helper update-state shaperd.service >/dev/null || true
		    fi
		    if [ -d /run/systemd/system ]; then
		        systemctl --system daemon-reload >/dev/null || true
		    fi
		fi
		exit 0
	POSTINST
	cat >"$root/DEBIAN/prerm" <<-'PRERM'
		#!/bin/sh
		set -e
		# Stopping leaves the kernel's shaping in place (shaperd --teardown
		# removes it); the binary is about to go.
		if [ "$1" = remove ] && [ -d /run/systemd/system ] && command -v deb-systemd-invoke >/dev/null; then
		    deb-systemd-invoke stop shaperd.service >/dev/null || true
		fi
		exit 0
	PRERM
	cat >"$root/DEBIAN/postrm" <<-'POSTRM'
		#!/bin/sh
		set -e
		if [ "$1" = remove ] || [ "$1" = purge ]; then
		    if [ -d /run/systemd/system ]; then
		        systemctl --system daemon-reload >/dev/null || true
		    fi
		fi
		if [ "$1" = purge ]; then
		    # Overrides, quota usage, class assignments, run-time users and
		    # nodes; the interface lock files of a daemon run outside
		    # systemd (the unit's RuntimeDirectory goes when it stops).
		    rm -rf /var/lib/shaperd /run/shaperd
		    # The links an operator's enable of the unit made.
		    if command -v deb-systemd-helper >/dev/null; then
		        deb-systemd-helper purge shaperd.service >/dev/null || true
		        deb-systemd-helper unmask shaperd.service >/dev/null || true
		    fi
		    # The group, unless operators put people in it.
		    if getent group shaperd >/dev/null && command -v delgroup >/dev/null; then
		        delgroup --system --only-if-empty --quiet shaperd || true
		    fi
		fi
		exit 0
	POSTRM
	chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles"
	chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

	deb=$out/shaperd_${version}_$arch.deb
	dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
	echo "$deb"
done
