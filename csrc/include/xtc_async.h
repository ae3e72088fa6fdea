/*
 * xtc_async.h - stackful coroutines, yield, stack size and the cooperative
 * yield budget.
 */
/* xtc.h first and outside the guard: it includes every module header
 * after its own base part, so any inclusion order is self-contained. */
#include "xtc.h"

#ifndef XTC_ASYNC_H
#define XTC_ASYNC_H

#include <stddef.h>
#include <stdint.h>

#include "xtc_loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef intptr_t (*xtc_coro_fn)(void *arg);

/* Any thread; fn starts at a later step of loop. Errors as xtc_task_spawn
 * (XTC_E_AGAIN: cross-thread backlog full), plus XTC_E_NOMEM/XTC_E_RANGE
 * for the stack. A cross-thread spawn maps its stack when it first runs; if
 * that fails the coroutine finishes unrun with the error as its result. */
XTC_API int  xtc_async(xtc_loop_t *loop, xtc_coro_fn fn, void *arg,
                       xtc_task_t **out_task);
XTC_API int  xtc_await(xtc_task_t *t, intptr_t *result);
XTC_API void xtc_yield(void);
/* Like xtc_yield, but reports why it could not yield: XTC_E_INVAL off a
 * fiber, XTC_E_DEADLK inside a Go callback or a no-switch region. */
XTC_API int  xtc_yield_ex(void);

XTC_API size_t xtc_stack_size(void);             /* default 64 KiB */
XTC_API int    xtc_set_stack_size(size_t bytes); /* >= 16 KiB, page-rounded */
/* Warm stacks: reserve maps n stacks of the current default size into the
 * process-wide pool (and touches their top pages), so the first n spawns of
 * any loop or executor map nothing; they stay pooled until trimmed.
 * 0, XTC_E_RANGE (n > 65536), XTC_E_NOMEM (mapped as many as it could).
 * count: stacks in the pool now; trim: unmaps them, returns how many. */
XTC_API int    xtc_stack_reserve(size_t n);
XTC_API size_t xtc_stack_pool_count(void);
XTC_API size_t xtc_stack_pool_trim(void);

XTC_API void     xtc_yield_set_budget(xtc_loop_t *loop, int64_t budget_ns);
XTC_API int      xtc_yield_check(void);
XTC_API int      xtc_yield_if_due(void);
XTC_API uint64_t xtc_yield_due_count(const xtc_loop_t *loop);

#ifdef __cplusplus
}
#endif

#endif
