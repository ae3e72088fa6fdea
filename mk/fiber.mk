# mk/fiber.mk - targets of the context-switch layer (included by Makefile).
#
#   make test-aarch64   cross-build the fiber layer and its tests for
#                       aarch64 (static) and run them under qemu-user;
#                       exit 77 (skip) without the toolchain.

.PHONY: test-aarch64
test-aarch64:
	@status=0; ./tools/aarch64-test.sh || status=$$?; \
	if [ $$status -eq 77 ]; then echo "test-aarch64: skipped"; \
	elif [ $$status -ne 0 ]; then exit $$status; fi
