/*
 * preempt_x86_64_sysv_elf.S - involuntary preemption trampoline, x86-64
 * System V, ELF.
 *
 * The signal handler (preempt.c) made the interrupted fiber look as if it
 * had called us from its interrupted instruction, below its red zone:
 *
 *   interrupted RSP ->  | caller's data            |
 *                       | 128-byte red zone        |  (not touched)
 *   RSP at entry    ->  | interrupted RIP          |
 *
 * Frame we build (offsets from RBP after the pushes):
 *
 *   +128  interrupted RIP          +120  RFLAGS
 *   +112 rax  +104 rcx  +96 rdx  +88 rbx  +80 rbp  +72 rsi  +64 rdi
 *   +56 r8  +48 r9  +40 r10  +32 r11  +24 r12  +16 r13  +8 r14  +0 r15
 *   below: the XSAVE area, 64-byte aligned, xtc__xsave_size bytes
 *          (legacy 512-byte FXSAVE area when the OS has no XSAVE)
 *
 * Every GPR and RFLAGS is saved, and the whole extended state (x87, SSE,
 * AVX, AVX-512, ... whatever XCR0 enables) with XSAVE, whose size comes from
 * CPUID.(EAX=0Dh,ECX=0).EBX. Then the C yield runs (the fiber switches out
 * and later resumes, possibly much later), everything is restored, and
 * `ret $128` returns to the interrupted RIP while popping the red-zone gap,
 * so the fiber continues with bit-identical state.
 *
 * The direction flag is cleared before calling C (the ABI requires DF=0);
 * the interrupted value comes back with popfq.
 */
#include "rtcode_int.h" /* first: this file is runtime code */
	.text
	.globl	xtc__preempt_trampoline
	.type	xtc__preempt_trampoline, @function
	.p2align 4
xtc__preempt_trampoline:
	.cfi_startproc
	.cfi_def_cfa_offset 8
	pushfq
	.cfi_adjust_cfa_offset 8
	cld
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	pushq	%rbx
	pushq	%rbp
	.cfi_adjust_cfa_offset 40
	.cfi_offset %rbp, -56
	pushq	%rsi
	pushq	%rdi
	pushq	%r8
	pushq	%r9
	pushq	%r10
	pushq	%r11
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	.cfi_adjust_cfa_offset 80
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	/* carve the save area: rsp = (rsp - size) & -64 */
	movl	xtc__xsave_size(%rip), %eax
	subq	%rax, %rsp
	andq	$-64, %rsp
	cmpl	$0, xtc__xsave_mode(%rip)
	je	1f
	/* XSAVE header must be zero where XSAVE does not write it */
	movq	$0, 512(%rsp)
	movq	$0, 520(%rsp)
	movq	$0, 528(%rsp)
	movq	$0, 536(%rsp)
	movq	$0, 544(%rsp)
	movq	$0, 552(%rsp)
	movq	$0, 560(%rsp)
	movq	$0, 568(%rsp)
	movl	$-1, %eax
	movl	$-1, %edx
	xsave64	(%rsp)
	jmp	2f
1:	fxsave64 (%rsp)
2:
	call	xtc__preempt_trampoline_yield
	cmpl	$0, xtc__xsave_mode(%rip)
	je	3f
	movl	$-1, %eax
	movl	$-1, %edx
	xrstor64 (%rsp)
	jmp	4f
3:	fxrstor64 (%rsp)
4:
	movq	%rbp, %rsp
	.cfi_def_cfa_register %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%r11
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rdi
	popq	%rsi
	popq	%rbp
	popq	%rbx
	popq	%rdx
	popq	%rcx
	popq	%rax
	popfq
	ret	$128
	.cfi_endproc
	.size	xtc__preempt_trampoline, .-xtc__preempt_trampoline

	.section .note.GNU-stack,"",@progbits
