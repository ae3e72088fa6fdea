/*
 * fiber_int.h - internal contract of the context-switch layer
 * (csrc/arch/switch_*.S, csrc/fiber_ucontext.c, csrc/fiber_stack.c, csrc/fiber.c).
 *
 * Model: a fiber is a saved machine context plus a stack. Every OS thread
 * that runs fibers also has a "root" fiber standing for its own pthread
 * stack (the carrier/scheduler stack); Go callbacks and all blocking loop
 * work happen there. Any fiber may switch to any other fiber of the same
 * thread. A fiber's entry function must never return: when its work is done
 * it calls xtc__fiber_exit_to(), which switches away without saving, so the
 * dead stack can be reused at once (by whoever runs next: a fiber cannot
 * release its own stack while standing on it).
 *
 * Invariants:
 *  - a fiber runs on one OS thread at a time; it moves to another thread only
 *    while switched out (executor migration at yield/park points);
 *  - the first field of xtc__fiber_t is the saved stack pointer, so the
 *    assembly can address it at offset 0;
 *  - xtc__fiber_current() is never NULL on a thread after
 *    xtc__fiber_thread_init() (it is the root fiber when no fiber runs);
 *  - xtc__fiber_current() is updated *before* the machine switch, so code
 *    that finds current != the fiber owning the stack pointer is inside a
 *    switch (the preemption checks rely on this to defer).
 *
 * Thread migration hazard: after xtc__fiber_switch() returns, the caller may
 * be on another OS thread. GCC treats the thread pointer as constant within
 * a function, so TLS addresses (and errno's) computed before the switch must
 * not be reused after it: re-read TLS through a fresh access (the
 * initial-exec accessors below are %fs/tpidr_el0-relative each time).
 *
 * Substrate selection (compile time, identical in every translation unit):
 *  XTC__CORO_ASM      hand-written switch (x86-64 SysV / aarch64 AAPCS, ELF)
 *  XTC__CORO_UCONTEXT makecontext/swapcontext, when XTC_CORO_UCONTEXT is
 *                     defined (meson coro=ucontext) or the arch has no asm.
 * ucontext is never used under ASan (it cannot follow swapcontext), so an
 * ASan build silently keeps the asm substrate.
 */
#ifndef XTC_FIBER_INT_H
#define XTC_FIBER_INT_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#define XTC__FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) || __has_feature(thread_sanitizer)
#define XTC__FIBER_TSAN 1
#endif

#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__ELF__)
#define XTC__HAVE_ASM_SWITCH 1
#endif
#if defined(__GLIBC__) || defined(__linux__)
#define XTC__HAVE_UCONTEXT 1
#endif

#if defined(XTC__HAVE_ASM_SWITCH) && \
	(!defined(XTC_CORO_UCONTEXT) || defined(XTC__FIBER_ASAN))
#define XTC__CORO_ASM 1
#else
#define XTC__CORO_UCONTEXT 1
#endif

#include "base_int.h" /* XTC__TLS_IE */

#define XTC__STACK_MIN       (16u * 1024u)
#define XTC__STACK_DEFAULT   (64u * 1024u)
#define XTC__STACK_MAX       ((size_t)1 << 30)
#define XTC__STACK_CACHE_MAX 64
/* Process-wide pool behind the thread caches (fiber_stack.c), and the largest
 * xtc_stack_reserve; the top XTC__STACK_PREFAULT bytes of a reserved
 * stack are touched. */
#define XTC__STACK_POOL_MAX  1024
#define XTC__STACK_RESERVE_MAX 65536
#define XTC__STACK_PREFAULT  (8u * 1024u)
/* Slabs (fiber_stack.c): about this many bytes each, at least this many slots;
 * slot sizes above SLOT_MAX + a page get a mapping of their own; at most
 * CLASSES slot sizes are carved at once; stacks past the pool's bound are
 * given back RETIRE at a time. */
