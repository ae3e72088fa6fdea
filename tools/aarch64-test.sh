#!/bin/sh
# aarch64-test.sh - build the fiber layer and its tests for aarch64 with the
# cross compiler (static, so no aarch64 sysroot is needed at run time) and
# run them under qemu-user. Both substrates are tested: the assembly switch
# (csrc/arch/switch_aarch64_aapcs_elf.S) and the ucontext fallback.
#
# Exit status: 0 pass, 1 fail, 77 skipped (toolchain or qemu missing).
# Debian packages: gcc-aarch64-linux-gnu qemu-user.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
CC=${AARCH64_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU_AARCH64:-qemu-aarch64}

if ! command -v "$CC" >/dev/null 2>&1; then
	echo "aarch64-test: $CC not found (apt-get install gcc-aarch64-linux-gnu); skipping"
	exit 77
fi
if ! command -v "$QEMU" >/dev/null 2>&1; then
	echo "aarch64-test: $QEMU not found (apt-get install qemu-user); skipping"
	exit 77
fi

out=${AARCH64_OUT:-$(mktemp -d /tmp/xtc-aarch64.XXXXXX)}
mkdir -p "$out"
cflags="-std=gnu11 -O2 -g -Wall -Wextra -Werror -static -pthread \
-I$root/csrc/include -I$root/csrc"
srcs="$root/csrc/fiber_stack.c $root/csrc/fiber.c $root/csrc/fiber_ucontext.c \
$root/csrc/arch/switch_aarch64_aapcs_elf.S"

fail=0
run() { # name binary args...
	name=$1; shift
	if "$QEMU" "$@"; then
		echo "aarch64-test: PASS $name"
	else
		echo "aarch64-test: FAIL $name (status $?)"
		fail=1
	fi
}

for sub in asm ucontext; do
	def=""
	[ "$sub" = ucontext ] && def="-DXTC_CORO_UCONTEXT"
	# shellcheck disable=SC2086
	if ! $CC $cflags $def -o "$out/test_fiber_$sub" $srcs \
		"$root/test/test_fiber.c" -lm; then
		echo "aarch64-test: FAIL build test_fiber ($sub)"
		exit 1
	fi
	# shellcheck disable=SC2086
	if ! $CC $cflags $def -o "$out/test_stack_overflow_$sub" $srcs \
		"$root/test/test_stack_overflow.c"; then
		echo "aarch64-test: FAIL build test_stack_overflow ($sub)"
		exit 1
	fi
	run "test_fiber ($sub)" "$out/test_fiber_$sub"
	# Without binfmt_misc the child cannot exec an aarch64 binary, so
	# the test runs its child part in the forked process instead.
	XTC_TEST_NOEXEC=1 run "test_stack_overflow ($sub)" \
		"$out/test_stack_overflow_$sub"
done

# Switch cost under emulation means little, but the bench must run.
# shellcheck disable=SC2086
if $CC $cflags -o "$out/bench_switch" $srcs "$root/bench/bench_switch.c" -lm; then
	XTC_BENCH_QUICK=1 run "bench_switch (emulated, figures not meaningful)" \
		"$out/bench_switch"
else
	echo "aarch64-test: FAIL build bench_switch"
	fail=1
fi

[ -z "${AARCH64_OUT:-}" ] && rm -rf "$out"
exit $fail
