/*
 * preempt.c - the preemption seam (xtc_preempt_arm & co), the signal
 * handler with its safety checks, no-preempt regions and deferral
 * accounting. The map of code that must never be interrupted is
 * preempt_codemap.c, the code declared preemptible preempt_allow.c, lock
 * tracking preempt_locks.c; what a run publishes (deadlines, contention,
 * cost, the overhead budget) is preempt_run.c; who signals is
 * preempt_monitor.c. The carrier/monitor protocol is in preempt_int.h.
 *
 * Model:
 *  1. Arming registers the calling thread with the monitor
 *     (preempt_monitor.c): it gets a slot whose deadline says when its
 *     current work overruns. A plain armed thread ticks every interval; a
 *     loop carrier publishes a deadline per fiber run
 *     (xtc__preempt_run_begin/run_end) and nothing while idle, so idle
 *     carriers receive no signal. An executor run with nothing else to run
 *     on its loop is published alone (a soft slice end, a far hard
 *     deadline) until someone contends for the carrier: preempting it would
 *     only dispatch it again, at the price of a signal.
 *  2. The handler (SA_SIGINFO | SA_ONSTACK | SA_RESTART, a real-time signal
 *     >= SIGRTMIN+3, initial-exec TLS only, errno saved) tells the tick net
 *     (its si_value) from the slice timer, and a timer expiry (SI_TIMER,
 *     no generation: due only if the slot's current deadline passed, or
 *     for a slice end once it is in its window, the last half of the
 *     slice, XTC__SLICE_EARLY_DIV) from a queued signal (due only for the
 *     carrier's current run generation). An early expiry re-arms the timer
 *     for the current run. A due signal counts a tick and sets the pending
 *     flag that the fiber's next cooperative check (xtc_yield_if_due)
 *     honours.
 *  3. With the involuntary path on, a due signal redirects the fiber when
 *     every check of invariant 2 passes: the handler only rewrites the
 *     saved context (x86-64: RSP skips the red zone and "pushes" the old
 *     RIP, RIP points at the trampoline, arch/preempt_x86_64_sysv_elf.S);
 *     the switch happens after sigreturn, on the fiber's own stack, where
 *     the trampoline saves the full register state with xsave and yields.
 *     On aarch64 (no memory-indirect branch, so no register is free for
 *     the return jump) the handler copies the whole signal frame onto the
 *     fiber's stack and the trampoline resumes with rt_sigreturn on the
 *     copy.
 *  4. Safety is deny by default (xtc_preempt(3) SAFETY). Library code
 *     assumes nothing else runs on its thread until a call returns: its
 *     locks, pthread_once initialisers and thread-local state (an error
 *     queue, a DRBG, an error handler). So a fiber is redirected only while
 *     its PC is in code declared preemptible (preempt_allow.c: the
 *     XTC_PREEMPTIBLE section of every loaded object, objects allowed by
 *     name, ranges declared at run time) and it holds no lock
 *     (preempt_locks.c counts pthread mutexes, rwlocks, spin locks and
 *     pthread_once initialisers per fiber). The two are complementary:
 *     lock tracking alone (XTC_PREEMPT_POLICY_ANY) prevents the deadlocks
 *     but not the crossed thread-local state; deny by default alone leaves
 *     declared code that takes a lock exposed. The policies that allow
 *     more are explicit opt-ins (xtc_preempt_set_policy, XTC_PREEMPT_POLICY).
 *  5. A refused preemption is deferred: counted by reason, flagged, and the
 *     deadline re-armed a quarter slice (at least twice the measured cost)
 *     later so the trigger asks again, then an eighth of the time the same
 *     run has refused so far (at most 50 ms): a kernel back from a library
 *     call is cut soon after, a carrier blocked in a lock wait is not
 *     flooded. After XTC_PREEMPT_BLOCKED_NS of refusals the run is reported
 *     once (write(2) from the handler: its fiber, why, the PC, and the
 *     fibers preempted on the carrier). The next yield check, park point or
 *     the end of a no-preempt region honours a deferred preemption. A run
 *     cut late overran its slice: the demoted level's aging alternates
 *     with new work in run time, not in picks (sched.c demoted_aged), so
 *     the overrun is not taken from short requests again.
 *  6. A signal that finds the carrier in its own scheduler code (between a
 *     switch and the run's bookkeeping) is not a deferral of user code: the
 *     carrier reaches a boundary by itself, so no pending flag is set; an
 *     expiry re-times the run from its slice end (or half a slice on), a
 *     producer's signal lets the next poll ask again. Re-asking sooner fed
 *     an interrupt storm on a slow hypervisor, where each expiry stalled
 *     the carrier past the next one.
 *
 * Invariants:
 *  1. The handler never switches fibers and never blocks: it counts, flags
 *     and at most rewrites the interrupted context.
 *  2. A fiber is redirected only if all hold: it belongs to the current run,
 *     its no-preempt count is zero, it holds no tracked lock, no Go
 *     callback is active on the thread, its SP lies in its own stack with
 *     headroom for the save area (and inside its guard: a stack overflow
 *     is reported, not redirected), and its PC is in declared code outside
 *     the runtime, libc, the loader and the vDSO.
 *  3. Kills land only where a preemption may: a kill ends a fiber where it
 *     is suspended (a yield, a park, or this redirect); xtc_proc_at_exit
 *     frees what a kill would leak.
 *  4. The trampoline keeps errno per fiber and marks the fiber (invol), so
 *     the loop never hands it to another carrier before it resumes.
 *
 * Rejected:
 *  1. Switching fibers inside the handler: it would reuse the alternate
 *     stack and run with the signal masked.
 *  2. fxsave: loses the upper halves of the vector registers.
 *  3. Preempting anywhere outside the runtime, or a deny-list of system
 *     libraries as the default: every other library and every malloc
 *     replacement was then preemptible anywhere; sqlite3, OpenSSL,
 *     libxml2, pcre2's JIT, jemalloc and tcmalloc deadlocked, crashed or
 *     crossed requests' state (test/real_libs.c, internal/reallib).
 *  4. A return trap (rewriting the return address of the library call on
 *     the fiber's stack, to preempt at its return): without unwind
 *     information the handler cannot tell a return address from a stale
 *     word that looks like one, and would corrupt it.
 *  5. Not built (a decision, not a refusal): preemption points inserted by
 *     the compiler (a GCC or clang pass plugin checking a per-carrier flag
 *     at loop back-edges and function entries, as Concord does). Safe by
 *     construction and ~1 ns a check, but a plugin binds to one compiler
 *     version (gcc-N-plugin-dev, the LLVM ABI) while cgo builds use
 *     whatever CC is installed, and user code would read libxtc's
 *     initial-exec TLS across objects. What such a point does exists by
 *     hand: xtc_yield_if_due() reads the flag a deferred preemption sets
 *     (XTC__PF_WANT) and the clock-checked slice (xtc_exec_set_preempt_coop)
 *     cuts at the points with no signal.
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "preempt_int.h"

__thread xtc__ptls_t xtc__ptls XTC__PTLS;

uint32_t xtc__xsave_size;
uint32_t xtc__xsave_mode;
_Atomic int64_t xtc__preempt_adaptive_slice;

_Atomic int64_t xtc__preempt_alone_ns = XTC__PREEMPT_ALONE_NS;
_Atomic int64_t xtc__preempt_net_grace_ns = XTC__PREEMPT_NET_GRACE_NS;

static _Atomic int involuntary_on;
static _Atomic int handler_installed;
static int preempt_signo; /* 0 until fixed by the first arm */
static int requested_signo;
static pid_t self_pid;
pthread_mutex_t xtc__preempt_init_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* Every thread's counters, summed by xtc_preempt_stats_global. */
#define MAX_STAT_THREADS 1024
static xtc_preempt_stats_t *stat_ptrs[MAX_STAT_THREADS];
static xtc_preempt_stats_t retired;
static int n_stat;

