#!/bin/bash
# freeze-hunt.sh - run test programs repeatedly while freezing the whole
# process (SIGSTOP, then SIGCONT) at random points: what a busy host does
# to a guest, or a cgroup quota to a container, but on demand. Every
# thread stops at once, so timers and deadlines come due together and
# threads resume in an order the scheduler picks: a test that assumes
# "this 30 ms sleep cannot end before that 1 ms one is acted on" or "the
# monitor thread runs within the slice" fails here within a few runs.
#
#   tools/freeze-hunt.sh [-n runs] [-f freeze_ms] [-g max_gap_ms] prog...
#
# Each prog (a path, with no arguments) runs `runs` times (default 5),
# frozen for freeze_ms (default 40) after random gaps of 10 to max_gap_ms
# (default 90). Prints one line per program, and the output of every
# failed run; exits 1 if any run failed. `make freeze-hunt` runs it over
# the unit and stress tests of build/.
set -u
runs=5 freeze=40 gap=90
while getopts "n:f:g:" o; do
	case $o in
	n) runs=$OPTARG ;;
	f) freeze=$OPTARG ;;
	g) gap=$OPTARG ;;
	*) sed -n '2,17p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { sed -n '2,17p' "$0"; exit 2; }
[ "$gap" -gt 10 ] || { echo "freeze-hunt: -g must exceed 10" >&2; exit 2; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
ms() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }
bad=0
for prog in "$@"; do
	fails=0 t0=$SECONDS
	for i in $(seq 1 "$runs"); do
		"$prog" >"$out" 2>&1 &
		pid=$!
		while kill -0 "$pid" 2>/dev/null; do
			sleep "$(ms $((10 + RANDOM % (gap - 10))))"
			kill -STOP "$pid" 2>/dev/null || break
			sleep "$(ms "$freeze")"
			kill -CONT "$pid" 2>/dev/null
		done
		if ! wait "$pid"; then
			fails=$((fails + 1))
			echo "--- $prog: run $i failed"
			grep -v ' ok$' "$out" | tail -40
		fi
	done
	echo "$prog: $fails of $runs failed ($((SECONDS - t0)) s)"
	[ "$fails" -eq 0 ] || bad=1
done
exit $bad
