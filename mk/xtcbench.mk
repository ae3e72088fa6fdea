# xtcbench: the head-to-head benchmark (xtc vs Go's runtime), cmd/xtcbench.
#
#   make run-xtcbench        short run (<= 3 min on 2 cores) -> docs/xtcbench
#   make run-xtcbench-full   every load point, longer runs   -> xtcbench-out
#   make test-xtcbench       the tool's own Go tests
#
# XTCBENCH_FLAGS adds flags, e.g. XTCBENCH_FLAGS="--only tail --dists A1".
# The tool is its own module (cmd/xtcbench/go.mod, replace => ../..), so
# its plotting dependencies never reach the library's module graph; the
# recipes run inside it. XTCBENCH_OUT is relative to the repository root.

XTCBENCH_OUT ?= docs/xtcbench
XTCBENCH_FLAGS ?=

.PHONY: run-xtcbench run-xtcbench-full test-xtcbench

run-xtcbench:
	cd cmd/xtcbench && $(GO) run . --short --out $(abspath $(XTCBENCH_OUT)) $(XTCBENCH_FLAGS)

run-xtcbench-full:
	cd cmd/xtcbench && $(GO) run . --full --out $(abspath xtcbench-out) $(XTCBENCH_FLAGS)

test-xtcbench:
	cd cmd/xtcbench && $(GO) test -count=1 .
