/*
 * xtc.h - umbrella header of the xtc fiber runtime: error codes, version,
 * clocks and allocation helpers, plus every module header.
 *
 * Conventions shared by every header:
 *  - functions return int: 0 (XTC_OK) or a negative XTC_E_* code. The
 *    exceptions keep libxtc's void shape: the setters of a flag or budget
 *    that cannot fail on a valid handle and are no-ops on an invalid one
 *    (xtc_yield_set_budget, xtc_exec_set_service_mode,
 *    xtc_exec_set_eager_rebalance, xtc_exec_set_steal_backoff,
 *    xtc_loop_set_stall_budget, xtc_loop_set_stall_cb,
 *    xtc_exec_set_stall_budget, xtc_preempt_set_involuntary), the
 *    simulator's controls (xtc_sim.h), and getters that return the value;
 *  - durations are int64_t nanoseconds; a timeout < 0 waits forever, 0 polls,
 *    > 0 bounds the wait and expires with XTC_E_AGAIN;
 *  - options structs are zero-initialised for defaults.
 */
#ifndef XTC_H
#define XTC_H

#include <stddef.h>
#include <stdint.h>

#include "xtc_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define XTC_API __attribute__((visibility("default")))
#else
#define XTC_API
#endif

#define XTC_VERSION_MAJOR 0
#define XTC_VERSION_MINOR 1
#define XTC_VERSION_PATCH 0
#define XTC_VERSION_STRING "0.1.0"

#define XTC__ERR_ENUM(name, val, text) XTC_E_##name = (val),
typedef enum xtc_err {
	XTC_ERRORS(XTC__ERR_ENUM)
} xtc_err_t;
#undef XTC__ERR_ENUM
/* XTC_OK is spelled without the E_ prefix, as in libxtc. */
#define XTC_OK XTC_E_OK

XTC_API const char *xtc_version_string(void);
XTC_API int         xtc_version_components(int *major, int *minor, int *patch);
XTC_API const char *xtc_strerror(int xtc_err);

XTC_API void *xtc_malloc(size_t size);
XTC_API void *xtc_calloc(size_t n, size_t size);
XTC_API void *xtc_realloc(void *p, size_t size);
XTC_API void  xtc_free(void *p);
XTC_API void *xtc_aligned_alloc(size_t align, size_t size);
XTC_API void  xtc_aligned_free(void *p);

XTC_API int64_t xtc_clock_mono(void);
XTC_API int64_t xtc_clock_real(void);
XTC_API int     xtc_sleep_ns(int64_t ns);

XTC_API int64_t xtc_atomic_i64_load(const int64_t *p);
XTC_API int64_t xtc_atomic_i64_add(int64_t *p, int64_t delta);

#ifdef __cplusplus
}
#endif

#include "xtc_io.h"
#include "xtc_loop.h"
#include "xtc_async.h"
#include "xtc_proc.h"
#include "xtc_exec.h"
#include "xtc_sched.h"
#include "xtc_preempt.h"
#include "xtc_fn.h"
#include "xtc_blocking.h"
#include "xtc_future.h"
#include "xtc_dispatch.h"
#include "xtc_launch.h"
#include "xtc_osproc.h"
#include "xtc_sim.h"
#include "xtc_batch.h"

#endif
