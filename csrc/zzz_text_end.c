/*
 * zzz_text_end.c - the end of the runtime's machine code in the Go build.
 *
 * The Go toolchain links the package's C objects contiguously in file-name
 * order (the zz_csrc_* shims), and `go run` / `go test` strip the symbol
 * table, so preempt.c cannot find the runtime's functions by name there.
 * This file sorts last and arch/preempt_x86_64_sysv_elf.S first: the code
 * between xtc__rt_text_begin and this function is the runtime, which the
 * involuntary preemption path never interrupts. The pair is checked for
 * sanity (both ends around known runtime functions) before use. meson
 * builds do not compile this file: they keep their symbol table.
 */
#include "xtc.h"

void xtc__rt_text_end(void);

__attribute__((used, noinline)) void xtc__rt_text_end(void)
{
	__asm__ volatile("");
}
