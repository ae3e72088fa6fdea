#!/bin/sh
# header_check.sh HEADER INCDIR CC [CC args...]
# A public header must compile on its own (first include, twice for the
# guard) with no warning, in strict C11. Run at test time rather than build
# time, so a broken header fails this test instead of the whole build.
set -eu
h=$1 inc=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include "%s"\n#include "%s"\nint main(void) { return 0; }\n' \
	"$h" "$h" >"$tmp/t.c"
"$@" -std=c11 -Wall -Wextra -Werror -pedantic-errors -I"$inc" \
	-c "$tmp/t.c" -o "$tmp/t.o"
