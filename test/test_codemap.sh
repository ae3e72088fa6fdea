#!/bin/sh
# test_codemap.sh LIBXTC_A TEST_CODEMAP [NM READELF] - the preemption code
# map covers every runtime object (rtcode_int.h):
#  1. every object of libxtc.a has an xtc_rtmap record and no executable
#     section other than the ones rtcode_int.h brackets (a file without the
#     include, or -ffunction-sections, fails here, naming the object);
#  2. one function of every object is not preemptible in TEST_CODEMAP
#     (test_codemap.c, given NAME=ADDRESS pairs from nm).
set -eu
lib=$1 exe=$2 nm=${3:-nm} readelf=${4:-readelf}
command -v "$nm" >/dev/null 2>&1 && command -v "$readelf" >/dev/null 2>&1 ||
	{ echo "test_codemap: no nm/readelf"; exit 77; }
bad=$("$readelf" -SW "$lib" | awk '
	/^File: / { f = $2; obj[f] = 1; next }
	/^ *\[ *[0-9]+\]/ {
		sub(/^ *\[ *[0-9]+\] */, "")
		name = $1; size = $5; flags = $7
		if (name == "xtc_rtmap") rec[f] = 1
		ok = name ~ /^\.text(\.(unlikely|hot|startup|exit)\.?)?$/
		if (flags ~ /X/ && size !~ /^0+$/ && !ok)
			print f ": executable section " name " outside the code map"
	}
	END { for (f in obj) if (!(f in rec))
		print f ": no xtc_rtmap record (#include \"rtcode_int.h\" first)" }')
if [ -n "$bad" ]; then echo "$bad"; exit 1; fi
# One function per object, unique by name in the executable.
syms=$(mktemp)
trap 'rm -f "$syms"' EXIT
"$nm" "$exe" | awk '$2 ~ /^[tT]$/ { n[$3]++; a[$3] = $1 }
	END { for (s in n) if (n[s] == 1) print s, a[s] }' > "$syms"
main=$(awk '$1 == "main" { print $2 }' "$syms")
args=$("$nm" --defined-only "$lib" 2>/dev/null | awk -v syms="$syms" '
	BEGIN { while ((getline l < syms) > 0) { split(l, p, " "); addr[p[1]] = p[2] } }
	/:$/ { obj = $1; sub(/:$/, "", obj); next }
	NF == 3 && $2 ~ /^[tT]$/ && !(obj in got) && ($3 in addr) {
		got[obj] = 1; printf "%s:%s=%s\n", obj, $3, addr[$3] }')
nobj=$("$readelf" -SW "$lib" | grep -c '^File: ')
nargs=$(printf '%s\n' "$args" | grep -c . || true)
if [ "$nargs" -ne "$nobj" ]; then
	echo "test_codemap: found a function for $nargs of $nobj objects"; exit 1
fi
# shellcheck disable=SC2086
"$exe" "main=$main" $args
