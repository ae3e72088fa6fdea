/*
 * exec_gocall_int.h - the Go front door's C half (csrc/exec_gocall.c): call records
 * in a slab of slabs (chunks made on first use, never moved), started by a
 * carrier from its submission ring, settled exactly once onto a completion
 * stack with a doorbell that rings only when its reader is about to sleep.
 *
 * Model (one table per executor, made by the Go side on first use):
 *  - a record is named by its index; the caller (Go) owns the free list
 *    and hands a free index to xtc__gocall_submit, which fills the record
 *    and pushes it on the chosen carrier's submission ring (xtc_exec_submit;
 *    the carrier drains it in batches on its own stack and spawns the call
 *    as a proc there). Past a full ring the record waits in the carrier's
 *    overflow (xtc__exec_submit_node: a node embedded in the record,
 *    unbounded, no allocation, admitted at the ring's pace), so a call is
 *    never refused for lack of ring room;
 *  - the proc's exit hook (or, for a record never started, the start
 *    function, or xtc__gocalls_settle after the executor
 *    was finalised) settles the record: value and status written, state
 *    moved to DONE by the one caller that wins the transition, then the
 *    waiter word exchanged to XTC__GW_DONE. A waiter that was spinning on
 *    the record (XTC__GW_SPIN) takes the result itself; otherwise (parked
 *    or asynchronous, XTC__GW_RING) the record goes on the completion
 *    stack (intrusive: a link in the record), whose reader is woken
 *    through the eventfd only when it armed it;
 *  - a kill sets the record's kill word, then kills the proc if it was
 *    started (Dekker with the start: either the start sees the word or the
 *    killer sees STARTED and the pid); a record killed before it started
 *    completes with XTC_E_ABORTED without running.
 *
 * Invariants: exactly one settlement per submitted record; a record is on
 * the completion stack at most once, so it is never full and never
 * allocates; records live in chunks of XTC__GOCALLS_CHUNK made the first
 * time one of their indices is used and never moved or freed before the
 * table (a record's address, and so the caller's view of it, is stable);
 * after the settlement the runtime touches a spinner's record no more, and
 * a ring waiter's only until the consumer popped its index (the caller
 * reuses it only after it saw XTC__GW_DONE from the spin or the pop).
 */
#ifndef XTC_EXEC_GOCALL_INT_H
#define XTC_EXEC_GOCALL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_proc.h"

/* the waiter word of a record (first field, 4-byte aligned) */
enum {
	XTC__GW_RING = 0, /* completion goes on the stack (parked / async) */
	XTC__GW_SPIN = 1, /* the submitter polls the record */
	XTC__GW_DONE = 2, /* settled: value and status are valid */
};

/* record state */
enum {
	XTC__GC_FREE = 0,
	XTC__GC_QUEUED = 1,
	XTC__GC_STARTED = 2,
	XTC__GC_DONE = 3,
};

/* The part of a record the caller reads without a call (at offset 0 of
 * every record, stride xtc__gocalls_stride): the waiter word, then the
 * status (0 or XTC_E_*) and the C function's value; started turns 1 when
 * the carrier has taken the call off its ring and spawned its proc (a
 * spinning caller then knows the wait left is the function's own, not
 * a carrier waking up or descheduled: gocall.go, spin). */
typedef struct xtc__gocall_done {
	uint32_t waiter; /* atomic */
	int32_t status;
	int64_t value;
	uint32_t started; /* atomic, relaxed: a hint */
} xtc__gocall_done_t;

typedef struct xtc__gocalls xtc__gocalls_t;

/* records per chunk */
#define XTC__GOCALLS_CHUNK 1024u

/* A table for executor e (which must outlive the table's last submit)
 * whose indices go up to cap - 1 (the hard limit of calls in flight,
 * rounded up to a power of two, 1..1<<20); only the first chunk is made
 * now, the others when one of their indices is first used.
 * XTC_E_INVAL, XTC_E_RANGE, XTC_E_NOMEM, XTC_E_IO (no eventfd). */
int xtc__gocalls_create(xtc_exec_t *e, uint32_t cap, xtc__gocalls_t **out);
/* Frees the table; the caller guarantees no record is in flight. */
void xtc__gocalls_destroy(xtc__gocalls_t *t);
uint32_t xtc__gocalls_cap(const xtc__gocalls_t *t);
/* the doorbell (EFD_NONBLOCK); the table closes it unless released */
int xtc__gocalls_fd(const xtc__gocalls_t *t);
void xtc__gocalls_release_fd(xtc__gocalls_t *t);
/* Chunk c's base, made now if it was not (any thread): record
 * c * XTC__GOCALLS_CHUNK + j's xtc__gocall_done_t is at base + j * stride,
 * valid until the table is destroyed. XTC_E_RANGE past the hard limit,
 * XTC_E_NOMEM. */