static int64_t now_ns(void)
{
	return xtc__now_ns(); /* base_int.h */
}

/* ------------------------------------------------------------------ */
/* CPU state save size                                                  */
/* ------------------------------------------------------------------ */

static void xsave_probe(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d)
	                 : "a"(1), "c"(0));
	if (c & (1u << 27)) { /* OSXSAVE: the OS enabled XSAVE */
		__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d)
		                 : "a"(0xd), "c"(0));
		xtc__xsave_size = (b + 63) & ~63u;
		xtc__xsave_mode = 1;
	} else {
		xtc__xsave_size = 512;
		xtc__xsave_mode = 0;
	}
#endif
}

#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__linux__)
#define ARCH_INVOLUNTARY 1
#else
#define ARCH_INVOLUNTARY 0
#endif

/* Truthful: the redirect exists here and the code map was located (a
 * static executable linked in the usual order included). */
int xtc_preempt_involuntary_supported(void)
{
	if (!ARCH_INVOLUNTARY)
		return 0;
	pthread_mutex_lock(&xtc__preempt_init_mu);
	int rc = xtc__preempt_map_build();
	int ok = rc == XTC_OK && xtc__preempt_map_rt_known();
	pthread_mutex_unlock(&xtc__preempt_init_mu);
	return ok;
}

/* ------------------------------------------------------------------ */
/* The handler                                                          */
/* ------------------------------------------------------------------ */

_Atomic int64_t xtc__preempt_cost_ewma;

/* Ask again at `at` for the current run: the carrier's timer when it has
 * one, else the monitor. Async-signal-safe (timer_settime, futex wake). */
static int64_t not_before(int64_t at);
static void ask_at(xtc__pslot_t *s, int64_t at)
{
	at = not_before(at);
	xtc__preempt_set_deadline(at);
	if (atomic_load_explicit(&s->timer, memory_order_relaxed))
		xtc__ctimer_arm(s, at);
	else
		xtc__monitor_kick(at);
}

/* When a refused preemption asks again: never sooner than twice what an
 * expiry costs, so a refusal that keeps recurring (a long libc call) does
 * not turn into an interrupt storm on a machine where one expiry costs
 * tens of microseconds. */
static int64_t reask_floor(void)
{
	int64_t c2 = 2 * atomic_load_explicit(&xtc__preempt_cost_ewma,
	                                      memory_order_relaxed);
	int64_t l2 = 2 * xtc__ptls.fire_late;
	if (c2 < l2)
		c2 = l2;
	return c2 < XTC__PREEMPT_REASK_MIN_NS ? XTC__PREEMPT_REASK_MIN_NS : c2;
}

static int64_t reask_ns(int64_t slice)
{
	int64_t d = slice / 4, f = reask_floor();
	return d < f ? f : d;
}

/* Every time the handler asks again (a deferral, a seam tick, an expiry
 * that landed in the runtime) goes through here: never sooner than one
 * re-ask floor after the clock read now, at the handler's end. A timer
 * armed nearer than what an expiry costs (delivery, this handler,
 * sigreturn) is pending again when the handler returns, before the
 * interrupted code runs one instruction: the thread livelocked in the
 * handler (a 5 us xtc_fn slice whose expiry landed in the runtime's
 * run_slice re-armed for now + 2.5 us: calls took 8-19 s; a 2 us carrier
 * slice with no budget honoured a stop seconds late). So the interrupted
 * code always gets at least a floor of progress, and a slice shorter than
 * the floor costs one floor, never an unbounded loop. */
