/*
 * xtc_preempt.h - preemption: the per-thread tick seam, the cooperative
 * checks, the io_uring tick ring and the involuntary (signal) path.
 *
 * See xtc_preempt(3). In short: a thread (an executor carrier, or any thread
 * running fibers) arms a slice and publishes the deadline of the work it is
 * running; a real-time signal goes only to a thread whose current work
 * overran: an executor carrier's own CLOCK_MONOTONIC timer (left armed
 * while it expires in the last half of the running slice, so short runs
 * rarely move it), a producer that contends an overdue run, or, for the
 * 10 ms safety net and threads without a timer, a monitor thread. The
 * signal records a tick (cooperative path: xtc_yield_check reports due) and,
 * when the involuntary path is on and the interrupted point is safe,
 * redirects the fiber to a trampoline that saves the full register state and
 * yields. Idle threads receive nothing.
 */
#ifndef XTC_PREEMPT_H
#define XTC_PREEMPT_H

#include <stddef.h>
#include <stdint.h>

#include "xtc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The seam (seed 002 shape). */
XTC_API int      xtc_preempt_arm(int64_t interval_ns);
XTC_API int      xtc_preempt_disarm(void);
XTC_API int      xtc_preempt_supported(void);
XTC_API uint64_t xtc_preempt_ticks(void);
XTC_API int      xtc_preempt_tick_pending(void);

/* Process-wide involuntary path; off by default. */
XTC_API void xtc_preempt_set_involuntary(int on);
/* 1 where the involuntary redirect exists (Linux x86-64 and aarch64). */
XTC_API int  xtc_preempt_involuntary_supported(void);

/* io_uring tick ring for the calling thread: cooperative ticks with no
 * signal. XTC_E_INVAL for interval <= 0, XTC_E_NOSYS without io_uring. */
XTC_API int xtc_preempt_arm_ring(int64_t interval_ns);
XTC_API int xtc_preempt_disarm_ring(void);

/* No-preempt regions of the running fiber (nest). enable() at depth 0 is
 * XTC_E_INVAL; leaving the last level honours a deferred preemption by
 * yielding. Off a fiber both return XTC_E_INVAL. */
XTC_API int xtc_preempt_disable(void);
XTC_API int xtc_preempt_enable(void);

/* What may be preempted (xtc_preempt(3) SAFETY). By default a fiber is
 * interrupted only while its PC is in code declared preemptible and it
 * holds no lock: functions marked XTC_PREEMPTIBLE (the program's own
 * kernels: the compiler puts them in the section "xtc_ptext", found in
 * every loaded object), objects allowed by name, and ranges declared at
 * run time (JIT code). A preemption or a kill that arrives elsewhere is
 * deferred until the fiber is back in such code. Mark only code that does
 * not keep a library's thread-local state (an error queue, a handler set
 * for the next call) live across its own instructions: another fiber of
 * the carrier runs in between. */
#if defined(__clang__)
#define XTC_PREEMPTIBLE __attribute__((section("xtc_ptext"), noinline))
#elif defined(__GNUC__)
#define XTC_PREEMPTIBLE __attribute__((section("xtc_ptext"), noinline, noclone))
#else
#define XTC_PREEMPTIBLE
#endif
#define XTC_PREEMPT_SECTION "xtc_ptext"

/* Policies: DECLARED (default) as above; PROGRAM adds the executable's own
 * text (third-party code compiled into it is then protected only by lock
 * tracking); ANY is the earlier deny-list (every object except libc,
 * ld.so, the vDSO and the other system and sanitizer libraries). Any
 * thread, any time; the environment variable XTC_PREEMPT_POLICY
 * (declared, program, any) sets the initial one. XTC_E_INVAL otherwise. */
#define XTC_PREEMPT_POLICY_DECLARED 0
#define XTC_PREEMPT_POLICY_PROGRAM  1
#define XTC_PREEMPT_POLICY_ANY      2
XTC_API int xtc_preempt_set_policy(int policy);
XTC_API int xtc_preempt_get_policy(void);
/* A loaded object whose code is safe to preempt anywhere, by the prefix of
 * its file's base name ("libz.so"); applies to objects loaded later too.
 * XTC_E_INVAL for NULL or "", XTC_E_RESOURCE past XTC_PREEMPT_MAX_OBJECTS. */
#define XTC_PREEMPT_MAX_OBJECTS 16
XTC_API int xtc_preempt_allow_object(const char *name);
/* A code range [lo, hi) safe to preempt: JIT code, anonymous executable
 * memory. At most XTC_PREEMPT_MAX_DECLARED (XTC_E_RESOURCE); XTC_E_INVAL
 * for NULL or an empty range; undeclare: XTC_E_NOTFOUND if not declared. */
#define XTC_PREEMPT_MAX_DECLARED 64
XTC_API int xtc_preempt_declare_preemptible(const void *lo, const void *hi);
XTC_API int xtc_preempt_undeclare_preemptible(const void *lo, const void *hi);
/* 1 if a fiber whose PC is pc may be preempted there under the current
 * policy (locks and no-preempt regions aside), 0 if not. */
