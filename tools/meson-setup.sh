#!/bin/sh
# meson-setup.sh BUILDDIR [meson options...]
#
# Configure BUILDDIR if it does not exist; reconfigure it when the options
# or the set of files under csrc/ test/ bench/ examples/ man/ changed since
# the last run. meson.build picks sources with fs.is_file() (modules are
# written concurrently), and meson does not watch directories, so a new
# file needs a reconfigure to be built.
set -eu
dir=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
want=$( { printf '%s\n' "$@"; find csrc test bench examples man \
	-type f \( -name '*.c' -o -name '*.S' -o -name '*.h' -o -name '*.[37]' \
	-o -name 'meson.build' \) 2>/dev/null | LC_ALL=C sort; } | cksum)
stamp=$dir/.xtc-setup-stamp
if [ -f "$dir/build.ninja" ]; then
	if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
		exit 0
	fi
	set -- --reconfigure "$@"
else
	rm -rf "$dir"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
meson setup "$dir" "$@" >"$log" 2>&1 || { cat "$log"; exit 1; }
printf '%s\n' "$want" >"$stamp"
sed -n '/^xtc /,$p' "$log"