static int64_t not_before(int64_t at)
{
	int64_t lo = xtc__deadline_after(now_ns(), reask_floor());
	return at > lo ? at : lo;
}


/* A carrier timer expired. 1: the current run is due (treat as a
 * preemption signal); 0: it fired early for a run that ended, or before
 * this run's deadline: re-armed for the run now current, if it is timed
 * by the timer. *due_at: the deadline that was due. */
void xtc__monitor_count_fire(int due);
static int timer_due(xtc__ptls_t *p, xtc__pslot_t *s, int64_t now,
                     int64_t *due_at)
{
	int64_t hard = atomic_load_explicit(&s->deadline, memory_order_relaxed);
	int64_t soft = atomic_load_explicit(&s->soft, memory_order_relaxed);
	int64_t d = hard, early = 0;
	int64_t was = atomic_load_explicit(&s->timer_at, memory_order_relaxed);

	atomic_store_explicit(&s->timer_at, INT64_MAX, memory_order_relaxed);
	/* an expiry's lateness is mostly the interrupt's own cost where the
	 * hypervisor is slow: overhead when it bought nothing (a due one is
	 * counted by its cost measurement, cost_close) */
	int64_t late = 0;
	if (was != INT64_MAX && now > was) {
		late = now - was < 100000 ? now - was : 100000;
		p->fire_late = p->fire_late == 0 ? late :
		               p->fire_late + (late - p->fire_late) / 8;
	}
	if (hard == INT64_MAX || p->fiber == NULL || xtc__gocb_depth > 0) {
		p->ovh_ns += late;
		xtc__monitor_count_fire(0);
		return 0; /* idle, between runs, or in Go code: nothing to do */
	}
	if (atomic_load_explicit(&s->contended, memory_order_relaxed) &&
	    soft < d)
		d = soft;
	/* a slice end is due from its window on (the timer was left armed
	 * there for the short runs that started meanwhile); a loop timer's
	 * hard deadline is exact */
	if (d == soft)
		early = p->early;
	else
		early = p->hard_early;
	*due_at = d;
	if ((p->pend & XTC__PF_WANT) || now >= d - early) {
		xtc__monitor_count_fire(1);
		return 1;
	}
	p->ovh_ns += late;
	xtc__monitor_count_fire(0);
	/* early: keep timing this run unless only the monitor's net does */
	if (d != hard || atomic_load_explicit(&s->net,
	                                      memory_order_relaxed) == INT64_MAX)
		xtc__ctimer_arm(s, d);
	return 0;
}

/* The tick net expired (preempt_monitor.c, trigger 3.): 1 if the current run
 * overran its slice end (contended) or its hard deadline, or a deferred
 * preemption waits; the safety net producers' polls and the slice timer
 * leave behind, at the price of no interrupt of its own. */
static int tick_net_due(xtc__ptls_t *p, xtc__pslot_t *s, int64_t *now,
                        int64_t *due_at)
{
	int64_t d = atomic_load_explicit(&s->deadline, memory_order_relaxed);
	if (d == INT64_MAX || p->fiber == NULL)
		return 0; /* (Go code: the handler paused the net already) */
	if (atomic_load_explicit(&s->contended, memory_order_relaxed)) {
		int64_t soft = atomic_load_explicit(&s->soft,
		                                    memory_order_relaxed);
		if (soft < d)
			d = soft;
	}
	*now = now_ns();
	*due_at = d;
	return *now >= d || (p->pend & XTC__PF_WANT);
}

/* An expiry that landed outside the run's fiber: time the run again
 * without moving its published deadline. */
static void redo_timer(xtc__ptls_t *p, xtc__pslot_t *s, int64_t now)
{
	if (p->fiber == NULL)
		return;
	int64_t soft = atomic_load_explicit(&s->soft, memory_order_relaxed);
	int64_t at = now + (p->slice > 0 ? p->slice / 2 : 20000);
	if (soft > at)
		at = soft;
	at = not_before(at);
	if (atomic_load_explicit(&s->timer, memory_order_relaxed))
		xtc__ctimer_arm(s, at);
	else
		xtc__monitor_kick(at);
}

/* Why the handler may not redirect the interrupted point (safe_point). */
enum { SP_OK, SP_GOCB, SP_CTX, SP_NOPREEMPT, SP_STACK, SP_PC, SP_LOCK };

static void count_refusal(xtc__ptls_t *p, int why)
{
	switch (why) {
	case SP_GOCB:
		p->st.refused_gocb++;
		break;
	case SP_NOPREEMPT:
		p->st.refused_nopreempt++;
		break;
	case SP_STACK:
		p->st.refused_stack++;
		break;
	case SP_LOCK:
		p->st.refused_lock++;
		break;
	default:
		p->st.refused_pc++;
	}
}

/* Async-signal-safe text for the blocked report (no stdio). */
typedef struct rbuf {
	char b[512];
	size_t n;
} rbuf_t;

static void r_str(rbuf_t *r, const char *s)
{
	while (s != NULL && *s && r->n < sizeof r->b - 1)
		r->b[r->n++] = *s++;
}

