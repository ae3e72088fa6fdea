/*
 * future_int.h - internal contract shared by future.c and blocking.c: the
 * one-shot wait node both use to park a waiter until a completer on any
 * thread fires it, and the hooks the Go completion queue needs.
 *
 * The handshake (why three states). A waiter's node lives on its own stack
 * and the waiter returns as soon as it sees the node completed, after which
 * the node and even the waiting task may be gone. The completer must wake
 * the waiter *after* publishing completion (else the wake could be consumed
 * by a spurious return before the result is visible, and the waiter would
 * park again forever) yet must not touch the node or the task *after* the
 * waiter may have left. So the completer publishes FIRING, wakes, then
 * publishes DONE as its last access; a waiter that sees FIRING waits for
 * DONE (the completer is between two stores, with involuntary preemption
 * deferred so it cannot be switched out on the waiter's own thread).
 *
 * Loop fini. A fiber parked on a node registers a detach hook with its
 * task (xtc__task_set_detach) that unlinks the node from the object under
 * the object's lock, or, when the completer already took it, waits for
 * DONE (xtc__wnode_await_done). Either way no completer reaches the node
 * or the task after the hook returned, so fini may release the fiber.
 */
#ifndef XTC_FUTURE_INT_H
#define XTC_FUTURE_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include "loop_int.h"
#include "xtc_future.h"

enum {
	XTC__WN_PENDING = 0,
	XTC__WN_FIRING = 1,
	XTC__WN_DONE = 2
};

typedef struct xtc__wnode xtc__wnode_t;
struct xtc__wnode {
	xtc__wnode_t *next;
	xtc_task_t *task;        /* fiber waiter; NULL = thread waiter (futex) */
	_Atomic uint32_t state;  /* XTC__WN_*; also the futex word */
};

/* Initialise a node for the calling context: a fiber task waiter when the
 * caller is a fiber outside a Go callback, else a thread waiter. */
void xtc__wnode_init(xtc__wnode_t *w);
/* Completer side, any thread: FIRING, wake, DONE. The last access to w. */
void xtc__wnode_fire(xtc__wnode_t *w);
/* Waiter side. 0 once DONE; XTC_E_AGAIN when timeout_ns (< 0 forever, 0
 * poll) expired with the node still PENDING; other codes from the park
 * (XTC_E_DEADLK). On non-zero the caller must unlink the node under its
 * lock and, if the completer already took it, call xtc__wnode_settle. */
int  xtc__wnode_wait(xtc__wnode_t *w, int64_t timeout_ns);
/* Wait until a node the completer has taken reaches DONE (bounded). */
void xtc__wnode_settle(xtc__wnode_t *w);
/* Same from a context that must not park (a waiter detach hook run by
 * loop fini, see xtc__task_set_detach): spins briefly, then sleeps the
 * thread in short naps. The completer may still be running user code
 * (blocking.c), so this does not spin for long. */
void xtc__wnode_await_done(xtc__wnode_t *w);

/* future.c <-> future_cq.c. A record's handles carry this magic once
 * freed. ok: f is a live future handle. chain_cq: claim fut and have its
 * completion pushed to cq under tag (xtc_future_notify reserved the slot;
 * XTC_E_INVAL when fut is consumed or in use). pair_discard: free a pair
 * no other party ever saw, without completing it. cq_push: any thread,
 * into a reserved slot (cannot fail). */
#define XTC__FUTURE_DEAD_MAGIC 0xdeadf00du
int  xtc__future_ok(const xtc_future_t *f);
int  xtc__future_chain_cq(xtc_future_t *fut, xtc_cq_t *cq, uint64_t tag);
void xtc__future_pair_discard(xtc_future_t *f);
void xtc__cq_push(xtc_cq_t *cq, uint64_t tag, intptr_t value, int status);
/* Take the doorbell back from a sleeping consumer (exchange armed with 0):
 * 1 when it was armed, so no producer rings until the caller arms again
 * (xtc_cq_arm); 0 when a producer rang it already. For a consumer that
 * pops in the sleeper's place (the Go completion queue's spinning
 * waiter). */
int xtc__cq_disarm(xtc_cq_t *cq);

/* Dispatch a coroutine-shaped function (the result is an intptr_t, as in
 * xtc_async): what the Go wrapper xtc.Submit runs. Same contract as
 * xtc_dispatch otherwise. */
int xtc__dispatch_coro(xtc_loop_t *loop, xtc_coro_fn fn, void *arg,
                       xtc_future_t **out_future,
                       xtc_dispatch_handle_t **out_handle);

#endif
