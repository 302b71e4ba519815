#!/bin/sh
# version.sh prints shaperd's version as a Debian-valid version string, from
# `git describe --tags --always --dirty` in this checkout:
#
#   v1.2.3                     -> 1.2.3
#   v1.2.3-5-gabc1234          -> 1.2.3+git20261202.5.abc1234   (5 commits after v1.2.3)
#   abc1234 (no tag)           -> 0.0~git20261202.abc1234
#   ...-dirty (local changes)  -> the above + ".dirty"
#
# The date is the last commit's (UTC), so the same commit always gives the
# same version. The version is what `shaperd --version`, `shaperctl
# --version`, the shaperd_build_info metric and the package show; build
# with it:  go build -ldflags "-X main.version=$(scripts/version.sh)" ./cmd/...
set -eu
cd "$(dirname "$0")/.."

desc=$(git describe --tags --always --dirty 2>/dev/null) || {
	echo "version.sh: not a git checkout (git describe failed)" >&2
	exit 1
}
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d)

dirty=
case $desc in
*-dirty)
	desc=${desc%-dirty}
	dirty=.dirty
	;;
esac

# A tag: drop a leading "v"; Debian versions start with a digit.
if tag=$(git describe --tags --abbrev=0 2>/dev/null); then
	base=${tag#v}
	case $base in
	[0-9]*) ;;
	*)
		echo "version.sh: tag $tag does not start with a digit (after an optional v)" >&2
		exit 1
		;;
	esac
	base=$(printf '%s' "$base" | tr -- '-_' '~~')
	if [ "$desc" = "$tag" ]; then
		v=$base
	else
		rest=${desc#"$tag"-}      # N-gHASH
		n=${rest%%-*}
		hash=${rest##*-g}
		v=$base+git$date.$n.$hash
	fi
else
	v=0.0~git$date.$desc
fi
v=$v$dirty

# Debian policy: upstream_version without a revision may contain only
# alphanumerics and . + ~ and must start with a digit.
if ! printf '%s\n' "$v" | grep -Eq '^[0-9][A-Za-z0-9.+~]*$'; then
	echo "version.sh: $desc gives $v, not a valid Debian version" >&2
	exit 1
fi
printf '%s\n' "$v"