static void r_num(rbuf_t *r, uint64_t v, unsigned base)
{
	char t[24];
	int k = 0;
	do {
		t[k++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v != 0 && k < (int)sizeof t);
	while (k > 0 && r->n < sizeof r->b - 1)
		r->b[r->n++] = t[--k];
}

static void r_fiber(rbuf_t *r, const char *name, uint64_t id)
{
	r_str(r, "\"");
	r_str(r, name ? name : "");
	r_str(r, "\"");
	if (id != 0) {
		r_str(r, " <");
		r_num(r, id >> 48, 10);
		r_str(r, ".");
		r_num(r, (id >> 32) & 0xffff, 10);
		r_str(r, ".");
		r_num(r, id & 0xffffffffu, 10);
		r_str(r, ">");
	}
}

/* A run refused preemption for XTC_PREEMPT_BLOCKED_NS: one line on stderr
 * naming the carrier, the run's fiber, why it refused, and the fibers
 * suspended by preemption on this carrier (one of them may hold what the
 * run waits for). Called from the handler: write(2) only. */
static void blocked_report(xtc__ptls_t *p, int why, uintptr_t pc,
                           int64_t ran)
{
	rbuf_t r = { .n = 0 };
	xtc__fiber_t *f = p->fiber;
	r_str(&r, "xtc: WARN preemption refused for ");
	r_num(&r, (uint64_t)(ran / 1000000), 10);
	r_str(&r, " ms on carrier tid ");
	r_num(&r, (uint64_t)syscall(SYS_gettid), 10);
	r_str(&r, ": fiber ");
	r_fiber(&r, f ? f->name : NULL, f ? f->owner_id : 0);
	switch (why) {
	case SP_LOCK:
		r_str(&r, " holds ");
		r_num(&r, f ? (uint64_t)f->locks : 0, 10);
		r_str(&r, " lock(s)");
		break;
	case SP_NOPREEMPT:
		r_str(&r, " is in a no-preempt region");
		break;
	case SP_PC:
		r_str(&r, " is in code not declared preemptible");
		break;
	default:
		r_str(&r, " cannot be preempted");
	}
	r_str(&r, " (pc 0x");
	r_num(&r, pc, 16);
	r_str(&r, "; a lock wait or a long library call); preempted on this "
	          "carrier: ");
	if (p->n_preempted == 0)
		r_str(&r, "none");
	for (int i = 0; i < p->n_preempted; i++) {
		if (i > 0)
			r_str(&r, ", ");
		r_fiber(&r, p->preempted[i].name, p->preempted[i].owner_id);
	}
	r_str(&r, "\n");
	ssize_t w = write(STDERR_FILENO, r.b, r.n);
	(void)w;
}

/* A refused preemption: flagged for the next boundary, and asked again
 * later. Not at a fixed rate: the longer the same run has refused, the
 * longer the wait (an eighth of the time refused so far, at most
 * REASK_MAX_NS), so a kernel that returns from a library call is cut
 * soon after, while a carrier blocked in a lock wait is asked ~90 times
 * in its first second and 20 times a second after that (at a fixed
 * quarter slice it took ~10 000 signals a second and 0.8 CPU-s per
 * second). A quarter instead of an eighth made a loop that spends 95% of
 * its time in a clock call wait over a second for its cut on a loaded
 * machine (test_fork). A run that refused for
 * XTC_PREEMPT_BLOCKED_NS is reported once (blocked_report). */
#define REASK_MAX_NS 50000000
static void defer(xtc__ptls_t *p, int64_t now, int why, uintptr_t pc)
{
	p->pend |= XTC__PF_WANT;
	p->st.deferrals++;
	int64_t d = reask_ns(p->slice);
	if (p->refuse_run != p->run_start || p->refuse_since == 0) {
		p->refuse_run = p->run_start;
		p->refuse_since = now;
		p->refuse_reported = 0;
	} else {
		int64_t el = now - p->refuse_since;
		if (el / 8 > d)
			d = el / 8 < REASK_MAX_NS ? el / 8 : REASK_MAX_NS;
		if (!p->refuse_reported && el >= XTC_PREEMPT_BLOCKED_NS) {
			p->refuse_reported = 1;
			p->st.blocked_reports++;
			blocked_report(p, why, pc, el);
		}
	}
	if (p->slot != NULL)
		ask_at(p->slot, xtc__deadline_after(now, d));
}

static uintptr_t uc_pc(const void *ucv)
{
	const ucontext_t *uc = ucv;
#if defined(__x86_64__) && defined(__linux__)
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__) && defined(__linux__)
	return (uintptr_t)uc->uc_mcontext.pc;
#else
	(void)uc;
	return 0;
#endif
}

/* Every check of the handler (design note above; xtc_preempt(3)).
 * SP_OK if the interrupted point may be redirected, else why not. */
static int safe_point(xtc__ptls_t *p, const ucontext_t *uc)
{
#if defined(__x86_64__) && defined(__linux__)
	if (xtc__gocb_depth > 0)
		return SP_GOCB;
	xtc__fiber_t *f = xtc__fiber_cur;
	if (f == NULL || f != p->fiber || f->is_root || f->stack.lo == NULL)
		return SP_CTX;
	if (f->nopreempt > 0)
		return SP_NOPREEMPT;
	if (f->locks > 0)
		return SP_LOCK;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	uintptr_t lo = (uintptr_t)f->stack.lo, hi = (uintptr_t)f->stack.hi;
	uintptr_t need = XTC__PREEMPT_HEADROOM + xtc__xsave_size + 256 + 136;
	if (sp >= (uintptr_t)f->stack.map && sp < lo)
		xtc__stack_overflow_trap(f, sp); /* in its guard: overflowed */
	if (sp > hi || sp < lo + need)
		return SP_STACK;
	return xtc__preempt_map_allows((uintptr_t)uc->uc_mcontext.gregs[REG_RIP]) ?
	       SP_OK : SP_PC;
#elif defined(__aarch64__) && defined(__linux__)
	if (xtc__gocb_depth > 0)
		return SP_GOCB;
	xtc__fiber_t *f = xtc__fiber_cur;
	if (f == NULL || f != p->fiber || f->is_root || f->stack.lo == NULL)
		return SP_CTX;
	if (f->nopreempt > 0)
		return SP_NOPREEMPT;
	if (f->locks > 0)
		return SP_LOCK;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.sp;
	uintptr_t lo = (uintptr_t)f->stack.lo, hi = (uintptr_t)f->stack.hi;
	uintptr_t need = XTC__PREEMPT_HEADROOM + sizeof(siginfo_t) +
	                 sizeof(ucontext_t) + 256;
	if (sp >= (uintptr_t)f->stack.map && sp < lo)
		xtc__stack_overflow_trap(f, sp); /* in its guard: overflowed */
	if (sp > hi || sp < lo + need)
		return SP_STACK;
	return xtc__preempt_map_allows((uintptr_t)uc->uc_mcontext.pc) ? SP_OK : SP_PC;
#else
	(void)p;
	(void)uc;
	return SP_CTX;
#endif
}

