/*
 * fiber.c - fibers on top of a switch substrate, the per-thread root fiber
 * and the stack-overflow report.
 *
 * Model: see fiber_int.h. This file owns the per-thread state (root fiber,
 * sigaltstack) and the glue around the substrate: sanitizer annotations,
 * the start function every fiber begins in, and exit. The plain-asm switch
 * itself is inlined from fiber_int.h (a TLS store and xtc__ctx_swap); the
 * out-of-line xtc__fiber_switch_slow is used only by sanitizer and ucontext
 * builds.
 *
 * Stack-overflow report: one process-wide SIGSEGV handler (SA_SIGINFO |
 * SA_ONSTACK), installed once, runs on a per-thread sigaltstack (a fault on
 * a guard page cannot run a handler on the overflowed stack). It looks only
 * at async-signal-safe state: the initial-exec TLS current fiber and its
 * immutable stack bounds. A fault inside that fiber's guard page, or with
 * the interrupted stack pointer already below the usable stack (a frame
 * larger than the guard jumped over it), is reported with write(2) and the
 * process aborts. Anything else is chained to the handler that was
 * installed before ours; in a Go process that is Go's own handler, which
 * turns nil dereferences in Go code into panics, so chaining must be exact
 * (same arguments, SA_SIGINFO honoured).
 *
 * sigaltstack: a thread that already has one (every Go-created M does) keeps
 * it: replacing Go's gsignal stack under the runtime confuses its signal
 * code. Otherwise we install a 64 KiB one (enough for the preemption handler
 * to share it).
 *
 * Sanitizers: ASan must be told about every stack change
 * (__sanitizer_start_switch_fiber before, __sanitizer_finish_switch_fiber
 * after, on the resumed side); the bounds of the root stack are learnt from
 * the first finish call made on a fiber. TSan gets one fiber context per
 * fiber. ucontext is never used under ASan (fiber_int.h forces asm).
 *
 * Rejected: a handler per fiber or per thread (sigaction is process-wide);
 * printing with stdio in the handler (not async-signal-safe); reporting
 * through the ucontext's saved frame (the overflowed stack is unusable).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* REG_RSP in <ucontext.h> */
#endif
#include "fiber_int.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "xtc.h"

#ifdef XTC__FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef XTC__FIBER_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void  __tsan_destroy_fiber(void *fiber);
void  __tsan_switch_to_fiber(void *fiber, unsigned flags);
void  __tsan_set_fiber_name(void *fiber, const char *name);
#endif

#define ALTSTACK_SIZE (64u * 1024u)

struct fthread {
	xtc__fiber_t root;
	void *altstack;         /* ours, or NULL if the thread had one */
	xtc__fiber_t *prev;     /* ASan: the fiber we switched away from */
	int prev_exited;        /* ASan: prev will never run again */
#ifdef XTC__CORO_UCONTEXT
	_Alignas(16) unsigned char root_uc[sizeof(ucontext_t) + 64];
#endif
};

__thread xtc__fiber_t *xtc__fiber_cur XTC__TLS_IE;

#if defined(__SANITIZE_THREAD__)
__attribute__((noinline)) xtc__fiber_t *xtc__fiber_current_call(void)
{
	return xtc__fiber_cur;
}
#endif
/* > 0 while a Go callback runs on this thread (fiber_int.h): here, below
 * the loop and preemption, which both read it. */
__thread int xtc__gocb_depth XTC__TLS_IE;

static __thread struct fthread *tls_thr XTC__TLS_IE;

static pthread_key_t thr_key;
static pthread_once_t thr_once = PTHREAD_ONCE_INIT;
static struct sigaction old_segv;
static int segv_installed; /* our SIGSEGV handler is in place */

/* ---- overflow report (async-signal-safe only) --------------------- */

