/*
 * switch_aarch64_aapcs_elf.S - fiber context switch, AArch64 AAPCS64, ELF.
 *
 * Design: as on x86-64, a switch is an ordinary call. Only the callee-saved
 * state of AAPCS64 is saved, in one 176-byte frame on the current stack;
 * sp is stored at offset 0 of the fiber (xtc__fiber_t.sp). The resumed side
 * loads the same frame and returns through its saved lr. A new fiber gets a
 * forged frame whose lr is xtc__ctx_entry.
 *
 * Saved frame, at the stored sp (16-byte aligned, grows down):
 *
 *   offset  size  content
 *   ------  ----  ---------------------------------------------------
 *     0      16   x19, x20  (forged frame: x19 = fiber, x20 = start)
 *    16      16   x21, x22
 *    32      16   x23, x24
 *    48      16   x25, x26
 *    64      16   x27, x28
 *    80      16   x29 (fp), x30 (lr)  (forged frame: 0, xtc__ctx_entry)
 *    96      16   d8,  d9   (low 64 bits of v8-v15 are callee-saved)
 *   112      16   d10, d11
 *   128      16   d12, d13
 *   144      16   d14, d15
 *   160       8   FPCR (rounding mode, flush-to-zero, trap enables)
 *   168       8   padding
 *   176           caller's frame / top of a new stack
 *
 * Invariants:
 *  - sp is 16-byte aligned everywhere (the hardware checks it on access);
 *  - FPCR is per fiber; writing it can be slow, so the resume side writes
 *    it only when it differs from the live value. FPSR (sticky flags) is
 *    not preserved, as for a call;
 *  - no syscall, no signal-mask change.
 *
 * Rejected: saving q8-q15 in full (AAPCS64 only preserves their low half);
 * setjmp/longjmp (pointer mangling and FORTIFY checks).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#if defined(__aarch64__) && defined(__ELF__)

	.text

/* void xtc__ctx_swap(xtc__fiber_t *from, xtc__fiber_t *to) */
	.globl	xtc__ctx_swap
	.hidden	xtc__ctx_swap
	.type	xtc__ctx_swap, %function
	.p2align 4
xtc__ctx_swap:
	.cfi_startproc
	sub	sp, sp, #176
	.cfi_def_cfa_offset 176
	stp	x19, x20, [sp, #0]
	stp	x21, x22, [sp, #16]
	stp	x23, x24, [sp, #32]
	stp	x25, x26, [sp, #48]
	stp	x27, x28, [sp, #64]
	stp	x29, x30, [sp, #80]
	.cfi_offset x29, -96
	.cfi_offset x30, -88
	stp	d8, d9, [sp, #96]
	stp	d10, d11, [sp, #112]
	stp	d12, d13, [sp, #128]
	stp	d14, d15, [sp, #144]
	mrs	x9, fpcr
	str	x9, [sp, #160]
	mov	x10, sp
	str	x10, [x0]
	ldr	x10, [x1]
	mov	sp, x10			/* same frame shape: CFI still valid */
	ldr	x10, [sp, #160]
	cmp	x9, x10
	b.eq	1f
	msr	fpcr, x10
1:
	ldp	x19, x20, [sp, #0]
	ldp	x21, x22, [sp, #16]
	ldp	x23, x24, [sp, #32]
	ldp	x25, x26, [sp, #48]
	ldp	x27, x28, [sp, #64]
	ldp	x29, x30, [sp, #80]
	ldp	d8, d9, [sp, #96]
	ldp	d10, d11, [sp, #112]
	ldp	d12, d13, [sp, #128]
	ldp	d14, d15, [sp, #144]
	add	sp, sp, #176
	.cfi_def_cfa_offset 0
	ret
	.cfi_endproc
	.size	xtc__ctx_swap, .-xtc__ctx_swap

/* void xtc__ctx_jump(xtc__fiber_t *to): resume without saving. */
	.globl	xtc__ctx_jump
	.hidden	xtc__ctx_jump
	.type	xtc__ctx_jump, %function
	.p2align 4
xtc__ctx_jump:
	.cfi_startproc
	ldr	x10, [x0]
	mov	sp, x10
	ldr	x10, [sp, #160]
	msr	fpcr, x10
	ldp	x19, x20, [sp, #0]
	ldp	x21, x22, [sp, #16]
	ldp	x23, x24, [sp, #32]
	ldp	x25, x26, [sp, #48]
	ldp	x27, x28, [sp, #64]
	ldp	x29, x30, [sp, #80]
	ldp	d8, d9, [sp, #96]
	ldp	d10, d11, [sp, #112]
	ldp	d12, d13, [sp, #128]
	ldp	d14, d15, [sp, #144]
	add	sp, sp, #176
	ret
	.cfi_endproc
	.size	xtc__ctx_jump, .-xtc__ctx_jump

/* void *xtc__ctx_make(void *top, xtc__ctx_start_fn start, xtc__fiber_t *f)
 * Forge the frame of the layout table below top & ~15; return its sp. */
	.globl	xtc__ctx_make
	.hidden	xtc__ctx_make
	.type	xtc__ctx_make, %function
	.p2align 4
xtc__ctx_make:
	.cfi_startproc
	and	x0, x0, #~15
	sub	x0, x0, #176
	stp	x2, x1, [x0, #0]	/* x19 = f, x20 = start */
	stp	xzr, xzr, [x0, #16]
	stp	xzr, xzr, [x0, #32]
	stp	xzr, xzr, [x0, #48]
	stp	xzr, xzr, [x0, #64]
	adr	x9, xtc__ctx_entry
	stp	xzr, x9, [x0, #80]	/* fp = 0 ends frame walks */
	stp	xzr, xzr, [x0, #96]
	stp	xzr, xzr, [x0, #112]
	stp	xzr, xzr, [x0, #128]
	stp	xzr, xzr, [x0, #144]
	mrs	x9, fpcr		/* the creating thread's FP modes */
	stp	x9, xzr, [x0, #160]
	ret
	.cfi_endproc
	.size	xtc__ctx_make, .-xtc__ctx_make

/* First code of every fiber: start(f), which never returns. The return
 * address is undefined so unwinders stop here. */
	.type	xtc__ctx_entry, %function
	.p2align 4
xtc__ctx_entry:
	.cfi_startproc
	.cfi_undefined x30
	mov	x0, x19
	blr	x20
	brk	#0x1
	.cfi_endproc
	.size	xtc__ctx_entry, .-xtc__ctx_entry

#endif

	.section .note.GNU-stack,"",%progbits