#if defined(__aarch64__) && defined(__linux__)
/* The frame the kernel built must be siginfo immediately followed by the
 * ucontext, with no record pointing outside it (an SVE extra_context). */
static int frame_copyable(const siginfo_t *si, const ucontext_t *uc)
{
	if ((const char *)uc != (const char *)si + sizeof(siginfo_t))
		return 0;
	const unsigned char *r = (const unsigned char *)uc->uc_mcontext.__reserved;
	size_t off = 0, cap = sizeof uc->uc_mcontext.__reserved;
	while (off + 8 <= cap) {
		uint32_t magic, size;
		memcpy(&magic, r + off, 4);
		memcpy(&size, r + off + 4, 4);
		if (magic == 0)
			return 1;
		if (magic == 0x45585401u /* EXTRA_MAGIC */ || size < 8 ||
		    off + size > cap)
			return 0;
		off += size;
	}
	return 0;
}
#endif

/* 0: redirected; -1: cannot (the caller defers). */
static int redirect(siginfo_t *si, ucontext_t *uc)
{
#if defined(__x86_64__) && defined(__linux__)
	(void)si;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP] - 128 - 8;
	*(uintptr_t *)sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)&xtc__preempt_trampoline;
	return 0;
#elif defined(__aarch64__) && defined(__linux__)
	if (!frame_copyable(si, uc))
		return -1;
	size_t n = sizeof(siginfo_t) + sizeof(ucontext_t);
	uintptr_t sp = ((uintptr_t)uc->uc_mcontext.sp - 128 - n) & ~(uintptr_t)15;
	/* word copy: memcpy is not on every async-signal-safe list */
	const uint64_t *src = (const uint64_t *)(const void *)si;
	uint64_t *dst = (uint64_t *)sp;
	for (size_t i = 0; i < n / 8; i++)
		dst[i] = src[i];
	/* the copy keeps the interrupted state; the live one goes to the
	 * trampoline with sp at the copy */
	uc->uc_mcontext.sp = sp;
	uc->uc_mcontext.pc = (uintptr_t)&xtc__preempt_trampoline;
	return 0;
#else
	(void)si;
	(void)uc;
	return -1;
#endif
}

