#!/bin/sh
# man_lint.sh SRCROOT - lint every mdoc page with mandoc; exit 77 = skipped.
root=${1:-.}
command -v mandoc >/dev/null 2>&1 || { echo "mandoc not installed"; exit 77; }
set -- "$root"/man/man3/*.3 "$root"/man/man7/*.7
pages=
for p in "$@"; do [ -f "$p" ] && pages="$pages $p"; done
[ -n "$pages" ] || { echo "no man pages yet"; exit 77; }
# -Wwarning: warnings and worse change the exit status; style hints
# (e.g. "referenced manual not found") are reported but do not fail.
mandoc -Tlint -Wwarning $pages
