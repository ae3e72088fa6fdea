/*
 * proc_fault.c - fault containment for procs (libxtc's R1): the fault
 * guard, recovery frames and critical sections (xtc_proc.h).
 *
 * Model. xtc_fault_guard_install puts one process-wide handler on SIGSEGV,
 * SIGBUS, SIGFPE and SIGILL (SA_ONSTACK: it runs on the thread's
 * sigaltstack, which xtc__fiber_thread_init provides on every loop
 * thread), chained to whatever handler was there before, so the fiber
 * layer's stack-overflow report and Go's own handler keep working. A
 * synchronous fault is contained -- only the faulting proc ends -- when
 * all of these hold:
 *   - it happened on a proc's fiber, with the interrupted stack pointer
 *     inside that fiber's stack (not on a loop's own stack, not an
 *     overflow: those stay with the fiber layer's report);
 *   - the fiber is in no critical section: no xtc_proc_critical_enter and
 *     no runtime no-preempt region (fiber->nopreempt == 0), where state
 *     may be half-updated. Inside one the fault escalates: a one-line
 *     report, then the previous handler (by default the process dies of
 *     the signal), libxtc's PANIC rule.
 * Containing means: with a recovery frame armed (xtc_proc_recovery_arm,
 * a setjmp into a per-proc buffer), unblock the signal and longjmp there,
 * so the arm returns the signal number; without one, redirect the
 * interrupted context to a function that exits the proc with the signal
 * number as reason (a DOWN with reason 11 for SIGSEGV), which libxtc 1.2.1
 * gets from a frame it arms at every proc entry. The redirect costs
 * nothing per spawn; a setjmp per spawn would.
 *
 * Per-proc state: xtc__proc_t.fault, allocated on the first arm and freed
 * at teardown (most procs never arm). The jmp_buf lives there, not in the
 * caller's frame: the macro must be an expression.
 *
 * Limits (xtc(7) COMPATIBILITY): a contained fault inside libc or any code
 * holding a lock leaves that lock held -- containment is for faults in the
 * proc's own code, as in libxtc; a frame is valid only while the function
 * that armed it is active (disarm before it returns); a fault off a proc
 * (a stackless task, the loop's own code) is never contained.
 *
 * Rejected: sigsetjmp(buf, 1) in the macro (a sigprocmask system call per
 * arm; the handler unblocks the one signal instead); containing faults
 * of every fiber (a coroutine has no identity to report the DOWN under).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* REG_RIP/REG_RSP in <ucontext.h> */
#endif
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "fiber_int.h"
#include "proc_int.h"

struct xtc__pfault {
	jmp_buf buf;
	volatile sig_atomic_t armed;
};

static const int fault_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL };
#define NSIGS ((int)(sizeof fault_sigs / sizeof fault_sigs[0]))

static struct sigaction old_act[NSIGS];
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static int guard_rc = XTC_E_INTERNAL;

/* ---- the handler (async-signal-safe code only) -------------------------- */

static uintptr_t ctx_sp(const ucontext_t *uc)
{
#if defined(__x86_64__)
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
	return (uintptr_t)uc->uc_mcontext.sp;
#else
	(void)uc;
	return 0;
#endif
}

static void fault_exit(int sig)
{
	(void)xtc_exit_self(sig);
	abort(); /* not reached: the redirect happens only on a proc */
}

/* Resume the interrupted fiber in fault_exit(sig), on its own stack below
 * the faulting frame (and its red zone). 0 where unsupported. */
static int ctx_redirect(ucontext_t *uc, uintptr_t sp, int sig)
{
	uintptr_t nsp = (sp - 256) & ~(uintptr_t)15;
#if defined(__x86_64__)
	nsp -= 8; /* as after a call: the callee expects rsp % 16 == 8 */
	*(uintptr_t *)nsp = 0;
	uc->uc_mcontext.gregs[REG_RSP] = (greg_t)nsp;
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)fault_exit;
	uc->uc_mcontext.gregs[REG_RDI] = (greg_t)sig;
	return 1;
