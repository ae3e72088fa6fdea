# xtcbench: the head-to-head benchmark (xtc vs Go's runtime), cmd/xtcbench.
#
#   make run-xtcbench        short run (<= 3 min on 2 cores) -> docs/xtcbench
#   make run-xtcbench-full   every load point, longer runs   -> xtcbench-out
#   make test-xtcbench       the tool's own Go tests
#
# XTCBENCH_FLAGS adds flags, e.g. XTCBENCH_FLAGS="--only tail --dists A1".

XTCBENCH_OUT ?= docs/xtcbench
XTCBENCH_FLAGS ?=

.PHONY: run-xtcbench run-xtcbench-full test-xtcbench

run-xtcbench:
	$(GO) run ./cmd/xtcbench --short --out $(XTCBENCH_OUT) $(XTCBENCH_FLAGS)

run-xtcbench-full:
	$(GO) run ./cmd/xtcbench --full --out xtcbench-out $(XTCBENCH_FLAGS)

test-xtcbench:
	$(GO) test -count=1 ./cmd/xtcbench
