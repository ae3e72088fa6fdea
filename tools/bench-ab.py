#!/usr/bin/env python3
"""bench-ab.py REPS BEFORE AFTER BENCH [BENCH...] - an interleaved A/B of the
C microbenchmarks of two builds (e.g. the tree before and after a change).

BEFORE and AFTER are source trees with a meson build in build/ (build the
bench targets in both first). Each repetition runs every BENCH (an
executable name of build/bench/, optionally with arguments in one quoted
word: "bench_park 20000 1024") of the two builds back to back, alternating
which goes first, so machine noise falls on both alike. Prints one Markdown
row per result line (`name value unit`): medians with [min..max] and the
after/before ratios of the medians and of the minima, and the load average
at the start of each repetition. A shared machine's noise is in the
spreads: read a ratio only next to them, and prefer the *_cpu rows (thread
CPU time), which another process's CPU use does not inflate.
"""
import collections
import os
import statistics
import subprocess
import sys


def main(argv):
    if len(argv) < 5:
        sys.stderr.write(__doc__)
        return 2
    reps, trees, benches = int(argv[1]), {"before": argv[2], "after": argv[3]}, argv[4:]
    res = {s: collections.defaultdict(list) for s in trees}
    loads = []
    for r in range(reps):
        loads.append(os.getloadavg()[0])
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for b in benches:
            words = b.split()
            for side in order:
                exe = os.path.join(trees[side], "build", "bench", words[0])
                try:
                    out = subprocess.run([exe] + words[1:], capture_output=True,
                                         text=True, timeout=600).stdout
                except subprocess.TimeoutExpired:
                    continue
                for line in out.splitlines():
                    p = line.split()
                    if len(p) < 3:
                        continue
                    try:
                        v = float(p[1])
                    except ValueError:
                        continue
                    res[side][(words[0], p[0], p[2])].append(v)
    print("reps=%d, load average at each repetition: %s" %
          (reps, " ".join("%.1f" % l for l in loads)))
    print("| bench | result | before median [min..max] | after median [min..max] | after/before median | min |")
    print("|---|---|---|---|---|---|")
    for k in sorted(res["before"]):
        a, b = res["before"][k], res["after"].get(k)
        if not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        print("| %s | %s (%s) | %.4g [%.4g..%.4g] | %.4g [%.4g..%.4g] | %.3f | %.3f |" % (
            k[0], k[1], k[2], ma, min(a), max(a), mb, min(b), max(b),
            mb / ma if ma else 0, min(b) / min(a) if min(a) else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