#define XTC__SLAB_BYTES      ((size_t)64 << 20)
#define XTC__SLAB_MIN_SLOTS  16
#define XTC__SLAB_SLOT_MAX   ((size_t)1 << 20)
#define XTC__SLAB_CLASSES    8
#define XTC__SLAB_RETIRE     256
#define XTC__SLAB_POPULATE   64 /* slots whose top a carve populates ahead */

/* Small stacks (below XTC__STACK_MIN, a per-proc option): usable sizes
 * from SMALL_MIN, rounded up to SMALL_ALIGN, carved back to back with a
 * SMALL_GUARD of soft guard and canary below each: several share a page,
 * so no guard page can be theirs (always XTC__SK_CANARY). */
#define XTC__STACK_SMALL_MIN   1024u
#define XTC__STACK_SMALL_ALIGN 256u
#define XTC__STACK_SMALL_GUARD 64u

/* Kinds of stack (fiber_stack.c design note): how an overflow is caught. */
#define XTC__SK_NONE   0 /* zeroed descriptor, root fiber */
#define XTC__SK_OWN    1 /* own mapping, PROT_NONE guard page */
#define XTC__SK_MADV   2 /* slab slot, MADV_GUARD_INSTALL guard page */
#define XTC__SK_PROT   3 /* slab slot, PROT_NONE guard page (budgeted) */
#define XTC__SK_CANARY 4 /* slab slot, soft guard page + canary */
#define XTC__SK_AUTO   0 /* xtc__stack_guard_force: back to the default */

typedef struct xtc__stack {
	void  *map;     /* slot or mapping base (guard page first) */
	size_t map_len; /* whole slot: guard + usable */
	void  *lo;      /* lowest usable byte (just above the guard) */
	void  *hi;      /* one past the highest usable byte */
	/* The word that must stay zero: just below lo for CANARY, else
	 * xtc__stack_no_canary; NULL in a zeroed descriptor. */
	const uint64_t *canary;
	uint32_t kind;  /* XTC__SK_* */
} xtc__stack_t;
extern const uint64_t xtc__stack_no_canary;

/* Stacks come from a per-thread cache, then the process pool, then the
 * slabs (fiber_stack.c). usable is rounded up to pages; 0 means the process
 * default. Errors: XTC_E_RANGE (too big), XTC_E_NOMEM (the kernel refused
 * a slab or mapping: xtc_stack_nomem_reason() names the limit). */
int  xtc__stack_alloc(size_t usable, xtc__stack_t *out);
/* A proc or task stack size as xtc_proc_opts_t.stack_size takes it: 0
 * (the default), XTC_E_INVAL (below XTC__STACK_SMALL_MIN, or a small
 * stack in a program bound lazily: fiber_stack.c, "Small stacks and lazy
 * binding"), XTC_E_RANGE (above XTC__STACK_MAX). */
int  xtc__stack_size_check(size_t bytes);
/* Small stacks may be handed out: the main program is bound at load. */
int  xtc__stack_small_allowed(void);
/* Return a stack to this thread's cache (pool, or retired, if full).
 * Clears *st. Safe on an empty (zeroed) descriptor. */
void xtc__stack_free(xtc__stack_t *st);
/* Into this thread's cache only: 1 (st cleared), or 0 with st untouched
 * when the cache is full or missing (the reap then spills it to its loop's
 * pool before it would go to the process pool). */
int  xtc__stack_cache_put(xtc__stack_t *st);
void xtc__stack_cache_trim(void); /* retire this thread's cached stacks */
size_t xtc__stack_cache_count(void); /* stacks cached by this thread */
/* Process default usable size behind xtc_stack_size/xtc_set_stack_size.
 * set: < 16 KiB -> XTC_E_INVAL, > 1 GiB -> XTC_E_RANGE; page-rounded. */
size_t xtc__stack_default(void);
int    xtc__stack_set_default(size_t bytes);
size_t xtc__page_size(void);

