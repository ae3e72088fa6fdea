# mk/completion.mk - blocking pool, futures and the Go completion queue.
#
#   make bench-completion   goroutine -> C fiber -> goroutine round trip
#                           (p50/p99 ns) next to a Go channel round trip,
#                           and pipelined Submit throughput
#   make test-completion    the C tests (blocking, future) in build/ and the
#                           Go tests of Submit/Future, also under -race

.PHONY: bench-completion test-completion

bench-completion:
	$(GO) test -run '^$$' -bench 'SubmitRoundTrip|GoChannelRoundTrip|SubmitPipelined' \
		-benchtime 5000x -count 3 .

test-completion: build
	meson test -C build blocking future
	$(GO) test -count=1 -run 'Submit|Blocking|Example(Submit|Future)' .
	$(GO) test -race -count=1 -run 'Submit|Blocking|Example(Submit|Future)' .
