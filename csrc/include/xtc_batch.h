/*
 * xtc_batch.h - continuous (iteration-level) batching: a group of borrowed
 * requests advanced together by one step call per iteration, refilled at
 * every iteration boundary.
 *
 * A group lives on one loop and owns a pinned driver proc there. Requests
 * are borrowed pointers with a fixed resource charge; admission to the
 * active set is first-come, first-served against resource_capacity and
 * max_active. Each iteration the driver calls step once with the whole
 * ready vector; step writes one result per member (CONTINUE, DONE, BLOCKED,
 * ERROR). complete runs exactly once per accepted request with its outcome.
 *
 * Lifecycle: create (before the loop's first run or step) -> submit ... ->
 * close(DRAIN or CANCEL) -> run the loop until the driver ends -> destroy ->
 * xtc_loop_fini. Full rules in xtc_batch(3).
 *
 * Built with -Dsched_policy=true (the default here); otherwise every
 * function exists and returns XTC_E_NOSYS.
 */
/* xtc.h first and outside the guard (see xtc_loop.h). */
#include "xtc.h"

#ifndef XTC_BATCH_H
#define XTC_BATCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xtc_batch xtc_batch_t; /* opaque */

/* xtc_batch_opts_t.version this header describes. Later versions only
 * append fields; opts.size tells the library which ones the caller has. */
#define XTC_BATCH_VERSION 1

#define XTC_BATCH_MAX_CAPACITY ((size_t)1 << 20) /* waiting + active */
#define XTC_BATCH_MAX_ACTIVE   ((size_t)65536)   /* members per vector */

/* Per-member step results (xtc_batch_result_t.state). */
enum {
	XTC_BATCH_CONTINUE = 0, /* stays in the vector for the next iteration */
	XTC_BATCH_DONE = 1,     /* finished: complete(XTC_OK) */
	XTC_BATCH_BLOCKED = 2,  /* leaves the vector until xtc_batch_resume */
	XTC_BATCH_ERROR = 3     /* failed: complete(result.error) */
};

/* xtc_batch_close modes (exactly one). */
#define XTC_BATCH_DRAIN  0x1u /* finish accepted work, accept no more */
#define XTC_BATCH_CANCEL 0x2u /* abort accepted work (XTC_E_ABORTED) */

/* One member of the ready vector, as step sees it. */
typedef struct xtc_batch_item {
	uint64_t handle;  /* from xtc_batch_submit */
	void    *request; /* the borrowed pointer */
	uint64_t charge;  /* its fixed resource charge */
	uint64_t rounds;  /* step calls it took part in before this one */
} xtc_batch_item_t;

/* One result per member; preset to CONTINUE / 0 before each step. */
typedef struct xtc_batch_result {
	int state; /* XTC_BATCH_*; anything else counts as ERROR, XTC_E_INVAL */
	int error; /* ERROR: a negative XTC_E_* (else XTC_E_INTERNAL is used) */
} xtc_batch_result_t;

/* One call per iteration with the whole ready vector (count >= 1), on the
 * driver proc. A return other than XTC_OK fails the whole vector: every
 * member completes with that code (XTC_E_INTERNAL if it is positive). */
typedef int (*xtc_batch_step_fn)(const xtc_batch_item_t *items,
                                 xtc_batch_result_t *results, size_t count,
                                 void *user);
/* Exactly once per accepted request, on the driver proc, after the request
 * left the group (its slot is free again when complete returns): outcome
 * XTC_OK (DONE), XTC_E_ABORTED (cancelled) or the member's error. */
typedef void (*xtc_batch_complete_fn)(uint64_t handle, void *request,
                                      int outcome, void *user);

/* Creation options. Set size = sizeof(xtc_batch_opts_t) and version =
 * XTC_BATCH_VERSION; bytes past the fields this library knows must be 0. */
typedef struct xtc_batch_opts {
	size_t   size;
	uint32_t version;
	uint32_t flags;             /* reserved, 0 */
	size_t   capacity;          /* waiting + active requests, 1..MAX_CAPACITY */
	size_t   max_active;        /* members per vector, 1..min(capacity, MAX_ACTIVE) */
	uint64_t resource_capacity; /* units shared by active members, >= 1 */
	xtc_exec_class_t sched_class; /* the driver's class (NULL: default lane) */
	xtc_batch_step_fn     step;     /* required */
	xtc_batch_complete_fn complete; /* required */
	void       *user;           /* passed to step and complete */
	const char *name;           /* driver proc label (copied) */
} xtc_batch_opts_t;

