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
/* Why the most recent stack allocation of this process failed with
 * XTC_E_NOMEM, naming the limit it hit (vm.max_map_count, RLIMIT_AS, the
 * commit limit of vm.overcommit_memory=2, or memory itself), or NULL if
 * none failed. A process-wide diagnostic, not an error channel: a spawn
 * reports XTC_E_NOMEM by its return value, this says which limit. */
XTC_API const char *xtc_stack_nomem_reason(void);

/* Stack reclaim (process-wide, off by default): while enabled, a fiber
 * that parks (not a plain yield) gives the pages of its stack below its
 * stack pointer minus keep_bytes (0 = one page; page-rounded) back to the
 * kernel, when that is more than a page; count: parks that did. enable:
 * 0, or XTC_E_RANGE above 1 GiB. */
XTC_API int      xtc_stack_reclaim_enable(size_t keep_bytes);
XTC_API void     xtc_stack_reclaim_disable(void);
XTC_API int      xtc_stack_reclaim_enabled(void);
XTC_API uint64_t xtc_stack_reclaim_count(void);

XTC_API void     xtc_yield_set_budget(xtc_loop_t *loop, int64_t budget_ns);
XTC_API int      xtc_yield_check(void);
XTC_API int      xtc_yield_if_due(void);
XTC_API uint64_t xtc_yield_due_count(const xtc_loop_t *loop);

#ifdef __cplusplus
}
#endif

/* Protothreads: stackless coroutines in one function, for a task body or
 * any code called repeatedly (libxtc's XTC_PT_*). The function resumes
 * where it last yielded; its locals do not survive a yield (keep state in
 * a struct or a static). XTC_PT_THREAD(name(args)) declares it (it returns
 * char); XTC_PT_YIELD returns XTC_PT_YIELDED, XTC_PT_WAIT_UNTIL returns it
 * until the condition holds, XTC_PT_END returns XTC_PT_DONE and rewinds.
 * One XTC_PT_YIELD or XTC_PT_WAIT_UNTIL per source line (the line is the
 * resume point), and none inside a switch statement of the body. */
typedef struct xtc_pt {
	unsigned short lc; /* resume point: 0 = start, else a line number */
} xtc_pt_t;

#define XTC_PT_YIELDED 0
#define XTC_PT_DONE    2

#if defined(__GNUC__) && __GNUC__ >= 7
#define XTC__PT_FALLTHROUGH __attribute__((fallthrough))
#else
#define XTC__PT_FALLTHROUGH ((void)0)
#endif

#define XTC_PT_THREAD(...)  char __VA_ARGS__
#define XTC_PT_INIT(pt)     ((pt)->lc = 0)
#define XTC_PT_BEGIN(pt)    switch ((pt)->lc) { case 0:
#define XTC_PT_END(pt)      } (pt)->lc = 0; return XTC_PT_DONE
#define XTC_PT_YIELD(pt)                                                   \
	do {                                                               \
		(pt)->lc = (unsigned short)__LINE__;                      \
		return XTC_PT_YIELDED;                                     \
	case __LINE__:;                                                    \
	} while (0)
#define XTC_PT_WAIT_UNTIL(pt, cond)                                        \
	do {                                                               \
		(pt)->lc = (unsigned short)__LINE__;                      \
		XTC__PT_FALLTHROUGH;                                       \
	case __LINE__:                                                     \
		if (!(cond))                                               \
			return XTC_PT_YIELDED;                             \
	} while (0)

#endif
