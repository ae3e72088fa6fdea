/*
 * xtc_fn.h - deadline-preemptible functions (LibPreemptible's
 * fn_launch / fn_resume / fn_completed) and the adaptive quantum controller.
 *
 * xtc_fn_launch runs a function on a pooled context until it returns or its
 * time slice ends; either way control comes back to the caller, which
 * decides what to run next (xtc_fn_resume continues a preempted function
 * exactly where it was). The state lives in caller memory (xtc_fn_t,
 * zero-initialised); the context (stack and saved registers) is taken from a
 * per-thread pool at launch and returned to it on completion.
 *
 * The slice is enforced by the preemption monitor and the involuntary path
 * (xtc_preempt(3)), always on for functions run this way, whatever
 * xtc_preempt_set_involuntary says. See xtc_fn(3).
 */
#ifndef XTC_FN_H
#define XTC_FN_H

#include <stddef.h>
#include <stdint.h>

#include "xtc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef intptr_t (*xtc_fn_entry)(void *arg);

enum {
	XTC_FN_IDLE = 0,      /* never launched, or reset */
	XTC_FN_PREEMPTED = 1, /* slice ended; resume or cancel it */
	XTC_FN_RUNNING = 2,   /* executing (seen only from inside) */
	XTC_FN_DONE = 3       /* returned; result valid */
};

typedef struct xtc_fn {
	void    *ctx;          /* private: pooled context while not done */
	intptr_t result;       /* return value once XTC_FN_DONE */
	int      state;        /* XTC_FN_* */
	uint32_t preemptions;  /* slices that ended before completion */
	int64_t  run_ns;       /* time spent running so far */
} xtc_fn_t;

/* Start fn(arg) now on a pooled context; returns when it completes
 * (XTC_OK, fn->result set) or when slice_ns has elapsed (XTC_E_AGAIN, state
 * XTC_FN_PREEMPTED). XTC_E_INVAL: NULL fn/entry, slice_ns <= 0, or fn
 * already launched and not done/reset. XTC_E_DEADLK inside a Go callback
 * or from inside the same function. XTC_E_NOMEM. XTC_E_NOSYS where the
 * involuntary path does not exist (the function would run to completion). */
XTC_API int xtc_fn_launch(xtc_fn_t *fn, xtc_fn_entry entry, void *arg,
                          int64_t slice_ns);
/* Continue a preempted function for another slice; same results.
 * XTC_E_INVAL unless fn is XTC_FN_PREEMPTED. May be called from another
 * thread than the one that launched it (not concurrently). */
XTC_API int xtc_fn_resume(xtc_fn_t *fn, int64_t slice_ns);
/* 1 if fn completed (its result is valid), else 0 (also for NULL). */
XTC_API int xtc_fn_completed(const xtc_fn_t *fn);
/* Abandon a preempted function: its context goes back to the pool without
 * running further (no unwinding: it must hold no locks or heap it alone
 * frees). The state becomes XTC_FN_IDLE. XTC_E_INVAL unless preempted. */
XTC_API int xtc_fn_cancel(xtc_fn_t *fn);
/* From inside a running function: end the slice now (cooperative).
 * XTC_E_INVAL when not inside an xtc_fn function. */
XTC_API int xtc_fn_yield(void);
/* Drop the calling thread's pooled contexts (returns how many). */
XTC_API int xtc_fn_pool_trim(void);

/* ---- adaptive quantum (LibPreemptible, Algorithm 1) -------------------- */

typedef struct xtc_fn_quantum_opts {
	int64_t  min_ns;       /* default 5 us */
	int64_t  max_ns;       /* default 1 ms */
	int64_t  initial_ns;   /* default 100 us */
	int64_t  period_ns;    /* between automatic updates; default 10 s */
	double   load_high;    /* default 0.9 of capacity */
	double   load_low;     /* default 0.1 */
	double   alpha_heavy;  /* tail index below which the tail is heavy; 2 */
	unsigned window;       /* service-time samples kept; default 4096 */
	int      workers;      /* capacity in carriers for the load; default 1 */
} xtc_fn_quantum_opts_t;

typedef struct xtc_fn_quantum xtc_fn_quantum_t;

XTC_API int  xtc_fn_quantum_create(const xtc_fn_quantum_opts_t *opts,
                                   xtc_fn_quantum_t **out);
XTC_API void xtc_fn_quantum_destroy(xtc_fn_quantum_t *q);
/* Any thread: one completed request's service time, and busy time (ns of
 * CPU spent serving) for the load estimate. */
XTC_API int  xtc_fn_quantum_record(xtc_fn_quantum_t *q, int64_t service_ns);
XTC_API int  xtc_fn_quantum_add_busy(xtc_fn_quantum_t *q, int64_t busy_ns);
/* Use this load (fraction of capacity, e.g. offered QPS / max QPS) at the
 * next updates instead of the busy-time measurement; < 0 goes back to
 * measuring. XTC_E_INVAL for NULL, NaN or an infinity. */
XTC_API int  xtc_fn_quantum_set_load(xtc_fn_quantum_t *q, double load);
/* Run the controller now over the samples since the last update; returns
 * the new quantum (ns) or a negative XTC_E_* code. */
XTC_API int64_t xtc_fn_quantum_update(xtc_fn_quantum_t *q);
XTC_API int64_t xtc_fn_quantum_get(const xtc_fn_quantum_t *q);
/* Last computed inputs: Hill tail index (0 when unknown) and load (0..). */
XTC_API double  xtc_fn_quantum_tail_index(const xtc_fn_quantum_t *q);
XTC_API double  xtc_fn_quantum_load(const xtc_fn_quantum_t *q);

/* The controller's recent updates, oldest first (at most
 * XTC_FN_QUANTUM_TRAJ are kept): copies up to max into out and returns
 * how many, or XTC_E_INVAL (NULL q, max < 0, NULL out with max > 0). */
#define XTC_FN_QUANTUM_TRAJ 256
typedef struct xtc_fn_quantum_point {
	int64_t  at_ns;       /* CLOCK_MONOTONIC time of the update */
	int64_t  quantum_ns;  /* the quantum it chose */
	int64_t  floor_ns;    /* max(min_ns, 4 x measured preemption cost) */
	double   load;        /* load it saw */
	double   tail_index;  /* Hill alpha of the services (0: too few) */
	uint64_t samples;     /* services in the period */
} xtc_fn_quantum_point_t;
XTC_API int xtc_fn_quantum_trajectory(const xtc_fn_quantum_t *q,
                                      xtc_fn_quantum_point_t *out, int max);

/* Let q drive the slice of every carrier (process-wide: the last call wins;
 * the executor's preemption must be on, xtc_exec_set_preempt): each task's
 * whole service time (its runs until it finishes or parks) and the
 * carriers' idle time are recorded, and the monitor thread runs the
 * controller every period. NULL q turns it off. XTC_E_INVAL for a NULL
 * exec. exec is only checked for NULL: there is one controller and one
 * adaptive slice for the process, not one per executor, so the argument
 * names no state (it keeps the call's shape for a per-executor
 * controller later). */
struct xtc_exec;
XTC_API int xtc_exec_set_preempt_adaptive(struct xtc_exec *exec,
                                          xtc_fn_quantum_t *q);

#ifdef __cplusplus
}
#endif

#endif
