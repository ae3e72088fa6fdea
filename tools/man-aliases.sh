#!/bin/sh
# Prints "function page" for every function a man3 page names with .Nm
# (other than the page's own name), so meson can install man3/<function>.3
# as a link to <page>.3 and `man xtc_send` finds xtc_proc(3).
cd "${MESON_SOURCE_ROOT:-$(dirname "$0")/..}" || exit 1
for p in man/man3/*.3; do
	b=$(basename "$p" .3)
	sed -n 's/^[.]Nm \([a-z_0-9]*\).*/\1/p' "$p" | sort -u |
	while read -r n; do
		[ "$n" != "$b" ] && echo "$n $b"
	done
done | sort -u -k1,1