typedef struct xtc_batch_stats {
	uint64_t accepted;      /* submits that returned XTC_OK */
	uint64_t refused;       /* submits that returned XTC_E_AGAIN */
	uint64_t admitted;      /* requests that entered the active set */
	uint64_t completed;     /* complete calls (= ok + aborted + failed) */
	uint64_t completed_ok;
	uint64_t aborted;
	uint64_t failed;
	uint64_t iterations;    /* step calls */
	uint64_t member_rounds; /* sum of the vector sizes passed to step */
	uint64_t deadlk;        /* mutator calls refused with XTC_E_DEADLK */
	uint64_t waiting;       /* accepted, not admitted (now) */
	uint64_t active;        /* admitted, not completed (now; incl. blocked) */
	uint64_t blocked;       /* of which BLOCKED (now) */
	uint64_t resource_used; /* sum of the active charges (now) */
	uint64_t peak_active;
	uint32_t closed;        /* 0, XTC_BATCH_DRAIN or XTC_BATCH_CANCEL */
	uint32_t driver_alive;  /* 1 until the driver proc has ended */
	xtc_pid_t driver;       /* the driver proc */
	uint64_t reserved[8];   /* 0; room for later counters */
} xtc_batch_stats_t;

/* Setup-only: before the loop's first run or step (else XTC_E_AGAIN). All
 * memory of the group is allocated here. */
XTC_API int xtc_batch_create(xtc_loop_t *loop, const xtc_batch_opts_t *opts,
                             xtc_batch_t **out);
/* Queue request (borrowed, may be NULL) with a fixed charge; *out_handle
 * gets its handle (monotonic, never reused, never 0). XTC_E_AGAIN when the
 * group is full (capacity) or closed: the caller keeps the request. */
XTC_API int xtc_batch_submit(xtc_batch_t *group, void *request,
                             uint64_t charge, uint64_t *out_handle);
/* Cancel an accepted request: it completes XTC_E_ABORTED at the next
 * iteration boundary. XTC_OK also when repeated; XTC_E_NOTFOUND once it
 * completed (or for a handle never issued). */
XTC_API int xtc_batch_cancel(xtc_batch_t *group, uint64_t handle);
/* Make a BLOCKED member ready again from the next boundary. XTC_OK (no
 * effect) for a live member that is not BLOCKED; XTC_E_NOTFOUND once it
 * completed. */
XTC_API int xtc_batch_resume(xtc_batch_t *group, uint64_t handle);
/* XTC_BATCH_DRAIN or XTC_BATCH_CANCEL; a later CANCEL escalates a DRAIN. */
XTC_API int xtc_batch_close(xtc_batch_t *group, unsigned mode);
/* Free the group: XTC_E_AGAIN while its driver proc exists. */
XTC_API int xtc_batch_destroy(xtc_batch_t *group);
/* Counters and current sizes; any thread, also from the callbacks. */
XTC_API int xtc_batch_get_stats(const xtc_batch_t *group,
                                xtc_batch_stats_t *out);

/* ---- cross-thread admission (any loop or plain OS thread) -------------
 *
 * Hand-ins go through a bounded ring and a record pool allocated by
 * xtc_batch_create (xtc_batch_mt_capacity records) and are drained by the
 * driver at each iteration boundary; they never touch the group's slots and
 * never block. Handles they issue have bit 63 set (XTC_BATCH_MT_HANDLE). */
#define XTC_BATCH_MT_HANDLE ((uint64_t)1 << 63)

/* Hand request in from any thread. XTC_OK: *out_handle is set and complete
 * runs exactly once for it (a hand-in that finds the group full waits for a
 * slot in submission order; close(DRAIN) still runs it, close(CANCEL)
 * aborts it). XTC_E_AGAIN: the group is closed, the driver ended, or the
 * ring or record pool is full (nothing was issued; the caller keeps the
 * request). XTC_E_RANGE: charge > resource_capacity. XTC_E_INVAL: bad group
 * or out_handle NULL. XTC_E_DEADLK is never returned (callbacks may call
 * it; the record is drained at the next boundary). */
XTC_API int xtc_batch_submit_mt(xtc_batch_t *group, void *request,
                                uint64_t charge, uint64_t *out_handle);
/* Ask for handle's cancellation from any thread; applied at the next
 * boundary as xtc_batch_cancel, silently discarded when the handle has
 * completed or was never issued. XTC_OK, XTC_E_INVAL (bad group, handle 0),
 * XTC_E_AGAIN (ring full, or the driver ended: nothing left to cancel). */
XTC_API int xtc_batch_cancel_mt(xtc_batch_t *group, uint64_t handle);
/* xtc_batch_resume from any thread, at the next boundary; codes as
 * xtc_batch_cancel_mt. */
XTC_API int xtc_batch_resume_mt(xtc_batch_t *group, uint64_t handle);
/* ---- async offload ----------------------------------------------------
 *
 * xtc_batch_create_async replaces step with submit/collect: submit launches
 * one device operation over the ready vector and describes how to await it
 * in *exec; the driver awaits it without stalling the loop (it parks), then
 * collect decides each member's result at the next boundary. */
typedef struct xtc_future xtc_future_t; /* xtc_future.h */