XTC_API int xtc_preempt_preemptible(const void *pc);

/* Code the involuntary path must never interrupt (e.g. code that takes an
 * OS-level lock). [lo, hi) is a PC range. At most XTC_PREEMPT_MAX_UNSAFE
 * ranges; XTC_E_RESOURCE beyond. */
#define XTC_PREEMPT_MAX_UNSAFE 64
XTC_API int xtc_preempt_declare_unsafe(const void *lo, const void *hi);
XTC_API int xtc_preempt_undeclare_unsafe(const void *lo, const void *hi);

/* The real-time signal used (default SIGRTMIN+3). Only before the first
 * arm; XTC_E_AGAIN afterwards, XTC_E_RANGE below SIGRTMIN+3. */
XTC_API int xtc_preempt_set_signal(int signo);
XTC_API int xtc_preempt_signal(void);

typedef struct xtc_preempt_stats {
	uint64_t signals;     /* preemption signals received (valid ones) */
	uint64_t ticks;       /* ticks observed (signal + ring) */
	uint64_t ring_ticks;  /* ticks that came from the tick ring */
	uint64_t preemptions; /* involuntary yields performed */
	uint64_t deferrals;   /* signals that found an unsafe point */
	uint64_t honoured;    /* deferred preemptions later taken at a boundary */
	uint64_t stale;       /* signals for a run that had already ended */
	uint64_t refused_gocb;/* deferrals because a Go callback was active */
	/* trigger (global counters, filled by xtc_preempt_stats_global) */
	uint64_t timer_fires; /* carrier timer expiries that found the run due */
	uint64_t timer_early; /* expiries before the current run's deadline */
	uint64_t timer_arms;  /* carrier timer (re)arms (timer_settime calls) */
	uint64_t direct;      /* producers that signalled an overdue run */
	uint64_t timer_fallbacks; /* carriers without a timer (monitor path) */
	uint64_t cost_ns;     /* measured cost of one preemption (EWMA) */
	/* deferrals by reason (the rest: a Go callback, refused_gocb) */
	uint64_t refused_ctx;       /* the carrier was in its own scheduler
	                               code, not in the run's fiber */
	uint64_t refused_nopreempt; /* a no-preempt region */
	uint64_t refused_stack;     /* stack pointer outside the fiber's stack
	                               or without headroom */
	uint64_t refused_pc;        /* code not declared preemptible (the
	                               policy), the runtime, an unsafe range */
	/* overhead budget (xtc_preempt_set_budget) */
	uint64_t overhead_ns; /* carrier time preemption cost: expiries and
	                         signal delivery up to the next run (what the
	                         budget weighs) */
	uint64_t arm_ns;      /* carrier time in its own timer (re)arms */
	uint64_t own_arms;    /* those (re)arms (timer_arms counts producers'
	                         too) */
	uint64_t stretches;   /* budget windows that lengthened the slice */
	uint64_t stretch_max; /* largest slice multiplier reached (0: none) */
	/* tick net: expiries of a carrier's CPU-clock timer that found its
	 * run overdue (the safety net behind producers' polls) */
	uint64_t tick_nets;
	/* safety (xtc_preempt(3) SAFETY) */
	uint64_t refused_lock;    /* deferrals: the fiber held a lock */
	uint64_t blocked_reports; /* runs reported for refusing preemption
	                             for XTC_PREEMPT_BLOCKED_NS (a blocked
	                             carrier, or long code not declared
	                             preemptible) */
} xtc_preempt_stats_t;

/* A run that refused preemption this long is reported (once per run). */
#define XTC_PREEMPT_BLOCKED_NS 1000000000

/* Overhead budget: a carrier busy at least 90% of a window of
 * XTC_PREEMPT_BUDGET_WINDOW_NS on which preemption (timer expiries, signal
 * stalls, the switch to the next run) cost more than `percent` of it
 * doubles the slice it applies, as often as the overrun calls for (up to
 * 64x; a window that spent a whole window's budget closes early), and
 * halves it back one step a window once it would stay busy less than 75%
 * with that cost doubled, or the cost falls below a quarter of the
 * budget. 0 turns the budget off
 * (slices are applied as set, whatever they cost); default 20. Process-
 * wide, any thread, any time. XTC_E_INVAL outside 0..100. */
#define XTC_PREEMPT_BUDGET_DEFAULT 20
#define XTC_PREEMPT_BUDGET_WINDOW_NS 10000000
XTC_API int xtc_preempt_set_budget(int percent);
XTC_API int xtc_preempt_get_budget(void);

/* Calling thread's counters (since its first arm). */
XTC_API int xtc_preempt_stats(xtc_preempt_stats_t *out);
/* Sum over every thread that ever armed, plus the monitor's signal count
 * in signals_sent. */
XTC_API int xtc_preempt_stats_global(xtc_preempt_stats_t *out,
                                     uint64_t *signals_sent);

#ifdef __cplusplus
}
#endif

#endif
