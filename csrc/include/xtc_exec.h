/*
 * xtc_exec.h - the multi-loop executor, proportional-share scheduling
 * classes and the stall watchdog.
 *
 * An executor owns n loops and, while xtc_exec_run is active, one C-created
 * carrier thread per loop. Other threads reach a loop only through its MPSC
 * inbox (spawns, wakes, messages, submissions); an idle carrier spins
 * briefly, then parks in its own poller and is woken through it.
 */
#ifndef XTC_EXEC_H
#define XTC_EXEC_H

#include <stdint.h>

#include "xtc.h"
#include "xtc_loop.h"
#include "xtc_async.h"
#include "xtc_sched.h" /* the stall watchdog, class statistics */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xtc_exec xtc_exec_t;
/* xtc_exec_class_t: xtc_loop.h */

typedef struct xtc_loop_stats {
	uint64_t tasks_run; /* dispatches (task runs and proc resumes) */
	uint64_t steals;    /* tasks this loop took from a peer's deque */
	uint64_t demotions; /* preempted tasks moved to the demoted level */
	uint64_t aged;      /* demoted tasks served first because they aged */
	/* the carrier's parks (it blocked with nothing to do), the wake-ups a
	 * producer rang and their summed latency (ring to running again),
	 * those that came XTC_EXEC_SLOW_WAKE_NS or more after the ring (the
	 * machine, not the scheduler: an idle vCPU the hypervisor was slow
	 * to resume) and the latest one */
	uint64_t parks;
	uint64_t wakes;
	int64_t  wake_ns;
	uint64_t slow_wakes;
	int64_t  wake_max_ns;
} xtc_loop_stats_t;

#define XTC_EXEC_SLOW_WAKE_NS 1000000

/* Lifecycle and access. */
XTC_API int  xtc_exec_init(xtc_exec_t **out, int n_loops); /* <= 0: CPUs */
XTC_API int  xtc_exec_fini(xtc_exec_t *exec);
XTC_API int  xtc_exec_run(xtc_exec_t *exec);
/* Kept until a run returns: a stop before or during the start of a run
 * ends it (never lost); one with no run in progress ends the next. */
XTC_API int  xtc_exec_stop(xtc_exec_t *exec);
XTC_API int  xtc_exec_n_loops(xtc_exec_t *exec);
XTC_API xtc_loop_t *xtc_exec_loop(xtc_exec_t *exec, int idx);
XTC_API int  xtc_exec_loop_stats(xtc_exec_t *exec, int idx,
                                 xtc_loop_stats_t *out);
XTC_API int  xtc_exec_loop_id(void);
XTC_API int  xtc_shard_id(void);
XTC_API int  xtc_shard_count(void);

/* Spawning: any thread, before or during run. _on pins to loop_idx. */
XTC_API int xtc_exec_spawn(xtc_exec_t *exec, xtc_task_fn fn, void *user,
                           xtc_task_t **out_task);
XTC_API int xtc_exec_spawn_on(xtc_exec_t *exec, int loop_idx, xtc_task_fn fn,
                              void *user, xtc_task_t **out_task);
XTC_API int xtc_exec_async(xtc_exec_t *exec, xtc_coro_fn fn, void *arg,
                           xtc_task_t **out_task);
XTC_API int xtc_exec_async_on(xtc_exec_t *exec, int loop_idx, xtc_coro_fn fn,
                              void *arg, xtc_task_t **out_task);

/* Cross-thread submission of a plain callback, run once on the carrier's
 * own stack (never a fiber stack). Bounded: each loop's submission ring
 * holds XTC_EXEC_SUBMIT_CAP entries; when it is full, xtc_exec_submit
 * returns XTC_E_AGAIN at once and xtc_exec_submit_wait blocks (spinning,
 * then sleeping) until there is room or timeout_ns passes (< 0 forever).
 * loop_idx < 0 picks a loop round-robin. Memory stays bounded whatever the
 * producer rate. */
#define XTC_EXEC_SUBMIT_CAP 4096
typedef void (*xtc_exec_fn)(void *arg);
XTC_API int xtc_exec_submit(xtc_exec_t *exec, int loop_idx, xtc_exec_fn fn,
                            void *arg);
XTC_API int xtc_exec_submit_wait(xtc_exec_t *exec, int loop_idx,
                                 xtc_exec_fn fn, void *arg,
                                 int64_t timeout_ns);

/* Policy knobs: one atomic field each, any thread, any time. NULL exec:
 * setters do nothing, getters return 0. */