enum {
	XTC_BATCH_EXEC_SYNC = 0,     /* submit did the work; status 0 */
	XTC_BATCH_EXEC_FUTURE = 1,   /* await future (consumed); its status */
	XTC_BATCH_EXEC_BLOCKING = 2, /* run fn(arg) on the blocking pool; its
	                              * return value is the status */
	XTC_BATCH_EXEC_FENCE = 3     /* await fd readable (native only); 0 */
};

/* Filled by submit; zeroed (SYNC) before the call. */
typedef struct xtc_batch_exec {
	int kind;                /* XTC_BATCH_EXEC_* */
	int fd;                  /* FENCE: stays open until collect returns */
	xtc_future_t *future;    /* FUTURE: consumed by the engine */
	int (*fn)(void *arg);    /* BLOCKING */
	void *arg;
} xtc_batch_exec_t;

/* Launch one operation over items[0..count); XTC_OK with *exec filled, or
 * a negative code (every member completes with it, nothing is awaited). */
typedef int (*xtc_batch_submit_fn)(const xtc_batch_item_t *items,
                                   size_t count, xtc_batch_exec_t *exec,
                                   void *user);
/* After the operation completed with status >= 0: one result per member,
 * as step writes them. Not called after a timeout (XTC_E_AGAIN), an abort
 * (close(CANCEL), driver kill: XTC_E_ABORTED) or a negative status: the
 * members then complete with that code and are never resubmitted. */
typedef int (*xtc_batch_collect_fn)(const xtc_batch_item_t *items,
                                    xtc_batch_result_t *results, size_t count,
                                    int status, void *user);
/* A member of the operation in flight was cancelled (once per member, on
 * the driver, while the op runs); it still completes XTC_E_ABORTED at the
 * completion boundary. Optional. */
typedef void (*xtc_batch_cancel_hint_fn)(uint64_t handle, void *request,
                                         void *user);

#define XTC_BATCH_ASYNC_VERSION 1

typedef struct xtc_batch_async_opts {
	size_t   size;           /* sizeof(xtc_batch_async_opts_t) */
	uint32_t version;        /* XTC_BATCH_ASYNC_VERSION */
	uint32_t flags;          /* reserved, 0 */
	xtc_batch_submit_fn  submit;   /* required */
	xtc_batch_collect_fn collect;  /* required */
	xtc_batch_cancel_hint_fn cancel_hint; /* optional */
	int64_t  exec_timeout_ns; /* FENCE/FUTURE wait bound; 0: none; < 0 INVAL */
} xtc_batch_async_opts_t;

/* As xtc_batch_create with opts->step NULL (else XTC_E_INVAL) and the
 * submit/collect pair of aopts. */
XTC_API int xtc_batch_create_async(xtc_loop_t *loop,
                                   const xtc_batch_opts_t *opts,
                                   const xtc_batch_async_opts_t *aopts,
                                   xtc_batch_t **out);

/* Records of the hand-in pool (hand-ins accepted and not yet completed),
 * or a negative XTC_E_INVAL. */
XTC_API long xtc_batch_mt_capacity(const xtc_batch_t *group);

/* ---- placement ----------------------------------------------------------
 *
 * Advisory glue, not a scheduler: nothing migrates a live group. */
struct xtc_exec;

/* The loop of exec whose carrier runs on NUMA node numa_node (-1: unknown)
 * into *out. Carriers record their node only when they start, and a group
 * can only be created before that, so this returns loop 0 today (also on
 * single-node machines and for an unknown node). XTC_E_INVAL: NULL exec or
 * out; XTC_E_RANGE: numa_node < -1. */
XTC_API int xtc_batch_loop_for_device(struct xtc_exec *exec, int numa_node,
                                      xtc_loop_t **out);

typedef struct xtc_batch_router xtc_batch_router_t; /* opaque */

#define XTC_BATCH_ROUTER_MAX 65536 /* groups per router */

/* One logical model over n caller-created groups (the array is copied; the
 * groups stay the caller's and must outlive the router). XTC_E_INVAL: NULL
 * groups/out, n == 0, a NULL or destroyed group; XTC_E_RANGE: n above
 * XTC_BATCH_ROUTER_MAX; XTC_E_NOMEM. */
XTC_API int xtc_batch_router_create(xtc_batch_t *const *groups, size_t n,
                                    xtc_batch_router_t **out);
/* The group for key: stable (the same key, the same group, for the
 * router's life), spread evenly, and moving only about 1/(n+1) of the
 * keys when a router is rebuilt with one more group (jump consistent
 * hash). Any thread. XTC_E_INVAL: NULL out, a NULL or destroyed router. */
XTC_API int xtc_batch_router_route(const xtc_batch_router_t *router,
                                   uint64_t key, xtc_batch_t **out);
/* Free the router (not the groups). XTC_E_INVAL: NULL or destroyed. */
XTC_API int xtc_batch_router_destroy(xtc_batch_router_t *router);

#ifdef __cplusplus
}
#endif

#endif
