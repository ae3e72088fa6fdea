/*
 * xtc_future.h - futures and promises, combinators, dispatch onto a fiber,
 * and completion queues (the bridge to event loops that are not xtc's, such
 * as Go's netpoller).
 *
 * A promise/future pair carries one result, (intptr_t value, int status),
 * set exactly once from any thread. Every waiter sees the same result.
 * Handles are single-use: a promise is consumed by xtc_promise_set or
 * xtc_promise_drop; a future by exactly one terminal operation (await, a
 * successful wait, a combinator, xtc_future_notify or xtc_future_drop).
 * Using a handle after it was consumed is undefined; a failed call
 * (an error other than the producer's status) consumes nothing.
 *
 * Status values are 0 or negative XTC_E_* codes; await and wait return the
 * producer's status. A promise dropped unset completes its future with
 * XTC_E_ABORTED and value 0.
 *
 * Continuations (map, then, when_all, when_any, notify) run on the thread
 * that completes the source, or on the calling thread when the source is
 * already complete; they must not block.
 */
/* xtc.h first and outside the guard (see xtc_loop.h). */
#include "xtc.h"

#ifndef XTC_FUTURE_H
#define XTC_FUTURE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xtc_future  xtc_future_t;
typedef struct xtc_promise xtc_promise_t;

/* Upper bound on n for when_all / when_any (XTC_E_RANGE above). */
#define XTC_FUTURE_MAX_GROUP (1 << 20)

/* New pending pair. XTC_E_INVAL for NULL outs, XTC_E_NOMEM. */
XTC_API int  xtc_future_new_pair(xtc_promise_t **out_prom,
                                 xtc_future_t **out_fut);
/* Complete the future; any thread; consumes the promise on success.
 * XTC_E_INVAL: NULL or already set/dropped; XTC_E_RANGE: status > 0. */
XTC_API int  xtc_promise_set(xtc_promise_t *prom, intptr_t value, int status);
/* Consume the promise; if unset the future completes with XTC_E_ABORTED
 * and value 0. NULL is a no-op. */
XTC_API void xtc_promise_drop(xtc_promise_t *prom);

/* Park the calling fiber until the future completes; *out (may be NULL)
 * receives the value; returns the producer's status and consumes fut.
 * XTC_E_INVAL: NULL, or off a fiber task; XTC_E_DEADLK: inside a Go
 * callback. */
XTC_API int  xtc_future_await(xtc_future_t *fut, intptr_t *out);
/* Wait from a fiber (parks) or a plain thread (blocks) for at most
 * timeout_ns (< 0 forever, 0 poll). On completion returns the producer's
 * status and consumes fut; XTC_E_AGAIN on timeout (fut NOT consumed).
 * XTC_E_INVAL for NULL; XTC_E_DEADLK for a blocking wait on a loop's
 * carrier stack (a stackless task or a Go callback), which would stall it. */
XTC_API int  xtc_future_wait(xtc_future_t *fut, intptr_t *out,
                             int64_t timeout_ns);
/* *is_ready = 1 once completed; non-consuming. XTC_E_INVAL for NULL. */
XTC_API int  xtc_future_ready(xtc_future_t *fut, int *is_ready);
/* Consume fut without waiting: the result is discarded. NULL is a no-op. */
XTC_API void xtc_future_drop(xtc_future_t *fut);

typedef intptr_t (*xtc_future_map_fn)(intptr_t value, int status, void *user);
typedef int (*xtc_future_then_fn)(intptr_t value, int status, void *user,
                                  xtc_future_t **out_next);

/* *out_fut completes with (fn(value, status, user), status). Consumes src.
 * XTC_E_INVAL for NULL src/fn/out_fut; XTC_E_NOMEM. */
XTC_API int  xtc_future_map(xtc_future_t *src, xtc_future_map_fn fn,
                            void *user, xtc_future_t **out_fut);
/* When src completes, fn(value, status, user, &next) runs. fn returning
 * non-zero completes *out_fut with (0, that code); a NULL next passes src's
 * result through; otherwise *out_fut completes with next's result (next is
 * consumed). Consumes src. Errors as xtc_future_map. */