int xtc__gocalls_chunk(xtc__gocalls_t *t, uint32_t c, void **base);
uint32_t xtc__gocalls_stride(void);
/* record idx's done part (NULL when its chunk was never made) */
xtc__gocall_done_t *xtc__gocalls_done(const xtc__gocalls_t *t, uint32_t idx);

/* Submit fn(arg) (an intptr_t (*)(void *)) as record idx (free, owned by
 * the caller) to loop loop_idx (0..n-1) of the table's executor, in class
 * cls (NULL: the default lane), named name (NULL: none; copied by the
 * spawn). spin != 0 asks to poll the record instead of being sent its
 * index: granted (return 1, or 2 when the loop's carrier was parked, so
 * that the result is a wake-up away) only when no other call is in
 * flight on its loop (an idle carrier: the result is close; the Go side
 * asks only as the table's one live call), else 0 and the index will
 * come through the completion stack. A negative XTC_E_* when nothing was queued
 * (XTC_E_INVAL: bad arguments, XTC_E_NOMEM: its chunk could not be made);
 * the record is then still the caller's. */
int xtc__gocall_submit(xtc__gocalls_t *t, uint32_t idx, int loop_idx,
                       void *fn, uintptr_t arg, xtc_exec_class_t cls,
                       const char *name, int spin);

/* The same, spawned from the calling thread (through the loop's inbox)
 * so that the pid is known at return (GoAsync, whose CallResult has a
 * Pid at once): no spin, the settlement comes through the completion stack. The
 * caller must not consume a settlement of idx before this returned. */
int xtc__gocall_spawn(xtc__gocalls_t *t, uint32_t idx, int loop_idx,
                      void *fn, uintptr_t arg, xtc_exec_class_t cls,
                      const char *name, xtc_pid_t *out_pid);

/* The spinning submitter gives up: XTC__GW_SPIN -> XTC__GW_RING. 0 when
 * it did (the index will come through the completion stack), 1 when the record was
 * settled meanwhile (take the result, nothing comes through the completion stack). */
int xtc__gocall_unspin(xtc__gocalls_t *t, uint32_t idx);

/* Stop record idx: not started, it never runs; running, its proc is
 * killed (its next slice with involuntary preemption, else its next yield
 * or park). Settles with XTC_E_ABORTED unless it returned first. Only
 * while the caller still owns idx (before it consumed the settlement). */
int xtc__gocall_kill(xtc__gocalls_t *t, uint32_t idx);
/* xtc__gocall_kill, then 1 when the record had not started: its function
 * will never run (the caller may leave without waiting for the
 * settlement), 0 when it started or ended, XTC_E_INVAL on a bad index. */
int xtc__gocall_kill_unstarted(xtc__gocalls_t *t, uint32_t idx);

/* Consumer (one at a time): up to max settled indices, oldest first. */
int xtc__gocalls_pop(xtc__gocalls_t *t, uint32_t *out, int max);
/* Arm the doorbell before sleeping: 1 if an entry arrived meanwhile (do
 * not sleep), else 0 (the next settlement writes the eventfd). It reads
 * the stack's head only (any thread, while another pops): every consumer
 * pops until a pop returns fewer than max. */
int xtc__gocalls_arm(xtc__gocalls_t *t);
/* Consumer: is the next entry published? (a hint for its spin) */
int xtc__gocalls_peek(const xtc__gocalls_t *t);
/* The address of the completion stack's head: a pointer word, NULL when
 * nothing was settled since the last pop, stable for the table's life.
 * Any thread may load it atomically (no call) to see whether a pop would
 * find something; only a pop takes entries. A consumer that pops until
 * a pop returns fewer than max leaves nothing behind but that word. */
void *xtc__gocalls_head(xtc__gocalls_t *t);
/* The address of the doorbell's armed word (an int, 1 while the reader
 * sleeps and no settlement rang it yet), stable for the table's life. A
 * goroutine that pops while the reader sleeps takes the arm first (an
 * atomic exchange to 0: no settlement rings meanwhile) and gives it back
 * before it stops (store 1, then re-check the head: the Dekker of
 * xtc__gocalls_arm). */
void *xtc__gocalls_armed(xtc__gocalls_t *t);
/* The per-loop counts of the table's calls in flight (submitted or
 * spawned, not settled; atomic int32s, read by the Go side to place a
 * call: gocall.go, pick): *n of them (the executor's loops), valid for the
 * table's life; NULL on a bad table. Each count is raised by the
 * submission (or spawn) that places a call on its loop and lowered by the
 * call's settlement. */