/* Stack reclaim at park (fiber_reclaim.c): 0 = off, else the bytes kept
 * below the stack pointer. A parking fiber that reads it nonzero calls
 * xtc__stack_reclaim_park(its stack, keep) on itself before it is
 * published as parked. */
extern _Atomic size_t xtc__stack_reclaim_keep;
void xtc__stack_reclaim_park(const xtc__stack_t *st, size_t keep);
/* Tests: carve every later stack of this kind (XTC__SK_OWN, _MADV, _PROT,
 * _CANARY; XTC__SK_AUTO = the default choice); drops this thread's cache
 * and the pool. XTC_E_INVAL for another value. */
int  xtc__stack_guard_force(int kind);
typedef struct xtc__stack_stats {
	size_t slabs, carved, cold;
	long prot_budget; /* PROT guards left, -1 = not computed */
} xtc__stack_stats_t;
void xtc__stack_stats(xtc__stack_stats_t *out);
/* VMA budget of OWN stacks (2 kernel VMAs each; vm.max_map_count defaults
 * to 65530). headroom: how many more fit now (-1 when /proc is
 * unreadable). budget_ok: 1 if n more fit, 0 if not (unknown: fits). */
long xtc__stack_vma_headroom(void);
int  xtc__stack_vma_budget_ok(size_t n);

typedef struct xtc__fiber xtc__fiber_t;
typedef void (*xtc__fiber_entry)(void *arg);

struct xtc__fiber {
	void *sp;                 /* saved stack pointer: MUST stay first */
	xtc__stack_t stack;       /* empty for a thread's root fiber */
	xtc__fiber_entry entry;
	void *arg;
	const char *name;         /* shown by the stack-overflow report */
	uint64_t owner_id;        /* e.g. proc pid packed, for the report */
	int nopreempt;            /* > 0: involuntary preemption deferred */
	int locks;                /* locks held (preempt_locks.c): > 0 defers
	                           * involuntary preemption too */
	int invol;                /* suspended by an involuntary preemption
	                           * (preempt.c): it resumes on this thread */
	int is_root;
	void *impl;               /* substrate data (ucontext_t *), or NULL */
	void *asan_fake;          /* sanitizer bookkeeping */
	const void *asan_bottom;
	size_t asan_size;
	void *tsan_fiber;
};
/* The switch assembly stores and loads the stack pointer at offset 0. */
_Static_assert(offsetof(struct xtc__fiber, sp) == 0, "sp MUST stay first");

/* Per-thread setup: root fiber, sigaltstack for the overflow handler (kept
 * if the thread already has one, e.g. a Go-created M), process-wide SIGSEGV
 * handler installed once. Idempotent; after the first call on a thread it
 * is one TLS load. Errors: XTC_E_NOMEM. */
int xtc__fiber_thread_init(void);
/* Undo thread_init on this thread (trims the stack cache, frees the
 * sigaltstack we installed). Only while the root fiber runs; else no-op. */
void xtc__fiber_thread_fini(void);
xtc__fiber_t *xtc__fiber_root(void);

extern __thread xtc__fiber_t *xtc__fiber_cur XTC__TLS_IE;

/* > 0 while a Go callback runs on this thread: no fiber switch, park,
 * yield or preemption there (the loop's xtc__gocb_enter/leave). */
extern __thread int xtc__gocb_depth XTC__TLS_IE;


/* The running fiber (root when none), NULL before thread_init. Async-signal
 * safe. */
static inline xtc__fiber_t *xtc__fiber_current(void)
{
	return xtc__fiber_cur;
}
/* Called by a fiber about to park (loop.c), before it switches away:
 * one relaxed load while reclaim is off (fiber_reclaim.c). */
