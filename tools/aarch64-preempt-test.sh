#!/bin/sh
# aarch64-preempt-test.sh - build the preemption tests (test_preempt,
# test_fn) for aarch64 with the cross compiler, dynamically linked (a static
# program has libc inside it and the involuntary path declines there), and
# run them under qemu-user with the cross libc. Epoll only (no aarch64
# liburing here). Exit status: 0 pass, 1 fail, 77 skipped.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
CC=${AARCH64_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
SYSROOT=${AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
command -v "$CC" >/dev/null 2>&1 || { echo "no $CC: skipped"; exit 77; }
command -v "$QEMU" >/dev/null 2>&1 || { echo "no $QEMU: skipped"; exit 77; }
[ -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ] || { echo "no $SYSROOT: skipped"; exit 77; }
out=$(mktemp -d /tmp/xtc-a64-preempt.XXXXXX)
trap 'rm -rf "$out"' EXIT
srcs=$(ls "$root"/csrc/*.c | grep -v '/sim\.c')
fail=0
for t in fn preempt; do
	if ! "$CC" -std=gnu11 -O2 -D_GNU_SOURCE -pthread -I"$root/csrc/include" \
		-I"$root/csrc" $srcs "$root/csrc/arch/switch_aarch64_aapcs_elf.S" \
		"$root/csrc/arch/preempt_aarch64_aapcs_elf.S" \
		"$root/test/test_$t.c" -lm -o "$out/test_$t"; then
		echo "aarch64-preempt-test: build of test_$t failed"
		exit 1
	fi
	if "$QEMU" -L "$SYSROOT" "$out/test_$t"; then
		echo "aarch64-preempt-test: PASS test_$t"
	else
		echo "aarch64-preempt-test: FAIL test_$t"
		fail=1
	fi
done
exit $fail