XTC_API int  xtc_future_then(xtc_future_t *src, xtc_future_then_fn fn,
                             void *user, xtc_future_t **out_fut);
/* Completes when all n complete: value n, status 0 or the first non-zero
 * status in completion order. Consumes every futs[i].
 * XTC_E_INVAL: NULL futs/out/entry, a handle listed twice, n < 1;
 * XTC_E_RANGE: n > XTC_FUTURE_MAX_GROUP; XTC_E_NOMEM. */
XTC_API int  xtc_future_when_all(xtc_future_t **futs, int n,
                                 xtc_future_t **out_fut);
/* Completes with the (value, status) of the first of the n futures to
 * complete. Consumes every futs[i]. Errors as xtc_future_when_all. */
XTC_API int  xtc_future_when_any(xtc_future_t **futs, int n,
                                 xtc_future_t **out_fut);
/* *out_fut completes with src's result, or with (0, XTC_E_AGAIN) when
 * timeout_ns (> 0) passes first; the timer runs on the calling thread's
 * loop, so it must be called on a loop thread (a fiber or task of a
 * running loop). Consumes src. XTC_E_INVAL: NULL, timeout_ns <= 0, no
 * current loop; XTC_E_NOMEM. */
XTC_API int  xtc_future_with_timeout(xtc_future_t *src, int64_t timeout_ns,
                                     xtc_future_t **out_fut);

/* ---- completion queues -------------------------------------------------
 * A bounded multi-producer single-consumer ring of completed results plus
 * an eventfd doorbell, for a consumer that waits in another event loop
 * (Go's netpoller, epoll). Pushing is lock-free and allocation-free; the
 * doorbell is rung only when the consumer armed it before sleeping. */
typedef struct xtc_cq xtc_cq_t;
typedef struct xtc_cq_entry {
	uint64_t tag;    /* what xtc_future_notify was given */
	intptr_t value;
	int      status;
} xtc_cq_entry_t;

/* capacity: 1..2^20 (rounded up to a power of two). XTC_E_INVAL for NULL
 * out, XTC_E_RANGE, XTC_E_NOMEM, XTC_E_IO (eventfd refused). */
XTC_API int  xtc_cq_create(uint32_t capacity, xtc_cq_t **out);
/* Free the ring and close its fd (unless xtc_cq_release_fd was called).
 * XTC_E_AGAIN while futures are still registered or entries unconsumed;
 * XTC_E_INVAL for NULL. */
XTC_API int  xtc_cq_destroy(xtc_cq_t *cq);
/* The doorbell: an EFD_NONBLOCK|EFD_CLOEXEC eventfd, readable after
 * xtc_cq_arm returned 0 and an entry was pushed. -1 for NULL. */
XTC_API int  xtc_cq_fd(const xtc_cq_t *cq);
/* The caller takes ownership of the fd (e.g. Go's os.NewFile closes it);
 * destroy then leaves it open. */
XTC_API int  xtc_cq_release_fd(xtc_cq_t *cq);
/* Consumer only: move up to max entries into out; returns how many (0 when
 * empty) or XTC_E_INVAL. */
XTC_API int  xtc_cq_pop(xtc_cq_t *cq, xtc_cq_entry_t *out, int max);
/* Consumer only, before sleeping on the fd: 0 = armed, sleep; 1 = entries
 * are ready, pop instead (the doorbell may still ring later: a spurious
 * wake). XTC_E_INVAL for NULL. */
XTC_API int  xtc_cq_arm(xtc_cq_t *cq);
/* When fut completes, push (tag, value, status) into cq and ring the
 * doorbell if armed. Reserves the slot now, so the push cannot fail.
 * Consumes fut. XTC_E_INVAL for NULL; XTC_E_AGAIN when every slot is
 * reserved (fut not consumed). */
XTC_API int  xtc_future_notify(xtc_future_t *fut, xtc_cq_t *cq, uint64_t tag);

#ifdef __cplusplus
}
#endif

#endif

/* The dispatch bridge has its own header, as in libxtc. */
#include "xtc_dispatch.h"