static size_t fmt_u64(char *buf, uint64_t v, unsigned base)
{
	char tmp[24];
	size_t n = 0;
	do {
		unsigned d = (unsigned)(v % base);
		tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
		v /= base;
	} while (v != 0);
	for (size_t i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

struct msg {
	char buf[512];
	size_t len;
};

static void msg_str(struct msg *m, const char *s)
{
	while (*s != '\0' && m->len < sizeof m->buf - 1)
		m->buf[m->len++] = *s++;
}

static void msg_num(struct msg *m, uint64_t v, unsigned base)
{
	char tmp[24];
	size_t n = fmt_u64(tmp, v, base);
	if (base == 16)
		msg_str(m, "0x");
	for (size_t i = 0; i < n && m->len < sizeof m->buf - 1; i++)
		m->buf[m->len++] = tmp[i];
}

static uintptr_t interrupted_sp(const void *uctx)
{
	const ucontext_t *uc = uctx;
	if (uc == NULL)
		return 0;
#if defined(__x86_64__)
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
	return (uintptr_t)uc->uc_mcontext.sp;
#else
	return 0;
#endif
}

/* A frame bigger than the guard can jump over it, so besides a fault in
 * the guard page we accept one below it when the interrupted stack pointer
 * is itself below the usable stack (but not absurdly far); and on the
 * CANARY kind (no guard that faults) any fault once the canary is
 * written. */
static int is_overflow(const xtc__fiber_t *f, uintptr_t addr, uintptr_t sp)
{
	uintptr_t map = (uintptr_t)f->stack.map;
	uintptr_t lo = (uintptr_t)f->stack.lo;
	if (map == 0 || f->is_root)
		return 0;
	if (addr >= map && addr < lo)
		return 1;
	if (f->stack.kind == XTC__SK_CANARY && f->stack.canary != NULL &&
	    *f->stack.canary != 0)
		return 1;
	const uintptr_t reach = 1u << 20;
	return sp != 0 && sp < lo && sp + reach >= lo && addr < lo &&
	       addr + reach >= lo;
}

static void msg_write(const struct msg *m)
{
	const char *p = m->buf;
	size_t left = m->len;
	while (left > 0) {
		ssize_t w = write(STDERR_FILENO, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		p += w;
		left -= (size_t)w;
	}
}

/* "xtc: stack overflow in proc 'name' (pid 1.2.3): " */
static void msg_who(struct msg *m, const xtc__fiber_t *f)
{
	msg_str(m, "xtc: stack overflow in ");
	msg_str(m, f->owner_id != 0 ? "proc '" : "fiber '");
	msg_str(m, f->name != NULL ? f->name : "?");
	msg_str(m, "'");
	if (f->owner_id != 0) {
		msg_str(m, " (pid ");
		msg_num(m, f->owner_id >> 48, 10);
		msg_str(m, ".");
		msg_num(m, (f->owner_id >> 32) & 0xffff, 10);
		msg_str(m, ".");
		msg_num(m, f->owner_id & 0xffffffffu, 10);
		msg_str(m, ")");
	}
	msg_str(m, ": ");
}

static const char *kind_text(uint32_t kind)
{
	switch (kind) {
	case XTC__SK_MADV:
		return "guard page (MADV_GUARD_INSTALL)";
	case XTC__SK_PROT:
	case XTC__SK_OWN:
		return "guard page (PROT_NONE)";
	case XTC__SK_CANARY:
		return "soft guard + canary";
	default:
		return "?";
	}
}

/* ", stack LO-HI (N bytes, kind); <the knob>\n" */
static void msg_stack(struct msg *m, const xtc__fiber_t *f)
{
	msg_str(m, ", stack ");
	msg_num(m, (uintptr_t)f->stack.lo, 16);
	msg_str(m, "-");
	msg_num(m, (uintptr_t)f->stack.hi, 16);
	msg_str(m, " (");
	msg_num(m, (uint64_t)((char *)f->stack.hi - (char *)f->stack.lo), 10);
	msg_str(m, " bytes, ");
	msg_str(m, kind_text(f->stack.kind));
	msg_str(m, "); give it a larger stack: xtc_proc_opts_t.stack_size "
	            "(Go: ProcOpts.StackSize) or the default, "
	            "xtc_set_stack_size (Go: xtc.SetStackSize)\n");
}

/* Die of the fault signal with its default action (a core, the exit
 * status of a SIGSEGV), as a guard-page fault without our handler would:
 * from the SIGSEGV handler (where it is blocked), the preemption handler
 * or a switch. Async-signal-safe. */
static __attribute__((noreturn)) void die_of_segv(void)
{
	struct sigaction dfl;
	sigset_t set;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGSEGV, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGSEGV);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	raise(SIGSEGV);
	abort(); /* not reached */
}

static void report_overflow(const xtc__fiber_t *f, uintptr_t addr)
{
	struct msg m = { .len = 0 };
	msg_who(&m, f);
	msg_str(&m, "fault at ");
	msg_num(&m, addr, 16);
	msg_stack(&m, f);
	msg_write(&m);
}

/* Out of line: the trap runs on the overflowed stack and must stay small. */
static __attribute__((noinline)) void report_trap(const xtc__fiber_t *f,
                                                  uintptr_t sp)
{
	struct msg m = { .len = 0 };
	msg_who(&m, f);
	if (sp < (uintptr_t)f->stack.lo) {
		msg_str(&m, "stack pointer ");
		msg_num(&m, sp, 16);
		msg_str(&m, " below the stack");
	} else {
		msg_str(&m, "the canary below the stack was overwritten");
	}
	msg_str(&m, ", caught by the switch and preemption check");
	msg_stack(&m, f);
	msg_write(&m);
}

/* A switch-time (or preemption-time) catch: the report needs a stack, and
 * the caller may stand below its own. So the report is made by the
 * SIGSEGV handler, on the sigaltstack: the fiber and stack pointer are
 * left in TLS and the thread sends itself SIGSEGV. If that signal cannot
 * be taken (blocked), the report is made here. */
static __thread const xtc__fiber_t *trap_fiber XTC__TLS_IE;
static __thread uintptr_t trap_sp XTC__TLS_IE;

void xtc__stack_overflow_trap(const xtc__fiber_t *f, uintptr_t sp)
{
	trap_sp = sp;
	trap_fiber = f;
	if (__atomic_load_n(&segv_installed, __ATOMIC_ACQUIRE))
		(void)syscall(SYS_tgkill, (long)getpid(), (long)syscall(SYS_gettid),
		              (long)SIGSEGV);
	trap_fiber = NULL;
	report_trap(f, sp);
	die_of_segv();
}

static void chain_segv(int sig, siginfo_t *si, void *uctx)
{
	xtc__sig_chain(&old_segv, sig, si, uctx);
}

static void segv_handler(int sig, siginfo_t *si, void *uctx)
{
	int saved_errno = errno;
	xtc__fiber_t *f = xtc__fiber_cur;
	if (trap_fiber != NULL) {
		report_trap(trap_fiber, trap_sp);
		die_of_segv();
	}
	if (f != NULL && si != NULL &&
	    is_overflow(f, (uintptr_t)si->si_addr, interrupted_sp(uctx))) {
		report_overflow(f, (uintptr_t)si->si_addr);
		die_of_segv();
	}
	errno = saved_errno;
	chain_segv(sig, si, uctx);
}

/* ---- per-thread state --------------------------------------------- */

static void thr_destroy(void *p);

static void process_init(void)
{
	(void)pthread_key_create(&thr_key, thr_destroy);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = segv_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &old_segv) == 0)
		__atomic_store_n(&segv_installed, 1, __ATOMIC_RELEASE);
}