static void handler(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	int saved = errno;
	xtc__ptls_t *p = &xtc__ptls;
	xtc__pslot_t *s = p->slot;
	int64_t now, due_at = 0;
	int tick = 0;
	if (s == NULL)
		goto out;
	if (si->si_code == SI_TIMER &&
	    si->si_value.sival_int == XTC__TICK_NET_SIVAL) {
		/* the tick net: periodic, nothing to re-arm or count when the
		 * run is on time; in Go code it stops until the callback
		 * returns (xtc__tick_net_pause) */
		if (xtc__gocb_depth > 0) {
			xtc__tick_net_pause();
			goto out;
		}
		if (!tick_net_due(p, s, &now, &due_at))
			goto out;
		tick = 1;
		p->st.tick_nets++;
	} else if (si->si_code == SI_TIMER) {
		/* this carrier's own timer (SIGEV_THREAD_ID) */
		if (!atomic_load_explicit(&s->timer, memory_order_relaxed))
			goto out;
		now = now_ns();
		if (!timer_due(p, s, now, &due_at)) {
			p->st.stale++;
			goto out;
		}
	} else {
		if (si->si_code != SI_QUEUE || si->si_pid != self_pid)
			goto out;
		/* a signal for an earlier run, or for a run this handler
		 * already redirected (deadline cleared below; the fiber is on
		 * its way through the trampoline): a producer's poll and the
		 * carrier's expiry both saw the same overrun. Refusing it as
		 * an unsafe point would flag WANT and re-arm (a spurious
		 * expiry later: 15% of the preemptions of a 50 us slice at
		 * 10% A1 load were such duplicates). */
		if ((uint32_t)si->si_value.sival_int !=
		        atomic_load_explicit(&s->gen, memory_order_relaxed) ||
		    atomic_load_explicit(&s->deadline, memory_order_relaxed) ==
		        INT64_MAX) {
			p->st.stale++;
			goto out;
		}
		/* between two runs of a batch (batch_keeps): nothing to cut */
		if (p->fiber == NULL &&
		    atomic_load_explicit(&s->timer, memory_order_relaxed)) {
			p->st.stale++;
			goto out;
		}
		now = now_ns();
		due_at = atomic_load_explicit(&s->soft, memory_order_relaxed);
	}
	p->st.signals++;
	p->st.ticks++;
	p->pend |= XTC__PF_TICK;
	int invol = (atomic_load_explicit(&involuntary_on, memory_order_relaxed) ||
	             p->force_invol) && ARCH_INVOLUNTARY;
	if (!invol || p->fiber == NULL) {
		if (tick)
			goto out; /* the next tick asks again */
		/* seam semantics: tick again one interval later */
		int64_t sl = p->fiber ? p->slice :
		             atomic_load_explicit(&s->slice_ns, memory_order_relaxed);
		ask_at(s, xtc__deadline_after(now, sl));
		goto out;
	}
	int why = safe_point(p, ucv);
	switch (why) {
	case SP_OK:
		break;
	case SP_CTX:
		p->st.refused_ctx++;
		if (!atomic_load_explicit(&s->timer, memory_order_relaxed)) {
			/* the monitor's path: it asks again once the deadline
			 * moves (defer), as before the carrier timers */
			defer(p, now, why, uc_pc(ucv));
			goto out;
		}
		/* The carrier is in its own code between a switch and the run's
		 * bookkeeping (run_begin's timer syscall, a fiber's exit): it
		 * reaches a boundary by itself. Not a deferral of user code: no
		 * pending flag (it would make every later expiry "due") and no
		 * re-ask a quarter slice later, which on a slow hypervisor fed
		 * a storm of expiries landing here again (a 50 us slice at 10%
		 * load collapsed). */
		p->st.deferrals++;
		if (tick)
			; /* the next tick asks again */
		else if (si->si_code == SI_TIMER)
			/* the run keeps being timed, from its slice end or half
			 * a slice from now, whichever is later */
			redo_timer(p, s, now);
		else
			/* a producer's (or the net's) signal: the run has ended
			 * (a fiber not switched in yet carries a fresh slice no
			 * poll finds overdue, unless the carrier stalled longer
			 * than a slice in between: the next poll asks again,
			 * 2 -> 1). No syscall. */
			atomic_store_explicit(&s->contended, 1,
			                      memory_order_relaxed);
		goto out;
	default:
		count_refusal(p, why);
		defer(p, now, why, uc_pc(ucv));
		goto out;
	}
	if (redirect(si, ucv) != 0) {
		defer(p, now, SP_STACK, uc_pc(ucv));
		goto out;
	}
	/* The run ends at the trampoline's yield; the next run re-arms. */
	xtc__preempt_set_deadline(INT64_MAX);
	p->pend = 0;
	/* cost measurement, closed by the next run start on this carrier */
	p->pc_at = now;
	/* a timer expiry's lateness is mostly the interrupt's own stall of
	 * this carrier; a queued signal's is mostly the sender's delay and the
	 * flight across CPUs while the fiber kept running: only its stall is
	 * a cost, estimated by what this carrier's expiries stall it */
	p->pc_late = due_at > 0 && due_at < now ? now - due_at : 0;
	p->refuse_since = 0; /* the run's refusals are over */
	if (si->si_code != SI_TIMER && p->pc_late > p->fire_late)
		p->pc_late = p->fire_late;
	/* the tick net's expiry rides the kernel tick: its lateness is the
	 * tick's period, not a stall of this carrier */
	if (tick)
		p->pc_late = 0;
out:
	errno = saved;
}

/* Called by the trampoline on the fiber's stack, all registers saved. */
static void preempt_yield_now(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	p->pend = 0;
	if (p->yield_hook)
		p->yield_hook(p->yield_arg);
	else
		(void)xtc__up.slice_yield(); /* the loop's: base_int.h */
}

void xtc__preempt_trampoline_yield(void)
{
	xtc__fiber_t *f = xtc__fiber_cur;
	xtc__ptls_t *p = &xtc__ptls;
	/* errno belongs to the fiber: the fibers that run meanwhile on this
	 * thread set their own */
	int saved_errno = errno;
	/* the fiber, not the thread, carries the guard: an xtc_fn function
	 * may resume on another thread (its caller's); a loop's fiber does
	 * not (invol: the loop keeps it on this carrier) */
	f->nopreempt++;
	f->invol = 1;
	p->st.preemptions++;
	/* named by a blocked report until it runs again (run_begin) */
	int k = p->n_preempted < 8 ? p->n_preempted++ : 7;
	p->preempted[k].fiber = f;
	p->preempted[k].owner_id = f->owner_id;
	size_t i = 0;
	for (; f->name != NULL && f->name[i] && i < sizeof p->preempted[k].name - 1;
	     i++)
		p->preempted[k].name[i] = f->name[i];
	p->preempted[k].name[i] = '\0';
	preempt_yield_now();
	f->invol = 0;
	f->nopreempt--;
	errno = saved_errno;
}

/* A fiber suspended by preemption runs again (or dies): unlist it. */
void xtc__preempted_resumes(const xtc__fiber_t *f)
{
	xtc__ptls_t *p = &xtc__ptls;
	for (int i = 0; i < p->n_preempted; i++)
		if (p->preempted[i].fiber == f) {
			p->preempted[i] = p->preempted[--p->n_preempted];
			return;
		}
}

#if defined(__aarch64__) && defined(__linux__)
/* aarch64 trampoline: yield, then make the frame copy fit the thread we
 * resume on (rt_sigreturn installs its mask and alternate stack). */
void xtc__preempt_trampoline_yield_frame(void *frame);
void xtc__preempt_trampoline_yield_frame(void *frame)
{
	xtc__preempt_trampoline_yield();
	ucontext_t *uc = (ucontext_t *)((char *)frame + sizeof(siginfo_t));
	stack_t ss;
	if (sigaltstack(NULL, &ss) == 0) {
		ss.ss_flags &= ~SS_ONSTACK;
		uc->uc_stack = ss;
	}
	sigset_t cur;
	if (pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0)
		uc->uc_sigmask = cur;
}
#endif

