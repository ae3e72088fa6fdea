/*
 * xtc_blocking.h - the blocking offload pool: run blocking C functions on a
 * fixed set of OS threads while the calling fiber parks.
 *
 * A fiber that must call something blocking (a synchronous read, a DNS
 * lookup, a C library without an async interface) hands it to the pool with
 * xtc_blocking_run: the fiber parks, its carrier keeps running other fibers,
 * and when a pool thread has run fn the fiber is woken through its loop's
 * inbox (also after it migrated to another executor carrier).
 *
 * Pool size: by default max(4, online CPUs) threads (capped at
 * XTC_BLOCKING_MAX_THREADS), started at the first run or submit and grown on
 * demand up to the cap when every thread is busy. xtc_blocking_pool_size(n)
 * fixes the size (no growth); only while the pool is not started.
 */
/* xtc.h first and outside the guard (see xtc_loop.h). */
#include "xtc.h"

#ifndef XTC_BLOCKING_H
#define XTC_BLOCKING_H

#ifdef __cplusplus
extern "C" {
#endif

#define XTC_BLOCKING_MAX_THREADS 64

/* Run fn(arg) on a pool thread and park the calling fiber until it returns;
 * *out_result (may be NULL) receives fn's return value. Called off a fiber
 * (plain thread, stackless task, carrier stack), inside a Go callback, or
 * when the pool cannot be started, fn runs synchronously on the calling
 * thread. A kill request for the calling proc is honoured at its next park
 * or yield after fn has returned, never while fn may still use the caller's
 * stack.
 *   0            fn has run
 *   XTC_E_INVAL  fn is NULL */
XTC_API int xtc_blocking_run(int (*fn)(void *), void *arg, int *out_result);

/* Fire and forget: queue fn(arg) for a pool thread and return at once. Any
 * thread; never parks. The caller owns arg (no completion is reported).
 *   XTC_E_INVAL  fn is NULL
 *   XTC_E_NOMEM  the job record could not be allocated
 *   XTC_E_AGAIN  no pool thread could be started (fn was not queued) */
XTC_API int xtc_blocking_submit(int (*fn)(void *), void *arg);

/* Fix the pool at nthreads threads (1..XTC_BLOCKING_MAX_THREADS) and turn
 * growth off. Only before the pool starts (first run/submit, or after
 * xtc_blocking_shutdown).
 *   XTC_E_RANGE  nthreads out of range
 *   XTC_E_INVAL  the pool is running */
XTC_API int xtc_blocking_pool_size(int nthreads);

/* Run every queued job, join the pool threads and return to the
 * not-started state (a later run or submit restarts it with the same size
 * setting). Idempotent; a no-op when called from a pool thread. */
XTC_API void xtc_blocking_shutdown(void);

/* Current number of pool threads (0 when not started). */
XTC_API int xtc_blocking_threads(void);

#ifdef __cplusplus
}
#endif

#endif