static void *altstack_install(void)
{
	stack_t cur;
	if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE))
		return NULL; /* keep the existing one (Go's gsignal stack) */
	void *p = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	stack_t ss = { .ss_sp = p, .ss_size = ALTSTACK_SIZE, .ss_flags = 0 };
	if (sigaltstack(&ss, NULL) != 0) {
		munmap(p, ALTSTACK_SIZE);
		return NULL;
	}
	return p;
}

static void altstack_remove(void *p)
{
	if (p == NULL)
		return;
	stack_t cur;
	if (sigaltstack(NULL, &cur) != 0 || cur.ss_sp != p ||
	    (cur.ss_flags & SS_ONSTACK))
		return;
	stack_t off = { .ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE };
	if (sigaltstack(&off, NULL) == 0)
		munmap(p, ALTSTACK_SIZE);
}

int xtc__fiber_thread_init(void)
{
	if (__builtin_expect(tls_thr != NULL, 1))
		return XTC_OK;
	pthread_once(&thr_once, process_init);
	struct fthread *t = calloc(1, sizeof *t);
	if (t == NULL)
		return XTC_E_NOMEM;
	t->root.is_root = 1;
	t->root.name = "root";
	t->root.stack.canary = &xtc__stack_no_canary;
#ifdef XTC__CORO_UCONTEXT
	t->root.impl = t->root_uc;
#endif
#ifdef XTC__FIBER_TSAN
	t->root.tsan_fiber = __tsan_get_current_fiber();
#endif
	t->altstack = altstack_install();
	(void)pthread_setspecific(thr_key, t);
	tls_thr = t;
	xtc__fiber_cur = &t->root;
	return XTC_OK;
}