/* ------------------------------------------------------------------ */
/* Setup                                                                */
/* ------------------------------------------------------------------ */

int xtc__preempt_signo(void)
{
	return preempt_signo;
}

static int install_handler(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(preempt_signo, &sa, NULL) != 0)
		return XTC_E_INTERNAL;
	return XTC_OK;
}

/* fork child: the monitor did not survive, nor did the other threads. */
static void after_fork_child(void)
{
	pthread_mutex_init(&xtc__preempt_init_mu, NULL);
	xtc__monitor_after_fork();
	xtc__ptls.slot = NULL;
	xtc__ptls.fiber = NULL;
	xtc__ptls.pend = 0;
	xtc__ptls.ring = NULL; /* the parent's ring is not ours to use */
	xtc__ptls.ring_tail = NULL;
	xtc__ptls.ring_head = NULL;
	n_stat = 0;
	self_pid = getpid();
}

/* Once per process: signal, handler, save size, code map, monitor. Go may
 * have replaced the handler (signal.Ignore): re-checked at every arm. */
static int global_init(void)
{
	pthread_mutex_lock(&xtc__preempt_init_mu);
	int rc = XTC_OK;
	if (!atomic_load(&handler_installed)) {
		self_pid = getpid();
		pthread_atfork(NULL, NULL, after_fork_child);
		preempt_signo = requested_signo ? requested_signo : SIGRTMIN + 3;
		xsave_probe();
		if ((rc = xtc__preempt_map_build()) == XTC_OK && (rc = install_handler()) == XTC_OK)
			atomic_store(&handler_installed, 1);
	} else {
		struct sigaction old;
		if (sigaction(preempt_signo, NULL, &old) == 0 &&
		    (!(old.sa_flags & SA_SIGINFO) || old.sa_sigaction != handler))
			rc = install_handler();
	}
	pthread_mutex_unlock(&xtc__preempt_init_mu);
	if (rc == XTC_OK)
		rc = xtc__monitor_start();
	return rc;
}

int xtc_preempt_set_signal(int signo)
{
	if (signo < SIGRTMIN + 3 || signo > SIGRTMAX)
		return XTC_E_RANGE;
	pthread_mutex_lock(&xtc__preempt_init_mu);
	int rc = atomic_load(&handler_installed) ? XTC_E_AGAIN : XTC_OK;
	if (rc == XTC_OK)
		requested_signo = signo;
	pthread_mutex_unlock(&xtc__preempt_init_mu);
	return rc;
}

int xtc_preempt_signal(void)
{
	return preempt_signo ? preempt_signo :
	       (requested_signo ? requested_signo : SIGRTMIN + 3);
}

int xtc_preempt_supported(void)
{
#if defined(__linux__)
	return 1;
#else
	return 0;
#endif
}

static void stats_register(xtc__ptls_t *p)
{
	static __thread int registered XTC__PTLS;
	if (registered)
		return;
	pthread_mutex_lock(&xtc__preempt_init_mu);
	int i = 0;
	while (i < n_stat && stat_ptrs[i] != NULL)
		i++;
	if (i < MAX_STAT_THREADS) {
		stat_ptrs[i] = &p->st;
		if (i == n_stat)
			n_stat++;
		registered = 1;
	}
	pthread_mutex_unlock(&xtc__preempt_init_mu);
}

static void stats_add(xtc_preempt_stats_t *a, const xtc_preempt_stats_t *b)
{
	a->signals += b->signals;
	a->ticks += b->ticks;
	a->ring_ticks += b->ring_ticks;
	a->preemptions += b->preemptions;
	a->deferrals += b->deferrals;
	a->honoured += b->honoured;
	a->stale += b->stale;
	a->refused_gocb += b->refused_gocb;
	a->refused_ctx += b->refused_ctx;
	a->refused_nopreempt += b->refused_nopreempt;
	a->refused_stack += b->refused_stack;
	a->refused_pc += b->refused_pc;
	a->tick_nets += b->tick_nets;
	a->refused_lock += b->refused_lock;
	a->blocked_reports += b->blocked_reports;
	a->overhead_ns += b->overhead_ns;
	a->arm_ns += b->arm_ns;
	a->own_arms += b->own_arms;
	a->stretches += b->stretches;
	if (b->stretch_max > a->stretch_max)
		a->stretch_max = b->stretch_max;
}

static void thread_exit(void *arg)
{
	(void)arg;
	xtc__ptls_t *p = &xtc__ptls;
	xtc_preempt_disarm();
	xtc__tickring_thread_exit();
	pthread_mutex_lock(&xtc__preempt_init_mu);
	for (int i = 0; i < n_stat; i++) {
		if (stat_ptrs[i] == &p->st) {
			stats_add(&retired, &p->st);
			stat_ptrs[i] = NULL;
		}
	}
	pthread_mutex_unlock(&xtc__preempt_init_mu);
}

static void exit_key_init(void)
{
	pthread_key_create(&exit_key, thread_exit);
}

/* Make sure this thread's state is torn down when it exits. */
void xtc__preempt_thread_register(void)
{
	pthread_once(&exit_once, exit_key_init);
	if (pthread_getspecific(exit_key) == NULL)
		pthread_setspecific(exit_key, (void *)1);
	stats_register(&xtc__ptls);
}

