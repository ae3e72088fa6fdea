#!/bin/sh
# test_docs.sh SRCROOT - documentation coverage (suite docs).
#
# Fails when the manual and the public headers drift apart:
#  1. every public header csrc/include/xtc_*.h has its page man/man3/<name>.3
#     (xtc.h and xtc_errors.h share man/man3/xtc.3);
#  2. every public function (XTC_API or static inline in a header) is named
#     with .Nm on some man3 page, and every .Nm of a man3 page is a function
#     or macro that a header still declares (no documentation of removed API);
#  3. the overview page man/man7/xtc.7 lists every man3 page with .Xr, and
#     README.md's header table names every public header;
#  4. when a C compiler command is given after SRCROOT, every complete program
#     (a literal block with a main function) in an EXAMPLES section compiles
#     against the public headers, warnings as errors.
# mandoc -Tlint itself runs in test/man_lint.sh (test "man-lint").
#
# Usage: test_docs.sh SRCROOT [CC ARGS...]
root=${1:-.}
[ $# -gt 0 ] && shift
inc="$root/csrc/include"
man3="$root/man/man3"
ov="$root/man/man7/xtc.7"
fail=0
err() { echo "FAIL: $*"; fail=1; }

[ -d "$inc" ] || { echo "no $inc"; exit 77; }

# 1. header -> page
for h in "$inc"/xtc.h "$inc"/xtc_*.h; do
	[ -f "$h" ] || continue
	b=$(basename "$h" .h)
	case "$b" in xtc_errors) b=xtc ;; esac
	[ -f "$man3/$b.3" ] || err "$(basename "$h") has no man page man/man3/$b.3"
done

# 2a. function -> .Nm (on any man3 page)
documented=$(cat "$man3"/*.3 2>/dev/null |
	sed -n 's/^\.Nm \([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' | sort -u)
for h in "$inc"/xtc.h "$inc"/xtc_*.h; do
	[ -f "$h" ] || continue
	# join lines, drop comments, then take the name before "(" in every
	# declaration that starts with XTC_API or static inline
	fns=$(tr '\n' ' ' <"$h" | sed 's|/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/||g' |
		grep -oE '(XTC_API|static inline)[^;{}()]*[ *]xtc_[A-Za-z0-9_]+[ ]*\(' |
		grep -oE 'xtc_[A-Za-z0-9_]+[ ]*\($' | tr -d ' (' | sort -u)
	for f in $fns; do
		echo "$documented" | grep -qx "$f" ||
			err "$f ($(basename "$h")) is not named (.Nm) on any man page"
	done
done

# 2b. .Nm -> still declared somewhere in the headers
all_headers=$(cat "$inc"/*.h)
for f in $documented; do
	echo "$all_headers" | grep -qw "$f" ||
		err "man page names $f, which no public header declares"
done

# 3. overview lists every man3 page
if [ -f "$ov" ]; then
	for p in "$man3"/*.3; do
		[ -f "$p" ] || continue
		b=$(basename "$p" .3)
		grep -q "^\.Xr $b 3" "$ov" || err "man/man7/xtc.7 does not list $b(3)"
	done
else
	err "man/man7/xtc.7 is missing"
fi
if [ -f "$root/README.md" ]; then
	for h in "$inc"/xtc*.h; do
		[ -f "$h" ] || continue
		b=$(basename "$h")
		grep -q "^| .*\`$b\`" "$root/README.md" ||
			err "README.md header table does not name $b"
	done
fi

# 4. man page example programs compile
if [ $# -gt 0 ]; then
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	for p in "$man3"/*.3 "$root"/man/man7/*.7; do
		[ -f "$p" ] || continue
		b=$(basename "$p")
		# literal blocks -> files; \e is a backslash, \& a zero-width escape
		awk -v out="$tmp/$b" '
			/^\.Bd -literal/ { inb = 1; n++; f = out "." n ".c"; next }
			/^\.Ed/ { inb = 0; next }
			inb { gsub(/\\e/, "\\"); gsub(/\\&/, ""); print > f }
		' "$p"
	done
	for f in "$tmp"/*.c; do
		[ -f "$f" ] || continue
		grep -q '^main(void)\|^int main(' "$f" || continue
		"$@" -std=gnu11 -fsyntax-only -Wall -Wextra -Werror \
			-Wno-unused-parameter -I"$inc" "$f" 2>"$f.log" ||
			{ err "example in $(basename "$f" | sed 's/\.[0-9]*\.c$//') does not compile:"; cat "$f.log"; }
	done
fi

[ $fail -eq 0 ] && echo "docs coverage: ok"
exit $fail