static void thr_free(struct fthread *t)
{
	altstack_remove(t->altstack);
	xtc__stack_cache_trim();
	if (tls_thr == t) {
		tls_thr = NULL;
		xtc__fiber_cur = NULL;
	}
	free(t);
}

static void thr_destroy(void *p)
{
	struct fthread *t = p;
	/* A thread exiting from inside a fiber (pthread_exit on a fiber
	 * stack) leaks its state rather than freeing what is in use. */
	if (xtc__fiber_cur == &t->root)
		thr_free(t);
}

void xtc__fiber_thread_fini(void)
{
	struct fthread *t = tls_thr;
	if (t == NULL || xtc__fiber_cur != &t->root)
		return;
	(void)pthread_setspecific(thr_key, NULL);
	thr_free(t);
}

xtc__fiber_t *xtc__fiber_root(void)
{
	struct fthread *t = tls_thr;
	return t != NULL ? &t->root : NULL;
}

const char *xtc__fiber_substrate(void)
{
#ifdef XTC__CORO_ASM
	return "asm";
#else
	return "ucontext";
#endif
}

/* ---- sanitizer glue ----------------------------------------------- */

static inline void san_before(xtc__fiber_t *from, xtc__fiber_t *to,
                              int exiting)
{
#ifdef XTC__FIBER_ASAN
	struct fthread *t = tls_thr;
	t->prev = from;
	t->prev_exited = exiting;
	__sanitizer_start_switch_fiber(exiting ? NULL : &from->asan_fake,
	                               to->asan_bottom, to->asan_size);
#else
	(void)from;
	(void)exiting;
#endif
#ifdef XTC__FIBER_TSAN
	__tsan_switch_to_fiber(to->tsan_fiber, 0);
#else
	(void)to;
#endif
}

/* Runs on the resumed side; self is the fiber now running. The thread may
 * differ from the one that switched away, hence the fresh TLS read. */
static inline void san_after(xtc__fiber_t *self)
{
#ifdef XTC__FIBER_ASAN
	struct fthread *t = tls_thr;
	const void *bottom = NULL;
	size_t size = 0;
	__sanitizer_finish_switch_fiber(self->asan_fake, &bottom, &size);
	if (t->prev != NULL && !t->prev_exited) {
		t->prev->asan_bottom = bottom;
		t->prev->asan_size = size;
	}
	t->prev = NULL;
#else
	(void)self;
#endif
}

/* ---- spinlock (fiber_int.h) -------------------------------------- */

void xtc__spin_lock_wait(xtc__spin_t *l)
{
	unsigned n = 0;

	do {
		while (atomic_load_explicit(&l->v, memory_order_relaxed)) {
			if (++n < 128)
				XTC__CPU_RELAX();
			else
				sched_yield();
		}
	} while (atomic_exchange_explicit(&l->v, 1, memory_order_acquire));
}