int xtc__preempt_register(int64_t interval_ns)
{
	if (interval_ns <= 0)
		return XTC_E_INVAL;
	if (!xtc_preempt_supported())
		return XTC_E_NOSYS;
	if (interval_ns < XTC__PREEMPT_MIN_SLICE_NS)
		interval_ns = XTC__PREEMPT_MIN_SLICE_NS;
	int rc = global_init();
	if (rc != XTC_OK)
		return rc;
	/* A thread that asks to be preempted gets the signal even when it
	 * inherited a mask that blocks it (the sigwait-thread pattern blocks
	 * everything in main before creating threads): without this, ticks
	 * would pend forever and preemption be silently off. Only xtc's own
	 * real-time signal is touched; it is sent per thread (tgkill), so a
	 * sigwait thread never consumes it. */
	sigset_t ps;
	sigemptyset(&ps);
	sigaddset(&ps, preempt_signo);
	if (pthread_sigmask(SIG_UNBLOCK, &ps, NULL) != 0)
		return XTC_E_INTERNAL;
	if (xtc__fiber_thread_init() != 0) /* per-thread sigaltstack */
		return XTC_E_INTERNAL;
	xtc__ptls_t *p = &xtc__ptls;
	xtc__preempt_thread_register();
	if (p->slot == NULL) {
		p->slot = xtc__monitor_slot_get((int)syscall(SYS_gettid),
		                                interval_ns);
		if (p->slot == NULL)
			return XTC_E_RESOURCE;
	}
	atomic_store_explicit(&p->slot->slice_ns, interval_ns,
	                      memory_order_relaxed);
	return XTC_OK;
}

int xtc_preempt_arm(int64_t interval_ns)
{
	int rc = xtc__preempt_register(interval_ns);
	if (rc != XTC_OK)
		return rc;
	xtc__ptls_t *p = &xtc__ptls;
	/* periodic ticks come from the monitor, which does not watch a slot
	 * with a timer: drop the backstop deadline functions left (fn.c) */
	if (atomic_load(&p->slot->timer) == XTC__TIMER_MONO)
		xtc__ctimer_delete(p->slot);
	if (interval_ns < XTC__PREEMPT_MIN_SLICE_NS)
		interval_ns = XTC__PREEMPT_MIN_SLICE_NS;
	if (p->fiber == NULL) {
		atomic_fetch_add_explicit(&p->slot->gen, 1, memory_order_relaxed);
		int64_t d = xtc__deadline_after(now_ns(), interval_ns);
		atomic_store_explicit(&p->slot->soft, d, memory_order_relaxed);
		atomic_store_explicit(&p->slot->deadline, d, memory_order_release);
		xtc__monitor_kick(d);
	}
	return XTC_OK;
}

int xtc_preempt_disarm(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	if (p->slot == NULL)
		return XTC_OK;
	xtc__pslot_t *s = p->slot;
	p->slot = NULL; /* the handler ignores signals from here on */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	xtc__ctimer_delete(s);
	xtc__monitor_slot_put(s);
	p->pend = 0;
	return XTC_OK;
}

uint64_t xtc_preempt_ticks(void)
{
	return xtc__ptls.st.ticks;
}

int xtc_preempt_tick_pending(void)
{
	xtc__ptls_t *p = &xtc__ptls;
	if (p->pend & XTC__PF_TICK) {
		p->pend = 0;
		return 1;
	}
	if (xtc__tickring_due())
		return xtc__tickring_reap();
	return 0;
}

void xtc_preempt_set_involuntary(int on)
{
	if (on) {
		/* objects loaded since the last build become known */
		pthread_mutex_lock(&xtc__preempt_init_mu);
		if (atomic_load(&handler_installed))
			(void)xtc__preempt_map_build();
		pthread_mutex_unlock(&xtc__preempt_init_mu);
	}
	atomic_store(&involuntary_on, on ? 1 : 0);
}

int xtc__preempt_involuntary_on(void)
{
	return atomic_load_explicit(&involuntary_on, memory_order_relaxed);
}

int xtc_preempt_stats(xtc_preempt_stats_t *out)
{
	if (out == NULL)
		return XTC_E_INVAL;
	*out = xtc__ptls.st;
	return XTC_OK;
}

int xtc_preempt_stats_global(xtc_preempt_stats_t *out, uint64_t *signals_sent)
{
	if (out == NULL)
		return XTC_E_INVAL;
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&xtc__preempt_init_mu);
	stats_add(out, &retired);
	for (int i = 0; i < n_stat; i++)
		if (stat_ptrs[i])
			stats_add(out, stat_ptrs[i]);
	pthread_mutex_unlock(&xtc__preempt_init_mu);
	xtc__monitor_trigger_stats(out);
	out->cost_ns = (uint64_t)atomic_load(&xtc__preempt_cost_ewma);
	if (signals_sent)
		*signals_sent = xtc__monitor_signals_sent();
	return XTC_OK;
}

/* ------------------------------------------------------------------ */
/* No-preempt regions                                                   */
/* ------------------------------------------------------------------ */

static xtc__fiber_t *running_fiber(void)
{
	xtc__fiber_t *f = xtc__fiber_cur;
	return (f == NULL || f->is_root) ? NULL : f;
}

int xtc_preempt_disable(void)
{
	xtc__fiber_t *f = running_fiber();
	if (f == NULL)
		return XTC_E_INVAL;
	f->nopreempt++;
	return XTC_OK;
}

int xtc_preempt_enable(void)
{
	xtc__fiber_t *f = running_fiber();
	if (f == NULL || f->nopreempt <= 0)
		return XTC_E_INVAL;
	if (--f->nopreempt == 0 && (xtc__ptls.pend & XTC__PF_WANT) &&
	    xtc__gocb_depth == 0 &&
	    f == xtc__ptls.fiber) {
		xtc__ptls.st.honoured++;
		f->nopreempt++;
		preempt_yield_now();
		f->nopreempt--;
	}
	return XTC_OK;
}