XTC_API void xtc_exec_set_service_mode(xtc_exec_t *exec, int on);
XTC_API int  xtc_exec_get_service_mode(xtc_exec_t *exec);
/* Spin before parking: an idle carrier polls its inputs for up to ns
 * (counted from when it ran out of work) before it blocks, on top of the
 * adaptive spin; 0 (the default) keeps the adaptive spin only. Trades a
 * CPU per idle carrier for the wake-up: 0 or XTC_E_INVAL. */
XTC_API int     xtc_exec_set_spin(xtc_exec_t *exec, int64_t ns);
XTC_API int64_t xtc_exec_get_spin(xtc_exec_t *exec);
XTC_API void xtc_exec_set_eager_rebalance(xtc_exec_t *exec, int on);
XTC_API int  xtc_exec_get_eager_rebalance(xtc_exec_t *exec);
XTC_API void xtc_exec_set_steal_backoff(xtc_exec_t *exec, int on);
XTC_API int  xtc_exec_get_steal_backoff(xtc_exec_t *exec);
/* Preemption slice for every carrier; set before xtc_exec_run. 0 = off,
 * negative clamps to 0. XTC_E_INVAL for NULL, XTC_E_NOSYS when the build
 * has no tick source (the value is kept). See xtc_preempt(3). */
XTC_API int  xtc_exec_set_preempt(xtc_exec_t *exec, int64_t interval_ns);
/* Clock-checked slices: with on, the slice is enforced at preemption
 * points (xtc_yield_if_due, xtc_yield_check, a plain xtc_yield after a
 * slice), which compare the clock with the run's slice end; a slice end
 * still demotes (xtc_preempt(3)). No timer, no signal, no monitor: nothing
 * interrupts a carrier, so code without such points is never cut, unless
 * the involuntary path is on (xtc_preempt_set_involuntary): then the
 * signal trigger stays as a backstop at 8 times the slice. For code that
 * has the points where an interrupt is expensive (a virtual machine: tens
 * of us each). Set before xtc_exec_run: XTC_E_AGAIN while it runs;
 * XTC_E_INVAL for NULL. The getter returns 0 for NULL. */
XTC_API int  xtc_exec_set_preempt_coop(xtc_exec_t *exec, int on);
XTC_API int  xtc_exec_get_preempt_coop(xtc_exec_t *exec);

/* Scheduling classes (per loop, at most XTC_LOOP_MAX_CLASSES). */
#define XTC_LOOP_MAX_CLASSES     16
#define XTC_DEFAULT_CLASS_SHARES 100
#define XTC_VRUNTIME_MIN_QUANTUM_NS 1000
XTC_API int      xtc_exec_class_create(xtc_loop_t *loop, int shares,
                                       int64_t latency_ns,
                                       xtc_exec_class_t *out);
XTC_API int      xtc_exec_class_shares(xtc_exec_class_t cls);
XTC_API int64_t  xtc_exec_class_latency(xtc_exec_class_t cls);
XTC_API uint64_t xtc_exec_class_runs(xtc_exec_class_t cls);
XTC_API uint64_t xtc_exec_class_vruntime(xtc_exec_class_t cls);
/* Measured CPU charged to the class so far (ns, before weighting). */
XTC_API uint64_t xtc_exec_class_cpu_ns(xtc_exec_class_t cls);

/* Executor-wide class: one class per loop, same shares and bound, into
 * out[0..n_loops-1] (out[i] is loop i's). Before the run, as
 * xtc_exec_class_create. XTC_E_INVAL: NULL exec/out, n < number of loops,
 * shares outside 1..1000, latency_ns < 0, or an executor that runs;
 * XTC_E_AGAIN: a loop already has 16 classes. */
XTC_API int      xtc_exec_class_create_each(xtc_exec_t *exec, int shares,
                                            int64_t latency_ns,
                                            xtc_exec_class_t *out, int n);

/* For Go callers (xtc.CFunc): XTC_GO_FUNC(name), at file scope after the
 * definition of name, defines
 *     static inline void *name_cfunc(void)
 * returning name's address, once the compiler checked that name is
 * intptr_t name(void *arg), the shape the Go executor calls (Exec.Call,
 * Exec.Go, Dispatch): another shape fails the build with a message that
 * names the function. A getter is needed anyway for a static function
 * (cgo cannot take its address); this one is typed. */
#define XTC_GO_FUNC(name)                                                   \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&(name)),     \
	    intptr_t (*)(void *)),                                           \
	    "xtc: " #name " must be intptr_t " #name "(void *arg)");         \
	static inline void *name##_cfunc(void) { return (void *)(name); }

/* Stall watchdog: the per-loop functions and xtc_stall_info_t are in
 * xtc_sched.h (included above); this arms every loop of the executor. */
XTC_API void     xtc_exec_set_stall_budget(xtc_exec_t *exec,
                                           int64_t budget_ns);

#ifdef __cplusplus
}
#endif

#endif