int32_t *xtc__gocalls_loads(xtc__gocalls_t *t, int *n);
/* The pid of record idx's proc once a carrier started it (XTC_PID_NONE
 * before, and after a settlement that never started it); only while
 * the caller owns idx. */
int xtc__gocall_pid(const xtc__gocalls_t *t, uint32_t idx, xtc_pid_t *out);
/* Write the eventfd (wake the consumer for another reason). */
void xtc__gocalls_bell(xtc__gocalls_t *t);

/* After the executor was finalised (xtc_exec_fini: no carrier runs and no
 * proc is left): settle every record still queued with XTC_E_ABORTED (a
 * submission dropped unrun). Returns how many. */
int xtc__gocalls_settle(xtc__gocalls_t *t);

/* Counters: records submitted, settled through the ring, settled to a
 * spinning waiter, queued past a full ring (the carrier's overflow). */
typedef struct xtc__gocalls_stats {
	uint64_t submitted, ring, spun, fallback;
} xtc__gocalls_stats_t;
void xtc__gocalls_stats(const xtc__gocalls_t *t, xtc__gocalls_stats_t *out);

/* ---- the C halves of the other Go entry points (fn.go, completion.go) ----
 * One step of a deadline-preemptible function, run as a call: its record
 * (opaque to Go), prepared before the step and read back after its call
 * settled. */
enum { XTC__GOFN_LAUNCH = 0, XTC__GOFN_RESUME = 1 };
typedef struct xtc__gofn xtc__gofn_t;
typedef struct xtc__gofn_view {
	int state;            /* XTC_FN_* */
	int ran;              /* the step's C call returned */
	int rc;               /* its xtc_fn_* result, valid when ran */
	uint32_t preemptions;
	intptr_t result;
	int64_t run_ns;
} xtc__gofn_view_t;
xtc__gofn_t *xtc__gofn_new(void);
void xtc__gofn_prepare(xtc__gofn_t *r, int op, void *entry, void *arg,
                       int64_t slice);
void xtc__gofn_view(const xtc__gofn_t *r, xtc__gofn_view_t *out);
/* drop a preempted function's context, from any thread */
int xtc__gofn_discard(xtc__gofn_t *r);
void xtc__gofn_free(xtc__gofn_t *r);
void *xtc__gofn_step_fn(void); /* the call's intptr_t (*)(void *) */

/* One xtc_launch(3), driven by a call (a proc: what xtc_launch needs). */
typedef struct xtc__golaunch xtc__golaunch_t;
xtc__golaunch_t *xtc__golaunch_new(void *fn, void *arg, int64_t timeout,
                                   char *name, size_t cap);
void xtc__golaunch_free(xtc__golaunch_t *r);
void *xtc__golaunch_drive_fn(void);
/* after the driver's call settled: xtc_launch's result code, whether it
 * returned (ran) and the child's value */
int xtc__golaunch_outcome(const xtc__golaunch_t *r, int *ran,
                          intptr_t *result);

/* Submit: dispatch fn on loop, its result routed into cq under tag. 0, or
 * 1 when the loop's owner was parked (the result is a wake-up away: the Go
 * waiter polls longer), or a negative XTC_E_*. */
int xtc__gofut_submit(xtc_loop_t *loop, void *fn, void *arg, xtc_cq_t *cq,
                      uint64_t tag, xtc_dispatch_handle_t **out_h);
/* The completion queue's doorbell taken back by a Go waiter that pops in
 * the sleeping server's place (completion.go, await): xtc__cq_disarm. */
int xtc__gocq_disarm(xtc_cq_t *cq);

/* The mailbox relay (Exec.NewMailbox; exec_gocall.c has the protocol).
 * new: the record, its "gone" settlement routed to cq under tag + 1,
 * token the 16 random bytes of its control requests; spawn: the relay on
 * loop (on failure the gone entry is settled all the same); credit: Go
 * read one message; the rec_* accessors read a message record (the cq
 * entry's value), which Go frees with free(); free: the record, once its
 * gone entry arrived. */
typedef struct xtc__gombox xtc__gombox_t;
typedef struct xtc__gombox_rec xtc__gombox_rec_t;
int xtc__gombox_new(xtc_cq_t *cq, uint64_t tag, int window,
                    const unsigned char *token, xtc__gombox_t **out);
int xtc__gombox_spawn(xtc_loop_t *loop, xtc__gombox_t *m, size_t cap,
                      xtc_pid_t *pid);
void xtc__gombox_credit(xtc__gombox_t *m);
size_t xtc__gombox_rec_len(const xtc__gombox_rec_t *r);
void *xtc__gombox_rec_data(xtc__gombox_rec_t *r);
void xtc__gombox_free(xtc__gombox_t *m);

#endif
