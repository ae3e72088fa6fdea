/*
 * xtc_dispatch.h - run a function on a fresh fiber from any thread and get
 * its result as a future (libxtc's header of the same name).
 *
 * The bridge from a callback or a foreign thread onto a loop: the fiber
 * runs fn(arg), and the future (xtc_future.h) completes exactly once, with
 * fn's return value, or with XTC_E_ABORTED when the dispatch was cancelled
 * before fn started or the fiber was released unfinished (loop finalised).
 */
/* xtc.h first and outside the guard (see xtc_loop.h). */
#include "xtc.h"

#ifndef XTC_DISPATCH_H
#define XTC_DISPATCH_H

#include "xtc_loop.h"
#include "xtc_future.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xtc_dispatch_handle xtc_dispatch_handle_t;

/* out_future must not be NULL; out_handle may be NULL. From another
 * thread the spawn itself is posted to the loop (the fiber's stack then
 * comes from the carrier's cache), so a spawn failure there (XTC_E_NOMEM,
 * XTC_E_RESOURCE) completes the future with that status instead.
 * XTC_E_INVAL: NULL loop/fn/out_future, finalised loop; XTC_E_NOMEM;
 * XTC_E_AGAIN: from another thread, 65536 cross-thread spawns and
 * dispatches admitted on loop and not yet started (paced by execution);
 * XTC_E_RESOURCE: the loop's task cap (on the loop's own thread). */
XTC_API int  xtc_dispatch(xtc_loop_t *loop, int (*fn)(void *), void *arg,
                          xtc_future_t **out_future,
                          xtc_dispatch_handle_t **out_handle);
/* Cooperative cancel; any thread; consumes the handle. If fn has not
 * started it never runs and the future completes with XTC_E_ABORTED; if it
 * is running, xtc_dispatch_cancelled() (and xtc_cancel_requested()) turn 1
 * inside it and the future completes with XTC_E_ABORTED (value = fn's
 * return) when it returns; after completion it changes nothing. 0, or
 * XTC_E_INVAL for NULL. */
XTC_API int  xtc_dispatch_cancel(xtc_dispatch_handle_t *h);
/* Consume the handle without cancelling. NULL is a no-op. */
XTC_API void xtc_dispatch_handle_free(xtc_dispatch_handle_t *h);
/* 1 inside a dispatched fn whose handle was cancelled, else 0. */
XTC_API int  xtc_dispatch_cancelled(void);

#ifdef __cplusplus
}
#endif

#endif