static inline void xtc__stack_reclaim_check(void)
{
	size_t keep = atomic_load_explicit(&xtc__stack_reclaim_keep,
	                                   memory_order_relaxed);

	if (__builtin_expect(keep != 0, 0))
		xtc__stack_reclaim_park(&xtc__fiber_cur->stack, keep);
}
/* The same from code that may resume on another thread between two reads
 * in one function (a migratable proc looping around a park). The real
 * %fs-relative load is always right, but under TSan GCC hoists the
 * *address* it reports to __tsan_read out of the loop (the thread pointer
 * is invariant within a function for the compiler), so a migrated fiber
 * is reported reading the TLS of the carrier it left. Under TSan the read
 * goes through a call (fiber.c), which recomputes it; elsewhere inline. */
#if defined(__SANITIZE_THREAD__)
xtc__fiber_t *xtc__fiber_current_call(void);
#define XTC__FIBER_CUR_MIGRATABLE() xtc__fiber_current_call()
#else
#define XTC__FIBER_CUR_MIGRATABLE() xtc__fiber_cur
#endif

/* The runtime's one spinlock (proc and mailbox state, a task's await
 * waiters, a future's state): a byte, held for tens of instructions and
 * never across a switch, park, yield or user callback. Preemption is
 * disabled while it is held: the lock raises the running fiber's
 * nopreempt count, so a fiber preempted while holding it cannot leave a
 * peer fiber of the same thread spinning on it (runtime code is outside
 * the code map anyway; this holds for any holder). A waiter spins with
 * the CPU hint, then yields the thread: the holder's thread may have been
 * descheduled. Here, not in base_int.h, because nopreempt is the fiber
 * layer's. The current fiber is read as XTC__FIBER_CUR_MIGRATABLE: a
 * migratable proc may take the lock on one carrier, park, and take it
 * again on another. */
typedef struct { _Atomic uint8_t v; } xtc__spin_t;

/* The contended path (spin, then yield the thread), out of line: inlined
 * at every lock site it made each caller save every callee-saved register
 * even when the lock was free (proc spawn/exit takes two slot locks). */
void xtc__spin_lock_wait(xtc__spin_t *l);

static inline void xtc__spin_lock(xtc__spin_t *l)
{
	xtc__fiber_t *f = XTC__FIBER_CUR_MIGRATABLE();
	if (f)
		f->nopreempt++;
	if (__builtin_expect(atomic_exchange_explicit(&l->v, 1,
	                                              memory_order_acquire), 0))
		xtc__spin_lock_wait(l);
}

static inline void xtc__spin_unlock(xtc__spin_t *l)
{
	xtc__fiber_t *f = XTC__FIBER_CUR_MIGRATABLE();
	atomic_store_explicit(&l->v, 0, memory_order_release);
	if (f)
		f->nopreempt--;
}

/* Prepare f to run entry(arg) on a fresh stack of stack_size bytes (0 =
 * the process default, see xtc_stack_size()). Clears every field of *f
 * first: set name/owner_id/nopreempt after this call. The new fiber's FP
 * control state (MXCSR+x87 CW / FPCR) is the calling thread's at init.
 * Errors: XTC_E_INVAL (NULL f or entry, size < 1 KiB; 1..16 KiB is a
 * small stack, fiber_stack.c), XTC_E_RANGE, XTC_E_NOMEM. */
int  xtc__fiber_init(xtc__fiber_t *f, size_t stack_size,
                     xtc__fiber_entry entry, void *arg);
/* Release the stack of a fiber that has exited (or never ran). No-op for a
 * root fiber, the running fiber, or an already released one. */
void xtc__fiber_release(xtc__fiber_t *f);
/* The reap's release of an exited fiber (never the running one or a
 * root): as xtc__fiber_release when the stack fits this thread's cache
 * (returns 1); 0 with f untouched otherwise. One call where the reap used
 * three (a cache count, the release, the free). */
int  xtc__fiber_release_cached(xtc__fiber_t *f);

/* Save the current context into xtc__fiber_current() and resume to.
 * to == current is a no-op. */
