/*
 * fiber_ucontext.c - the portable switch substrate: makecontext/swapcontext.
 *
 * Model: the same three operations as the assembly (make, swap, jump), with
 * the ucontext_t of a fiber stored at the top of its own stack (no extra
 * allocation; f->impl points at it). A root fiber's ucontext lives in its
 * thread state (fiber.c). makecontext only passes int arguments, so the
 * fiber pointer travels split into two 32-bit halves.
 *
 * Cost: glibc's swapcontext makes one rt_sigprocmask syscall per switch
 * (one-way ~170 ns on the reference VM against ~6 ns for the asm switch,
 * bench/bench_switch.c; more with busy Go threads around), and it restores
 * the signal mask captured when the context was made or last switched
 * away from: a mask is a context's here, the thread's with the assembly
 * switch (fn.c takes the preemption signal out of a pooled function
 * context's mask as well as the thread's). That is why this is
 * only the fallback for platforms without an assembly switch (meson
 * coro=ucontext), never the default, and never used under ASan, which
 * cannot follow swapcontext (fiber_int.h forces asm there).
 *
 * It is compiled in every build so the switch benchmark can report its
 * cost next to the assembly switch in the same binary.
 *
 * Rejected: setjmp/longjmp after one makecontext (FORTIFY_SOURCE aborts on
 * the stack change, and it is not a documented use).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include "fiber_int.h"

#ifdef XTC__HAVE_UCONTEXT

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "xtc.h"

struct uctx {
	ucontext_t uc;
	xtc__ctx_start_fn start;
};

size_t xtc__uctx_size(void)
{
	return sizeof(struct uctx);
}

static void uctx_entry(unsigned int hi, unsigned int lo)
{
	xtc__fiber_t *f =
		(xtc__fiber_t *)(((uintptr_t)hi << 16 << 16) | (uintptr_t)lo);
	struct uctx *u = f->impl;
	u->start(f);
	abort(); /* start never returns */
}

int xtc__uctx_make(xtc__fiber_t *f, xtc__ctx_start_fn start)
{
	if (f == NULL || start == NULL || f->stack.lo == NULL)
		return XTC_E_INVAL;
	uintptr_t top = (uintptr_t)f->stack.hi - sizeof(struct uctx);
	top &= ~(uintptr_t)63;
	if (top <= (uintptr_t)f->stack.lo + 4096)
		return XTC_E_INVAL;
	struct uctx *u = (struct uctx *)top;
	memset(u, 0, sizeof *u);
	if (getcontext(&u->uc) != 0)
		return XTC_E_INTERNAL;
	u->start = start;
	u->uc.uc_stack.ss_sp = f->stack.lo;
	u->uc.uc_stack.ss_size = top - (uintptr_t)f->stack.lo;
	u->uc.uc_link = NULL;
	uintptr_t p = (uintptr_t)f;
	makecontext(&u->uc, (void (*)(void))uctx_entry, 2,
	            (unsigned int)(p >> 16 >> 16), (unsigned int)p);
	f->impl = u;
	return XTC_OK;
}

void xtc__uctx_swap(xtc__fiber_t *from, xtc__fiber_t *to)
{
	struct uctx *a = from->impl, *b = to->impl;
	if (swapcontext(&a->uc, &b->uc) != 0)
		abort();
}

void xtc__uctx_sig_unblock(xtc__fiber_t *f, int signo)
{
	struct uctx *u = f->impl;
	if (u != NULL)
		sigdelset(&u->uc.uc_sigmask, signo);
}

void xtc__uctx_jump(xtc__fiber_t *to)
{
	struct uctx *b = to->impl;
	setcontext(&b->uc);
	abort();
}

#endif
