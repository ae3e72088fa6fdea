#!/bin/bash
# freeze-hunt.sh - run test programs repeatedly while freezing the whole
# process (SIGSTOP, then SIGCONT) at random points: what a busy host does
# to a guest, or a cgroup quota to a container, but on demand. Every
# thread stops at once, so timers and deadlines come due together and
# threads resume in an order the scheduler picks: a test that assumes
# "this 30 ms sleep cannot end before that 1 ms one is acted on" or "the
# monitor thread runs within the slice" fails here within a few runs.
#
#   tools/freeze-hunt.sh [-t] [-n runs] [-f freeze_ms] [-g max_gap_ms] prog...
#
# Each prog (a path, with no arguments) runs `runs` times (default 5),
# frozen for freeze_ms (default 40) after random gaps of 10 to max_gap_ms
# (default 90). -t freezes one thread at a time instead of the whole
# process (tools/freeze-thread.py, ptrace): the other threads run on, so
# a test that assumes one thread acts within some time of another (a
# setter after 20 ms, a fiber's 1 ms wait first) fails here. Prints one
# line per program, and the output of every failed run; exits 1 if any
# run failed (exit status 77 is a skip, as in meson). `make freeze-hunt`
# runs it over the unit and stress tests of build/, `make
# freeze-hunt-asan` / `-tsan` over the sanitizer builds.
set -u
runs=5 freeze=40 gap=90 threads=0
while getopts "tn:f:g:" o; do
	case $o in
	t) threads=1 ;;
	n) runs=$OPTARG ;;
	f) freeze=$OPTARG ;;
	g) gap=$OPTARG ;;
	*) sed -n '2,21p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { sed -n '2,21p' "$0"; exit 2; }
[ "$gap" -gt 10 ] || { echo "freeze-hunt: -g must exceed 10" >&2; exit 2; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
ms() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }
bad=0
for prog in "$@"; do
	fails=0 skips=0 t0=$SECONDS
	for i in $(seq 1 "$runs"); do
		"$prog" >"$out" 2>&1 &
		pid=$!
		if [ "$threads" = 1 ]; then
			python3 "$(dirname "$0")/freeze-thread.py" "$pid" "$freeze" \
				"$gap" &
			fz=$!
			wait "$pid"
			st=$?
			kill "$fz" 2>/dev/null
			wait "$fz" 2>/dev/null
		fi
		while [ "$threads" = 0 ] && kill -0 "$pid" 2>/dev/null; do
			sleep "$(ms $((10 + RANDOM % (gap - 10))))"
			kill -STOP "$pid" 2>/dev/null || break
			sleep "$(ms "$freeze")"
			kill -CONT "$pid" 2>/dev/null
		done
		[ "$threads" = 1 ] || { wait "$pid"; st=$?; }
		if [ "$st" = 77 ]; then # skipped (the meson convention)
			skips=$((skips + 1))
		elif [ "$st" != 0 ]; then
			fails=$((fails + 1))
			echo "--- $prog: run $i failed"
			grep -v ' ok$' "$out" | tail -40
		fi
	done
	sk=
	[ "$skips" = 0 ] || sk=", $skips skipped"
	echo "$prog: $fails of $runs failed$sk ($((SECONDS - t0)) s)"
	[ "$fails" -eq 0 ] || bad=1
done
exit $bad
