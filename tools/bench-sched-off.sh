#!/bin/sh
# bench-sched-off.sh [REPS] - yield and spawn with lane policies built but
# unused (build/, the default -Dsched_policy=true) against a build without
# them (build-nopolicy-bench/, -Dsched_policy=false): the zero-cost claim of
# xtc_sched(3). Builds both, then runs bench_yield and bench_spawn from the
# two builds alternately (which goes first alternates too), REPS rounds
# (default 5) after one warm-up round, and prints per figure the median of
# each build, the spread (min..max) and the median of the per-round ratio
# on/off. Reports, never asserts; prints the load average (other work on
# the machine moves wall-clock figures; the *_cpu rows are thread CPU time).
set -eu
reps=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tools/meson-setup.sh build >/dev/null
tools/meson-setup.sh build-nopolicy-bench -Dsched_policy=false -Dtests=false >/dev/null
for b in build build-nopolicy-bench; do
	meson compile -C "$b" bench/bench_yield bench/bench_spawn >/dev/null
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# By construction: every object but the two feature files has the same
# machine code in both builds (only sched.c and batch.c test the option).
same=0 diff=""
for a in build/libxtc.so.0.1.0.p/csrc_*.c.o; do
	f=$(basename "$a")
	b=build-nopolicy-bench/libxtc.so.0.1.0.p/$f
	[ -f "$b" ] || continue
	objcopy -O binary -j .text "$a" "$out/a.bin"
	objcopy -O binary -j .text "$b" "$out/b.bin"
	if cmp -s "$out/a.bin" "$out/b.bin"; then same=$((same + 1))
	else diff="$diff ${f#csrc_}"; fi
done
echo ".text identical in $same objects; differs in:${diff:- none}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 0 "$reps"); do
	if [ $((r % 2)) -eq 0 ]; then order="build build-nopolicy-bench"
	else order="build-nopolicy-bench build"; fi
	for b in $order; do
		tag=on; [ "$b" = build ] || tag=off
		for x in yield spawn; do
			"$b/bench/bench_$x" >"$out/$tag.$x.$r" 2>/dev/null
		done
	done
done
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v reps="$reps" -v dir="$out" 'BEGIN {
	n = split("yield yield_self yield_budget yield_cpu spawn spawn_burst spawn_one spawn_task spawn_cpu", names, " ")
	for (r = 1; r <= reps; r++) for (t = 0; t < 2; t++) {
		tag = t ? "off" : "on"
		for (x = 0; x < 2; x++) {
			f = dir "/" tag "." (x ? "spawn" : "yield") "." r
			while ((getline line < f) > 0) {
				split(line, a, " "); v[tag, a[1], r] = a[2]
			}
			close(f)
		}
	}
	printf "%-14s %12s %22s %12s %22s %10s\n", "figure", "on (ns)", "on min..max", "off (ns)", "off min..max", "on/off"
	for (i = 1; i <= n; i++) {
		nm = names[i]
		for (t = 0; t < 2; t++) {
			tag = t ? "off" : "on"; c = 0
			for (r = 1; r <= reps; r++) if ((tag, nm, r) in v) s[t, ++c] = v[tag, nm, r] + 0
			med[t] = median(s, t, c); lo[t] = mn; hi[t] = mx
		}
		c = 0
		for (r = 1; r <= reps; r++) if (("on", nm, r) in v && ("off", nm, r) in v && v["off", nm, r] > 0)
			s[2, ++c] = v["on", nm, r] / v["off", nm, r]
		rat = median(s, 2, c)
		printf "%-14s %12.2f %10.2f..%-10.2f %12.2f %10.2f..%-10.2f %10.3f\n", nm, med[0], lo[0], hi[0], med[1], lo[1], hi[1], rat
	}
}
function median(s, t, c,   i, j, tmp) {
	for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++)
		if (s[t, j] < s[t, i]) { tmp = s[t, i]; s[t, i] = s[t, j]; s[t, j] = tmp }
	mn = s[t, 1]; mx = s[t, c]
	return c % 2 ? s[t, (c + 1) / 2] : (s[t, c / 2] + s[t, c / 2 + 1]) / 2
}'
