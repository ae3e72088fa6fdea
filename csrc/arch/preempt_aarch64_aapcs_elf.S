/*
 * preempt_aarch64_aapcs_elf.S - involuntary preemption trampoline, AArch64
 * AAPCS64, ELF (Linux).
 *
 * AArch64 has no memory-indirect branch, so a trampoline that restores every
 * general register cannot jump back to the interrupted PC without spending
 * one of them (Go reserves R27 for this; C code reserves nothing). We
 * resume through the kernel instead: the handler (preempt.c) copies the
 * whole signal frame (siginfo + ucontext: x0-x30, sp, pc, pstate, and the
 * FP/SIMD record with v0-v31, FPSR, FPCR) onto the fiber's own stack, below
 * a 128-byte gap, and points the interrupted context at this trampoline
 * with sp = the copy. Here we yield (an ordinary call: the copy is above
 * sp, untouched), and when the fiber is resumed, rt_sigreturn on the copy
 * restores every register bit for bit and continues at the interrupted
 * instruction. The fiber may resume on another carrier: before returning,
 * the C side rewrites the copy's signal mask and alternate-stack fields
 * with the current thread's, which rt_sigreturn also installs.
 *
 * Frame at sp on entry (16-byte aligned):
 *
 *   sp + 0                          siginfo_t (128 bytes)
 *   sp + 128                        ucontext_t (uc_mcontext: regs, sp, pc,
 *                                   pstate, __reserved records)
 *   sp + 128 + sizeof(ucontext_t)   128-byte gap, then the interrupted stack
 *
 * Cost: one extra system call per preemption compared with x86-64, where
 * XSAVE/XRSTOR in user space suffice.
 */
#include "rtcode_int.h" /* first: this file is runtime code */
	.text
	.globl	xtc__preempt_trampoline
	.type	xtc__preempt_trampoline, %function
	.p2align 4
xtc__preempt_trampoline:
	.cfi_startproc
	.cfi_undefined x30
	mov	x29, #0                 /* end of the frame chain for unwinders */
	mov	x0, sp                  /* the frame copy */
	bl	xtc__preempt_trampoline_yield_frame
	mov	x8, #139                /* __NR_rt_sigreturn; sp is the copy */
	svc	#0
	brk	#0x1                    /* not reached */
	.cfi_endproc
	.size	xtc__preempt_trampoline, .-xtc__preempt_trampoline

	.section .note.GNU-stack,"",%progbits