static inline void xtc__fiber_switch(xtc__fiber_t *to);
/* Leave the current fiber for good (its stack may be reused) and resume to. */
__attribute__((noreturn)) void xtc__fiber_exit_to(xtc__fiber_t *to);

/* Name of the context-switch substrate: "asm" or "ucontext". */
const char *xtc__fiber_substrate(void);

/* ---- substrates (used by fiber.c and the switch benchmark) ---------- */

/* A fresh context calls start(f) on its own stack; start never returns. */
typedef void (*xtc__ctx_start_fn)(xtc__fiber_t *f);

#ifdef XTC__HAVE_ASM_SWITCH
/* csrc/arch/switch_*.S. make: build the first frame below top (aligned
 * down to 16) and return the stack pointer to store in f->sp; FP control
 * state is captured from the caller. swap: save the callee-saved context
 * on the current stack, store sp in from->sp, resume to->sp. jump: resume
 * to->sp without saving. */
void *xtc__ctx_make(void *top, xtc__ctx_start_fn start, xtc__fiber_t *f);
void  xtc__ctx_swap(xtc__fiber_t *from, xtc__fiber_t *to);
__attribute__((noreturn)) void xtc__ctx_jump(xtc__fiber_t *to);
#endif

#ifdef XTC__HAVE_UCONTEXT
/* csrc/fiber_ucontext.c. make places its ucontext_t at the top of f->stack
 * and sets f->impl. A root fiber needs f->impl pointing at storage of
 * xtc__uctx_size() bytes before its first swap. */
int    xtc__uctx_make(xtc__fiber_t *f, xtc__ctx_start_fn start);
void   xtc__uctx_swap(xtc__fiber_t *from, xtc__fiber_t *to);
__attribute__((noreturn)) void xtc__uctx_jump(xtc__fiber_t *to);
size_t xtc__uctx_size(void);
/* Take signo out of the signal mask f's context restores when it is
 * switched to (swapcontext makes the mask a context's, not the thread's). */
void   xtc__uctx_sig_unblock(xtc__fiber_t *f, int signo);
#endif

/* Overflow checks of the fiber being switched away from (fiber_stack.c design
 * note): its stack pointer below its stack, or its canary written. The
 * trap reports the overflow (proc name and pid) and kills the process
 * with SIGSEGV; it never returns. Root fibers pass: lo is NULL and the
 * canary pointer is xtc__stack_no_canary. Two loads and two compares
 * per switch (bench_switch, xtc_async(3)). */
__attribute__((noreturn, cold)) void
xtc__stack_overflow_trap(const xtc__fiber_t *f, uintptr_t sp);
static inline void xtc__fiber_check_out(const xtc__fiber_t *f)
{
	uintptr_t sp;
#if defined(__x86_64__)
	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
	__asm__ volatile("mov %0, sp" : "=r"(sp));
#else
	sp = (uintptr_t)__builtin_frame_address(0);
#endif
	if (__builtin_expect(sp < (uintptr_t)f->stack.lo ||
	                     *f->stack.canary != 0, 0))
		xtc__stack_overflow_trap(f, sp);
}

/* Out-of-line switch with sanitizer annotations / ucontext (fiber.c). */
void xtc__fiber_switch_slow(xtc__fiber_t *to);

/* The hot path of xtc_yield: with the plain asm substrate this is a TLS
 * store plus the register swap, inlined into the caller. */
static inline void xtc__fiber_switch(xtc__fiber_t *to)
{
#if defined(XTC__CORO_ASM) && !defined(XTC__FIBER_ASAN) && \
	!defined(XTC__FIBER_TSAN)
	xtc__fiber_t *from = xtc__fiber_cur;
	if (__builtin_expect(from == to, 0))
		return;
	xtc__fiber_check_out(from);
	xtc__fiber_cur = to;
	xtc__ctx_swap(from, to);
#else
	xtc__fiber_switch_slow(to);
#endif
}

#endif