/* ---- fibers ------------------------------------------------------- */

static void fiber_start(xtc__fiber_t *f)
{
	san_after(f);
	f->entry(f->arg);
	/* Returning from an entry is a contract violation: there is nothing
	 * to return to. */
	abort();
}

int xtc__fiber_init(xtc__fiber_t *f, size_t stack_size,
                    xtc__fiber_entry entry, void *arg)
{
	if (f == NULL || entry == NULL)
		return XTC_E_INVAL;
	/* Field by field, not memset: the memset (a `rep stos`) cost ~27
	 * instructions a spawn, and stack is written whole by
	 * xtc__stack_alloc anyway (cleared on failure). A new field must be
	 * set here. */
	f->sp = NULL;
	f->name = NULL;
	f->owner_id = 0;
	f->nopreempt = 0;
	f->is_root = 0;
	f->impl = NULL;
	f->asan_fake = NULL;
	f->tsan_fiber = NULL;
	f->asan_bottom = NULL;
	f->asan_size = 0;
	f->entry = entry;
	f->arg = arg;
	if (stack_size != 0 && stack_size < XTC__STACK_MIN &&
	    xtc__stack_size_check(stack_size) != XTC_OK) {
		memset(&f->stack, 0, sizeof f->stack);
		return XTC_E_INVAL;
	}
	int rc = xtc__stack_alloc(stack_size, &f->stack);
	if (rc != XTC_OK)
		return rc;
#ifdef XTC__CORO_ASM
	f->sp = xtc__ctx_make(f->stack.hi, fiber_start, f);
#else
	rc = xtc__uctx_make(f, fiber_start);
	if (rc != XTC_OK) {
		xtc__stack_free(&f->stack);
		return rc;
	}
#endif
	f->asan_bottom = f->stack.lo;
	f->asan_size = (size_t)((char *)f->stack.hi - (char *)f->stack.lo);
#ifdef XTC__FIBER_TSAN
	f->tsan_fiber = __tsan_create_fiber(0);
#endif
	return XTC_OK;
}

void xtc__fiber_release(xtc__fiber_t *f)
{
	if (f == NULL || f->is_root || f == xtc__fiber_cur)
		return;
#ifdef XTC__FIBER_TSAN
	if (f->tsan_fiber != NULL) {
		__tsan_destroy_fiber(f->tsan_fiber);
		f->tsan_fiber = NULL;
	}
#endif
	xtc__stack_free(&f->stack);
	f->sp = NULL;
	f->impl = NULL;
	f->asan_fake = NULL;
	f->asan_bottom = NULL;
	f->asan_size = 0;
}

int xtc__fiber_release_cached(xtc__fiber_t *f)
{
	if (!xtc__stack_cache_put(&f->stack))
		return 0;
#ifdef XTC__FIBER_TSAN
	if (f->tsan_fiber != NULL) {
		__tsan_destroy_fiber(f->tsan_fiber);
		f->tsan_fiber = NULL;
	}
#endif
	f->sp = NULL;
	f->impl = NULL;
	f->asan_fake = NULL;
	f->asan_bottom = NULL;
	f->asan_size = 0;
	return 1;
}

void xtc__fiber_switch_slow(xtc__fiber_t *to)
{
	xtc__fiber_t *from = xtc__fiber_cur;
	if (from == to)
		return;
	xtc__fiber_check_out(from);
	san_before(from, to, 0);
	xtc__fiber_cur = to;
#ifdef XTC__CORO_ASM
	xtc__ctx_swap(from, to);
#else
	xtc__uctx_swap(from, to);
#endif
	san_after(from);
}

void xtc__fiber_exit_to(xtc__fiber_t *to)
{
	xtc__fiber_t *from = xtc__fiber_cur;
	xtc__fiber_check_out(from);
	san_before(from, to, 1);
	xtc__fiber_cur = to;
#ifdef XTC__CORO_ASM
	xtc__ctx_jump(to);
#else
	xtc__uctx_jump(to);
#endif
}
