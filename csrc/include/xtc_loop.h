/*
 * xtc_loop.h - the single-thread event loop: tasks, wakers, timers, I/O.
 *
 * A loop is created, run and finalised by one thread. Other threads reach it
 * only through wakers, spawns, xtc_loop_wake and xtc_loop_stop.
 */
/* xtc.h first and outside the guard: it includes every module header
 * after its own base part, so any inclusion order is self-contained. */
#include "xtc.h"

#ifndef XTC_LOOP_H
#define XTC_LOOP_H

#include <stdint.h>

#include "xtc_io.h" /* XTC_IO_* interest bits, xtc_io_backend_name */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xtc_loop  xtc_loop_t;
typedef struct xtc_task  xtc_task_t;
typedef struct xtc_timer xtc_timer_t;
/* Scheduling class of a loop (xtc_exec_class_create, xtc_exec(3) and
 * xtc_sched(3)); NULL = the default lane. Declared once, here: procs,
 * executors, lane policies and batch groups all name it. */
typedef struct xtc_run_class *xtc_exec_class_t;
typedef int  (*xtc_task_fn)(xtc_task_t *self, void *user);
typedef void (*xtc_timer_fn)(void *user);

#define XTC_TASK_DONE    0 /* finished; the loop reaps it */
#define XTC_TASK_RESCHED 1 /* requeue at the back of the run queue */
#define XTC_TASK_PENDING 2 /* parked: runs again after a wake, timer or fd */

typedef struct xtc_waker {
	xtc_loop_t *loop;
	xtc_task_t *task;
} xtc_waker_t;

/* After xtc_loop_fini returned 0 the handle must not be used: a call on it
 * returns XTC_E_INVAL only until a later xtc_loop_init reuses its memory.
 * An executor's loops (xtc_exec_loop) are finalised and run by the
 * executor: xtc_loop_fini and xtc_loop_run refuse them (XTC_E_INVAL). */
XTC_API int xtc_loop_init(xtc_loop_t **out);
XTC_API int xtc_loop_fini(xtc_loop_t *loop);
XTC_API int xtc_loop_run(xtc_loop_t *loop);
XTC_API int xtc_loop_stop(xtc_loop_t *loop);
XTC_API int xtc_loop_wake(xtc_loop_t *loop);

/* Any thread. The task is READY at once and runs at a later step. A handle
 * given out (out_task != NULL) stays valid for the loop's lifetime; without
 * one the task is recycled after it finished. From a thread that does not
 * run the loop, XTC_E_AGAIN when 65536 cross-thread spawns are admitted on
 * it and not yet started (an admission ends at the task's first run, so
 * producers are paced by execution, not by the inbox drain). */
XTC_API int xtc_task_spawn(xtc_loop_t *loop, xtc_task_fn fn, void *user,
                           xtc_task_t **out_task);
XTC_API int xtc_task_waker(xtc_task_t *task, xtc_waker_t *out);
XTC_API int xtc_task_park_on_timer(xtc_task_t *self, int64_t delay_ns);
XTC_API int xtc_task_park_on_fd(xtc_task_t *self, int fd, uint32_t interest);
XTC_API int xtc_waker_wake(const xtc_waker_t *w);

XTC_API int xtc_timer_set(xtc_loop_t *loop, int64_t delay_ns, xtc_timer_fn fn,
                          void *user, xtc_timer_t **out_timer);
XTC_API int xtc_timer_cancel(xtc_timer_t *timer);

#ifdef __cplusplus
}
#endif

#endif