#elif defined(__aarch64__)
	uc->uc_mcontext.sp = nsp;
	uc->uc_mcontext.pc = (uintptr_t)fault_exit;
	uc->uc_mcontext.regs[0] = (uint64_t)sig;
	uc->uc_mcontext.regs[29] = 0;
	uc->uc_mcontext.regs[30] = 0;
	return 1;
#else
	(void)uc, (void)nsp, (void)sig;
	return 0;
#endif
}

static void say(const char *s)
{
	size_t n = strlen(s);

	while (n > 0) {
		ssize_t w = write(STDERR_FILENO, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void chain(int i, int sig, siginfo_t *si, void *uctx)
{
	xtc__sig_chain(&old_act[i], sig, si, uctx);
}

static void fault_handler(int sig, siginfo_t *si, void *uctx)
{
	int saved_errno = errno, i;
	xtc__fiber_t *f = xtc__fiber_cur;
	xtc__proc_t *p = xtc__proc_current();
	ucontext_t *uc = uctx;
	uintptr_t sp;

	for (i = 0; i < NSIGS - 1 && fault_sigs[i] != sig; i++)
		;
	if (f == NULL || f->is_root || p == NULL || uc == NULL ||
	    si == NULL || si->si_code <= 0) /* sent, not a fault */
		goto out;
	sp = ctx_sp(uc);
	if (sp < (uintptr_t)f->stack.lo || sp >= (uintptr_t)f->stack.hi)
		goto out; /* overflow, or not on the proc's stack */
	if (sig == SIGSEGV && (uintptr_t)si->si_addr < (uintptr_t)f->stack.lo &&
	    (uintptr_t)f->stack.lo - (uintptr_t)si->si_addr <= 65536)
		goto out; /* the guard below the stack: the overflow report's */
	if (f->nopreempt > 0) {
		say("xtc: fault in a proc inside a critical section: "
		    "not contained\n");
		goto out;
	}
	if (p->fault != NULL && p->fault->armed) {
		sigset_t s;

		p->fault->armed = 0; /* one-shot: a fault while recovering dies */
		sigemptyset(&s);
		sigaddset(&s, sig);
		pthread_sigmask(SIG_UNBLOCK, &s, NULL);
		errno = saved_errno;
		longjmp(p->fault->buf, sig);
	}
	if (ctx_redirect(uc, sp, sig))
		return; /* the handler's return resumes in fault_exit */
out:
	errno = saved_errno;
	chain(i, sig, si, uctx);
}

/* ---- public API --------------------------------------------------------- */

static void guard_init(void)
{
	struct sigaction sa;
	int i;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = fault_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < NSIGS; i++)
		if (sigaction(fault_sigs[i], &sa, &old_act[i]) != 0)
			return;
	guard_rc = XTC_OK;
}

int xtc_fault_guard_install(void)
{
	/* the fiber layer first: this thread's sigaltstack, and its overflow
	 * handler installed before ours so that ours chains to it */
	int rc = xtc__fiber_thread_init();

	if (rc != XTC_OK)
		return rc;
	pthread_once(&guard_once, guard_init);
	return guard_rc;
}

static XTC__TLS __thread jmp_buf off_proc_buf;

jmp_buf *xtc_proc_recovery_slot(void)
{
	xtc__proc_t *p = xtc__proc_current();

	if (p == NULL)
		return &off_proc_buf; /* off a proc: arming is a no-op */
	if (p->fault == NULL) {
		p->fault = calloc(1, sizeof *p->fault);
		if (p->fault == NULL)
			return &off_proc_buf; /* unarmed: faults take the exit */
	}
	p->fault->armed = 1;
	return &p->fault->buf;
}

void xtc_proc_recovery_disarm(void)
{
	xtc__proc_t *p = xtc__proc_current();

	if (p != NULL && p->fault != NULL)
		p->fault->armed = 0;
}

/* proc teardown */
void xtc__proc_fault_free(xtc__proc_t *p)
{
	free(p->fault);
	p->fault = NULL;
}

void xtc_proc_critical_enter(void)
{
	(void)xtc_preempt_disable(); /* XTC_E_INVAL off a fiber: nothing */
}

void xtc_proc_critical_leave(void)
{
	(void)xtc_preempt_enable();
}
