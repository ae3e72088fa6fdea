#!/bin/sh
# test_layers.sh LIBXTC_A LAYERS [NM [CSRC]] - no runtime object references
# a symbol of a layer above its own (tools/layers.txt), and no runtime file
# includes the internal header of a layer above its own (CSRC given: each
# `#include "X_int.h"` of csrc/*.c, csrc/*.h and csrc/arch/*.S is an edge
# to the layer of X, the header's owner), except the edges the table lists
# as debt; a debt entry that no longer occurs fails too, so the table stays
# exact.
set -eu
lib=$1 table=$2 nm=${3:-nm} csrc=${4:-}
command -v "$nm" >/dev/null 2>&1 || { echo "test_layers: no nm"; exit 77; }
{
"$nm" -A "$lib" 2>/dev/null | sed 's/^/N /'
if [ -n "$csrc" ]; then
	# file:#include "X_int.h" -> I file X
	grep -H '^#include "[a-z0-9_]*_int\.h"' "$csrc"/*.c "$csrc"/*.h \
	    "$csrc"/arch/*.S 2>/dev/null |
	sed 's|^.*/\([a-z0-9_]*\)\.[chS]:#include "\([a-z0-9_]*\)_int\.h".*|I \1 \2|'
fi
} | awk -v table="$table" '
function base(m) {
	sub(/^.*:/, "", m); sub(/^csrc_(arch_)?/, "", m); sub(/\.[cS]\.o$/, "", m)
	return m
}
BEGIN {
	while ((getline l < table) > 0) {
		if (l ~ /^layer /) {
			split(l, p, ":"); name = p[1]; sub(/^layer /, "", name)
			n = split(p[2], fs, " ")
			for (i = 1; i <= n; i++) layer[fs[i]] = name
			known[name] = 1
		} else if (l ~ /^allow /) {
			split(l, p, ":"); name = p[1]; sub(/^allow /, "", name)
			n = split(p[2], ls, " ")
			for (i = 1; i <= n; i++) allow[name, ls[i]] = 1
		} else if (l ~ /^debt /) {
			split(l, p, " "); debt[p[2] " -> " p[4]] = 0
		}
	}
}
$1 == "I" {
	# an include: file $2 (a header X_int.h counts as X) -> owner $3
	from = $2; sub(/_int$/, "", from)
	if (!(from in layer)) { print "test_layers: " $2 " is in no layer (tools/layers.txt)"; bad = 1; next }
	if (!($3 in layer)) { print "test_layers: the owner of " $3 "_int.h is in no layer (tools/layers.txt)"; bad = 1; next }
	edge(from, $3, "#include \"" $3 "_int.h\"")
	next
}
{
	sub(/^N /, "")
	# archive:member:value type name  |  archive:member:         U name
	split($1, q, ":"); obj = base(q[2])
	if (NF == 3) { type = $2; sym = $3 } else if (NF == 2) { type = $1; sym = $2; split($0, q, ":"); obj = base(q[2]) } else next
	if (type == "U") { uses[obj, sym] = 1; objs[obj] = 1; next }
	if (type ~ /^[TDBRC]$/) strong[sym] = obj
	if (type ~ /^[WV]$/) weak[sym] = obj
	objs[obj] = 1
}
END {
	for (o in objs) if (!(o in layer)) { print "test_layers: " o " is in no layer (tools/layers.txt)"; bad = 1 }
	for (k in uses) {
		split(k, p, SUBSEP); from = p[1]; sym = p[2]
		if (!(sym in strong)) continue
		# the C library entry points the runtime interposes
		# (preempt_locks.c) are libc API, not an edge between layers
		if (sym ~ /^pthread_/) continue
		edge(from, strong[sym], sym)
	}
	for (sym in weak) if ((sym in strong) && strong[sym] != weak[sym])
		edge(weak[sym], strong[sym], sym " (weak stub)")
	for (d in debt) if (debt[d] == 0) { print "test_layers: debt " d " no longer occurs: remove it"; bad = 1 }
	exit bad
}
function edge(from, to, sym,   lf, lt, key) {
	if (from == to) return
	lf = layer[from]; lt = layer[to]
	if (lf == "" || lt == "" || lf == lt || ((lf, lt) in allow)) return
	key = from " -> " to
	if (key in debt) { debt[key]++; return }
	if (!(key in reported)) {
		print "test_layers: " from " (" lf ") references " sym " of " to " (" lt ")"
		reported[key] = 1
	}
	bad = 1
}'
