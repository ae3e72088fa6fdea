/*
 * batch.c - continuous (iteration-level) batching groups (xtc_batch.h).
 *
 * Model: a group is a fixed pool of `capacity` request slots owned by one
 * loop, a FIFO of waiting slots, an ordered active vector of at most
 * `max_active` admitted slots, and a pinned driver proc that loops
 *     boundary: apply cancels, admit the FCFS head while it fits
 *     iteration: one step call over the READY members, apply the results
 *     yield (or park when nothing is ready)
 * Every completion (DONE, ERROR, a failed step, a cancel) frees its slot at
 * once, so a slot freed in iteration k is refilled at the boundary before
 * iteration k+1. Admission is strict FCFS: when the head does not fit, no
 * later request passes it (no starvation of large charges; TensorRT-LLM's
 * GUARANTEED_NO_EVICT: an admitted request is never paused or evicted).
 *
 * Invariants (owner thread; the driver is the only code that moves a slot
 * out of WAITING/ACTIVE, always through finish(), which is the only caller
 * of complete, so each accepted handle completes exactly once):
 *  - slot states FREE -> WAITING -> READY <-> BLOCKED -> FREE, or WAITING
 *    -> FREE (cancel/close before admission);
 *  - resource_used is the sum of the charges of the READY and BLOCKED slots
 *    and never exceeds resource_capacity; n_active <= max_active;
 *  - in_cb is set for the whole span of a step or complete call: every
 *    mutator returns XTC_E_DEADLK then, from the callback itself or from a
 *    peer proc that runs while the callback is suspended;
 *  - a handle is (seq << 20) | slot with seq from a 64-bit counter that only
 *    grows: lookups are O(1) (slot index, then an equality check) and a
 *    handle is never issued twice.
 *
 * Memory: everything (the slots, the vectors passed to step, the group
 * header) is allocated by xtc_batch_create; submit, cancel, resume, the
 * boundary and the iteration allocate nothing. Destroyed group headers are
 * kept as shells (magic DEAD) and reused by later creates, so a call on a
 * destroyed group returns XTC_E_INVAL instead of reading freed memory (as
 * finalised loops do).
 *
 * The header is opaque and the options are versioned by size/version, so
 * async offload (a submit/collect pair and an exec descriptor per
 * iteration) is a second kind of iteration in drive(), cross-thread
 * admission a bounded ring of records drained at the top of boundary(),
 * and placement only chooses the loop passed to create.
 *
 * Cross-thread admission (xtc_batch_submit_mt/_cancel_mt/_resume_mt): a
 * pool of P records and a ring of 2P op cells, both allocated by create.
 * A hand-in pops a free record index from `freeq` (a bounded MPMC queue of
 * sequence-stamped cells: any thread pops, only the owner pushes), fills it,
 * and pushes a SUBMIT op into `inq` (any thread pushes, only the owner pops);
 * cancel_mt/resume_mt push an op carrying the handle only. The driver drains
 * `inq` at the top of every boundary: a SUBMIT record joins the `over` FIFO
 * (records in submission order) and is promoted into a free slot as soon as
 * one exists, so a hand-in that finds the group full waits, never fails,
 * once XTC_OK was returned; the record goes back to freeq after complete
 * (or, when its cell is still held by a popper descheduled between its
 * claim and its release, to an owner-only deferred list retried at every
 * drain: freeq has exactly P cells, so such a push finds it "full").
 * An mt handle is MT_HANDLE | (generation of the record << 20) | record
 * index (unique: a record's generation only grows), so the owner finds
 * the record in O(1) and from it the slot (rec.slot) once promoted.
 *   Closing races: a hand-in increments mt_pend before it reads closed_pub
 * (both seq_cst), the driver decrements it when it drains the record and
 * may only end when closed, nothing is live and mt_pend == 0; so either
 * the hand-in sees the close and refuses before issuing a handle, or the
 * driver sees the pending record and waits for it (Dekker).
 *   Waking: the driver publishes parked = 1 (seq_cst) and re-checks the
 * ring before it parks; a hand-in pushes, then reads parked and wins the
 * 1 -> 0 CAS before it calls xtc__task_wake (latched if the driver has not
 * parked yet). `wakers` counts the hand-ins between that read and the
 * wake; the ending driver stores parked = 2 and waits for wakers == 0, so
 * no thread ever wakes a task that has been reaped.
 *   mt_calls counts the mt calls in progress; destroy refuses (XTC_E_AGAIN)
 * while one runs instead of freeing memory under it, and otherwise shuts
 * the gate (MT_SHUT) with one compare-and-swap from "no call": there is no
 * moment where a live group reads as dead to a call that enters (storing
 * DEAD, seeing a call and storing LIVE back told such a call XTC_E_INVAL).
 * Rejected: a mutex around the slots (the owner's hot path would take it,
 * and a producer would block behind a step); the loop's inbox (it carries
 * tasks, costs a wakeup per post, and cannot refuse when full).
 *
 * Alternatives rejected: completing a cancelled request inside
 * xtc_batch_cancel (complete would then run on the caller's stack, inside
 * the caller's locks, and a cancel racing the step could not be ordered with
 * DONE); a heap-allocated record per request (the zero-allocation target and
 * the leak surface); a waiting list that lets a smaller request jump a head
 * that does not fit (starves large charges).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>

#include <fcntl.h>

#include "xtc.h"
#include "xtc_batch.h"
#include "xtc_blocking.h"
#include "xtc_future.h"
#include "loop_int.h"
#include "sched_int.h"
#include "ring_int.h"

#ifdef XTC_SCHED_POLICY

#define GROUP_LIVE 0x42415443u /* "BATC" */
#define GROUP_DEAD 0x44454144u /* "DEAD" */
#define SLOT_BITS 20
#define SLOT_MASK (((uint64_t)1 << SLOT_BITS) - 1)
#define NIL UINT32_MAX
#define MT_SEQ_MASK ((((uint64_t)1 << 63) - 1) >> SLOT_BITS)
#define MT_MIN 64u
#define MT_MAX 65536u
/* mt_calls: the mt calls in flight, and this bit once destroy shut the
 * gate (an mt call entering after it fails; destroy shuts it only when no
 * call is in flight, with one compare-and-swap) */
#define MT_SHUT ((uint64_t)1 << 63)

enum { OP_SUBMIT = 1, OP_CANCEL, OP_RESUME };

/* One cell of a bounded MPMC queue: seq == pos when free for the push at
 * pos, pos + 1 when it holds that push's value. */
typedef struct qcell {
	xtc__rcell_t rc; /* ring_int.h */
	uint64_t handle;
	uint32_t op;
	uint32_t pad;
} qcell_t;

typedef struct mq {
	qcell_t *cells;
	uint64_t mask;
	_Alignas(64) _Atomic uint64_t tail; /* next push */
	_Alignas(64) _Atomic uint64_t head; /* next pop */
} mq_t;

/* A hand-in record. request/charge/p_handle are written by the producer
 * before its push and read by the owner after the pop; the rest is the
 * owner's. */
typedef struct rec {
	uint64_t gen;       /* hand-ins of this record so far (its holder's) */
	uint64_t p_handle;
	void *request;
	uint64_t charge;
	uint64_t owner_h;   /* the handle while the owner holds it, else 0 */
	uint32_t slot;      /* its slot once promoted, else NIL */
	uint32_t next;      /* over FIFO */
	uint8_t cancel;
} rec_t;

enum { S_FREE = 0, S_WAITING, S_READY, S_BLOCKED };

typedef struct slot {
	uint64_t handle;    /* 0 while FREE */
	void *request;
	uint64_t charge;
	uint64_t rounds;
	uint32_t next;      /* waiting FIFO / free list */
	uint8_t state;      /* S_* */
	uint8_t cancel;     /* cancel requested, applied at the next boundary */
	uint32_t rec;       /* its hand-in record, or NIL */
	uint8_t hinted;     /* cancel_hint called for the op in flight */
} slot_t;

/* Counters read by xtc_batch_get_stats from any thread; written only by
 * the owner (a relaxed load+store, no read-modify-write). */
typedef _Atomic uint64_t ctr_t;
static inline uint64_t ctr_ld(const ctr_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}
static inline void ctr_set(ctr_t *c, uint64_t v)
{
	atomic_store_explicit(c, v, memory_order_relaxed);
}
static inline void ctr_add(ctr_t *c, uint64_t d)
{
	ctr_set(c, ctr_ld(c) + d);
}

struct xtc_batch {
	_Atomic uint32_t magic;
	xtc_batch_t *shell_next;     /* shell list (destroyed headers) */
	xtc_batch_t *live_next;      /* live list (class ownership) */

	xtc_loop_t *loop;
	uint16_t loop_id;            /* detects a finalised (reused) loop */
	int lane;                    /* class lane 0..15, or -1 */
	int registered;              /* xtc__sched_batch_register succeeded */

	/* options */
	size_t capacity, max_active;
	uint64_t resource_capacity;
	xtc_batch_step_fn step;
	xtc_batch_submit_fn a_submit;  /* async groups: step is NULL */
	xtc_batch_collect_fn a_collect;
	xtc_batch_cancel_hint_fn a_hint;
	int64_t exec_timeout;
	xtc_batch_complete_fn complete;
	void *user;

	/* the one allocation of create */
	void *mem;
	slot_t *slots;
	uint32_t *act;               /* admitted slots in admission order */
	uint32_t *vslot;             /* slot of each vector position */
	xtc_batch_item_t *items;
	xtc_batch_result_t *results;

	/* owner-thread state */
	uint32_t free_head;
	uint32_t wait_head, wait_tail;
	size_t n_act;                /* READY + BLOCKED */
	size_t n_live;               /* WAITING + READY + BLOCKED */
	size_t n_cancel;             /* live slots with cancel set */
	uint64_t resource_used;
	int in_cb;
	unsigned closed;             /* 0, XTC_BATCH_DRAIN, XTC_BATCH_CANCEL */
	_Atomic int parked;          /* 1: the driver waits; 2: it ended */
	int32_t rep_active, rep_ready, rep_waiting; /* last sched report */

	xtc_task_t *driver_task;
	xtc_pid_t driver;
	_Atomic uint32_t driver_alive;
	_Atomic uint32_t closed_pub; /* closed, for stats readers */

	_Atomic uint64_t seq;        /* handle counter */

	/* cross-thread admission */
	rec_t *recs;
	uint32_t n_recs;
	mq_t inq, freeq;
	uint32_t over_head, over_tail; /* records waiting for a slot */
	uint32_t rec_defer;            /* freed records freeq refused (owner) */
	size_t n_over, n_over_cancel;
	_Alignas(64) _Atomic uint64_t mt_pend;  /* pushed, not yet drained */
	_Atomic uint64_t mt_calls;              /* mt calls in progress | MT_SHUT */
	_Atomic uint64_t wakers;
	_Atomic uint64_t mt_refused;

	ctr_t accepted, refused, admitted, completed, completed_ok, aborted,
	      failed, iterations, member_rounds, deadlk, waiting, active,
	      blocked, resource_pub, peak_active;
};

/* ---- shells ------------------------------------------------------------- */

static xtc_batch_t *shells;
static pthread_mutex_t shells_mu = PTHREAD_MUTEX_INITIALIZER;

static xtc_batch_t *shell_get(void)
{
	xtc_batch_t *g;

	pthread_mutex_lock(&shells_mu);
	g = shells;
	if (g != NULL)
		shells = g->shell_next;
	pthread_mutex_unlock(&shells_mu);
	if (g == NULL)
		return xtc_calloc(1, sizeof *g);
	/* magic stays DEAD until create publishes the group */
	memset((char *)g + sizeof g->magic, 0, sizeof *g - sizeof g->magic);
	return g;
}

/* Live groups (create/destroy only, under shells_mu): enforces one group
 * per explicit class of a loop. */
static xtc_batch_t *live;

static void live_add(xtc_batch_t *g)
{
	pthread_mutex_lock(&shells_mu);
	g->live_next = live;
	live = g;
	pthread_mutex_unlock(&shells_mu);
}

static void live_del(xtc_batch_t *g)
{
	pthread_mutex_lock(&shells_mu);
	for (xtc_batch_t **p = &live; *p != NULL; p = &(*p)->live_next)
		if (*p == g) {
			*p = g->live_next;
			break;
		}
	pthread_mutex_unlock(&shells_mu);
}

static int class_taken(xtc_loop_t *loop, int lane)
{
	int taken = 0;

	pthread_mutex_lock(&shells_mu);
	for (xtc_batch_t *g = live; g != NULL && !taken; g = g->live_next)
		taken = g->loop == loop && g->loop_id == loop->id &&
		        g->lane == lane;
	pthread_mutex_unlock(&shells_mu);
	return taken;
}

static void shell_put(xtc_batch_t *g)
{
	atomic_store_explicit(&g->magic, GROUP_DEAD, memory_order_release);
	pthread_mutex_lock(&shells_mu);
	g->shell_next = shells;
	shells = g;
	pthread_mutex_unlock(&shells_mu);
}

/* ---- context checks ----------------------------------------------------- */

static int group_live(const xtc_batch_t *g)
{
	return g != NULL &&
	       atomic_load_explicit(&((xtc_batch_t *)g)->magic,
	                            memory_order_acquire) == GROUP_LIVE;
}

static int loop_alive(const xtc_batch_t *g)
{
	xtc_loop_t *l = g->loop;

	return atomic_load_explicit(&l->magic, memory_order_acquire) ==
	               XTC__LOOP_LIVE && l->id == g->loop_id;
}

/* Every call but destroy: the group is live and so is its loop (a loop
 * finalised under a live group leaves it usable by destroy only,
 * xtc_batch(3) "Errors after the end"; get_stats once answered XTC_OK). */
static int group_usable(const xtc_batch_t *g)
{
	return group_live(g) && loop_alive(g);
}

/* Before the loop started: any caller (setup is single-threaded by
 * contract). After: the thread running the loop (its procs, tasks and
 * callbacks), or, between runs, a thread outside every loop. */
static int on_owner(const xtc_batch_t *g)
{
	xtc_loop_t *l = g->loop;

	if (!atomic_load_explicit(&l->started, memory_order_acquire))
		return 1;
	if (xtc__tls_loop == l)
		return 1;
	return xtc__tls_loop == NULL &&
	       atomic_load_explicit(&l->owner, memory_order_acquire) == 0;
}

/* Common gate of every mutator: XTC_OK, XTC_E_INVAL or XTC_E_DEADLK. */
static int mutator_gate(xtc_batch_t *g)
{
	if (!group_live(g) || !loop_alive(g) || !on_owner(g))
		return XTC_E_INVAL;
	if (g->in_cb) {
		ctr_add(&g->deadlk, 1);
		return XTC_E_DEADLK;
	}
	return XTC_OK;
}

/* ---- bounded MPMC queue (ring_int.h) ----------------------------------- */

static void mq_init(mq_t *q, qcell_t *cells, uint64_t n)
{
	q->cells = cells;
	q->mask = n - 1;
	xtc__ring_init(cells, sizeof(*cells), n);
	atomic_store_explicit(&q->tail, 0, memory_order_relaxed);
	atomic_store_explicit(&q->head, 0, memory_order_relaxed);
}

static int mq_push(mq_t *q, uint64_t handle, uint32_t op)
{
	uint64_t pos;
	xtc__rcell_t *rc = xtc__ring_claim(&q->tail, q->cells,
	    sizeof(*q->cells), q->mask, memory_order_relaxed, &pos);
	qcell_t *c = (qcell_t *)rc;

	if (rc == NULL)
		return 0; /* full */
	c->handle = handle;
	c->op = op;
	xtc__ring_publish(rc, pos, memory_order_release);
	return 1;
}

static int mq_pop(mq_t *q, uint64_t *handle, uint32_t *op)
{
	uint64_t pos;
	xtc__rcell_t *rc = xtc__ring_take(&q->head, q->cells, sizeof(*q->cells),
	                                  q->mask, &pos);
	qcell_t *c = (qcell_t *)rc;

	if (rc == NULL)
		return 0; /* empty (or the push at head not written yet) */
	*handle = c->handle;
	if (op != NULL)
		*op = c->op;
	xtc__ring_release(rc, pos, q->mask);
	return 1;
}

/* The next pop would succeed (owner: the only consumer of inq). */
static int mq_ready(mq_t *q)
{
	return xtc__ring_peek(q->cells, sizeof(*q->cells), q->mask,
	    atomic_load_explicit(&q->head, memory_order_relaxed)) != NULL;
}

/* ---- owner-thread helpers ------------------------------------------------ */

static void publish(xtc_batch_t *g)
{
	size_t blocked = 0;

	for (size_t i = 0; i < g->n_act; i++)
		blocked += g->slots[g->act[i]].state == S_BLOCKED;
	ctr_set(&g->active, g->n_act);
	ctr_set(&g->blocked, blocked);
	ctr_set(&g->waiting, g->n_live - g->n_act + g->n_over);
	ctr_set(&g->resource_pub, g->resource_used);
	if (g->n_act > ctr_ld(&g->peak_active))
		ctr_set(&g->peak_active, g->n_act);
	/* advisory counts for the continuous lane policy (sched.c) */
	if (g->registered) {
		int32_t a = (int32_t)g->n_act, r = (int32_t)(g->n_act - blocked);
		int32_t w = (int32_t)(g->n_live - g->n_act);
		if (a != g->rep_active || r != g->rep_ready ||
		    w != g->rep_waiting) {
			xtc__sched_batch_adjust(g->loop, g->lane,
			                        a - g->rep_active,
			                        r - g->rep_ready,
			                        w - g->rep_waiting);
			g->rep_active = a;
			g->rep_ready = r;
			g->rep_waiting = w;
		}
	}
}

/* Owner side (the loop thread, or the owner between runs). */
static void wake_driver(xtc_batch_t *g)
{
	int one = 1;

	if (atomic_load_explicit(&g->parked, memory_order_relaxed) != 1 ||
	    g->driver_task == NULL)
		return;
	if (!atomic_compare_exchange_strong(&g->parked, &one, 0))
		return;
	if (xtc__tls_loop == g->loop)
		xtc__task_wake_local(g->driver_task);
	else
		(void)xtc__task_wake(g->driver_task);
}

/* Any thread, after a push (or a refusal that may let the driver end). */
static void wake_driver_mt(xtc_batch_t *g)
{
	int one = 1;

	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&g->parked, memory_order_relaxed) != 1)
		return;
	atomic_fetch_add(&g->wakers, 1);
	if (atomic_compare_exchange_strong(&g->parked, &one, 0)) {
		xtc_task_t *t = g->driver_task;
		if (t != NULL) {
			if (xtc__tls_loop == g->loop)
				xtc__task_wake_local(t);
			else
				(void)xtc__task_wake(t);
		}
	}
	atomic_fetch_sub(&g->wakers, 1);
}

static rec_t *lookup_rec(xtc_batch_t *g, uint64_t handle)
{
	uint64_t i = handle & SLOT_MASK;

	if (!(handle & XTC_BATCH_MT_HANDLE) || i >= g->n_recs)
		return NULL;
	return g->recs[i].owner_h == handle ? &g->recs[i] : NULL;
}

static slot_t *lookup(xtc_batch_t *g, uint64_t handle)
{
	uint64_t i = handle & SLOT_MASK;
	slot_t *s;

	if (handle & XTC_BATCH_MT_HANDLE) {
		rec_t *r = lookup_rec(g, handle);
		if (r == NULL || r->slot == NIL)
			return NULL;
		i = r->slot;
	}
	if (handle == 0 || i >= g->capacity)
		return NULL;
	s = &g->slots[i];
	return s->state != S_FREE && s->handle == handle ? s : NULL;
}

/* Give a record back to the pool (after its complete returned). freeq
 * has P cells for P records, yet a push can find it "full": the cell one
 * lap back is still held by a producer that claimed it (its pop's CAS)
 * and has not released it yet, descheduled between the two. The record
 * then waits on the owner's deferred list, retried at every drain (a
 * refused hand-in wakes the driver, so it is retried before anyone waits
 * long): dropping it, as this did, leaked a record per such race, and
 * under load (64 goroutines handing in on 2 CPUs) the pool drained until
 * every hand-in was refused (Go: TestBatchDoSlotsReused). */
static void rec_free(xtc_batch_t *g, uint32_t ri)
{
	g->recs[ri].owner_h = 0;
	g->recs[ri].slot = NIL;
	g->recs[ri].cancel = 0;
	if (mq_push(&g->freeq, ri, 0))
		return;
	g->recs[ri].next = g->rec_defer;
	g->rec_defer = ri;
}

/* Retry the deferred records (owner). */
static void rec_flush(xtc_batch_t *g)
{
	while (g->rec_defer != NIL) {
		uint32_t ri = g->rec_defer;

		if (!mq_push(&g->freeq, ri, 0))
			return; /* that popper still holds its cell */
		g->rec_defer = g->recs[ri].next;
	}
}

/* Complete a record that never reached a slot (cancelled in the over
 * FIFO, or close(CANCEL)). The caller unlinked it. */
static void finish_rec(xtc_batch_t *g, uint32_t ri, int outcome)
{
	rec_t *r = &g->recs[ri];

	if (r->cancel)
		g->n_over_cancel--;
	g->n_over--;
	ctr_add(&g->completed, 1);
	if (outcome == XTC_OK)
		ctr_add(&g->completed_ok, 1);
	else if (outcome == XTC_E_ABORTED)
		ctr_add(&g->aborted, 1);
	else
		ctr_add(&g->failed, 1);
	g->in_cb = 1;
	g->complete(r->owner_h, r->request, outcome, g->user);
	g->in_cb = 0;
	rec_free(g, ri);
}

/* Drain the ring: SUBMIT records join the over FIFO; CANCEL/RESUME ops are
 * applied (discarded for a handle that is not live). Calls no callback. */
static void drain(xtc_batch_t *g)
{
	uint64_t h;
	uint32_t op;

	rec_flush(g);
	while (mq_pop(&g->inq, &h, &op)) {
		if (op == OP_SUBMIT) {
			uint32_t ri = (uint32_t)(h & SLOT_MASK);
			rec_t *r = &g->recs[ri];
			r->owner_h = h;
			r->slot = NIL;
			r->cancel = 0;
			r->next = NIL;
			if (g->over_tail == NIL)
				g->over_head = ri;
			else
				g->recs[g->over_tail].next = ri;
			g->over_tail = ri;
			g->n_over++;
			ctr_add(&g->accepted, 1);
			atomic_fetch_sub(&g->mt_pend, 1);
			continue;
		}
		slot_t *s = lookup(g, h);
		if (op == OP_CANCEL) {
			rec_t *r;
			if (s != NULL) {
				if (!s->cancel) {
					s->cancel = 1;
					g->n_cancel++;
				}
			} else if ((r = lookup_rec(g, h)) != NULL &&
			           r->slot == NIL && !r->cancel) {
				r->cancel = 1;
				g->n_over_cancel++;
			}
		} else if (s != NULL && s->state == S_BLOCKED) {
			s->state = S_READY;
		}
	}
}

/* Move over-FIFO records into free slots, in submission order. */
static void promote(xtc_batch_t *g)
{
	while (g->over_head != NIL && g->free_head != NIL) {
		uint32_t ri = g->over_head, i = g->free_head;
		rec_t *r = &g->recs[ri];
		slot_t *s = &g->slots[i];

		g->over_head = r->next;
		if (g->over_head == NIL)
			g->over_tail = NIL;
		g->n_over--;
		g->free_head = s->next;
		s->handle = r->owner_h;
		s->request = r->request;
		s->charge = r->charge;
		s->rounds = 0;
		s->cancel = 0;
		s->rec = ri;
		s->state = S_WAITING;
		s->next = NIL;
		r->slot = i;
		if (r->cancel) {
			r->cancel = 0;
			g->n_over_cancel--;
			s->cancel = 1;
			g->n_cancel++;
		}
		if (g->wait_tail == NIL)
			g->wait_head = i;
		else
			g->slots[g->wait_tail].next = i;
		g->wait_tail = i;
		g->n_live++;
	}
}

/* The one exit of a live slot: counters, complete (exactly once), free. The
 * caller has already taken the slot out of the waiting FIFO or marked it
 * for removal from the active vector. */
static void finish(xtc_batch_t *g, slot_t *s, int outcome)
{
	uint64_t h = s->handle;
	void *req = s->request;

	if (s->state == S_READY || s->state == S_BLOCKED)
		g->resource_used -= s->charge;
	if (s->cancel)
		g->n_cancel--;
	s->state = S_FREE;
	s->cancel = 0;
	s->request = NULL;
	g->n_live--;
	ctr_add(&g->completed, 1);
	if (outcome == XTC_OK)
		ctr_add(&g->completed_ok, 1);
	else if (outcome == XTC_E_ABORTED)
		ctr_add(&g->aborted, 1);
	else
		ctr_add(&g->failed, 1);
	g->in_cb = 1;
	g->complete(h, req, outcome, g->user);
	g->in_cb = 0;
	/* free only after complete returned: capacity covers the callback */
	s->handle = 0;
	s->next = g->free_head;
	g->free_head = (uint32_t)(s - g->slots);
	if (s->rec != NIL) {
		uint32_t ri = s->rec;
		s->rec = NIL;
		rec_free(g, ri);
	}
}

/* Drop the FREE entries from the active vector, keeping admission order. */
static void compact(xtc_batch_t *g)
{
	size_t j = 0;

	for (size_t i = 0; i < g->n_act; i++)
		if (g->slots[g->act[i]].state != S_FREE)
			g->act[j++] = g->act[i];
	g->n_act = j;
}

/* Cancel requests and close(CANCEL), then FCFS admission. */
static void boundary(xtc_batch_t *g)
{
	int all;

	drain(g);
	all = g->closed == XTC_BATCH_CANCEL;
	if (all || g->n_over_cancel > 0) {
		uint32_t *link = &g->over_head, prev = NIL;

		while (*link != NIL) {
			uint32_t ri = *link;
			rec_t *r = &g->recs[ri];
			if (all || r->cancel) {
				*link = r->next;
				if (g->over_tail == ri)
					g->over_tail = prev;
				finish_rec(g, ri, XTC_E_ABORTED);
			} else {
				prev = ri;
				link = &r->next;
			}
		}
	}
	promote(g);
	if (all || g->n_cancel > 0) {
		uint32_t *link = &g->wait_head, prev = NIL;

		while (*link != NIL) {
			uint32_t i = *link;
			slot_t *s = &g->slots[i];
			if (all || s->cancel) {
				*link = s->next;
				if (g->wait_tail == i)
					g->wait_tail = prev;
				finish(g, s, XTC_E_ABORTED);
			} else {
				prev = i;
				link = &s->next;
			}
		}
		for (size_t k = 0; k < g->n_act; k++) {
			slot_t *s = &g->slots[g->act[k]];
			if (s->state != S_FREE && (all || s->cancel))
				finish(g, s, XTC_E_ABORTED);
		}
		compact(g);
		promote(g);
	}
	while (g->wait_head != NIL && g->n_act < g->max_active) {
		slot_t *s = &g->slots[g->wait_head];
		if (s->charge > g->resource_capacity - g->resource_used)
			break; /* strict FCFS: nothing passes the head */
		g->wait_head = s->next;
		if (g->wait_head == NIL)
			g->wait_tail = NIL;
		s->state = S_READY;
		g->resource_used += s->charge;
		g->act[g->n_act++] = (uint32_t)(s - g->slots);
		ctr_add(&g->admitted, 1);
	}
	publish(g);
}

/* One step over the READY members; returns how many there were. */
static size_t iterate(xtc_batch_t *g)
{
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < g->n_act; i++) {
		uint32_t si = g->act[i];
		slot_t *s = &g->slots[si];
		if (s->state != S_READY)
			continue;
		g->items[n].handle = s->handle;
		g->items[n].request = s->request;
		g->items[n].charge = s->charge;
		g->items[n].rounds = s->rounds;
		g->results[n].state = XTC_BATCH_CONTINUE;
		g->results[n].error = 0;
		g->vslot[n] = si;
		n++;
	}
	if (n == 0)
		return 0;
	g->in_cb = 1;
	rc = g->step(g->items, g->results, n, g->user);
	g->in_cb = 0;
	ctr_add(&g->iterations, 1);
	ctr_add(&g->member_rounds, n);
	if (rc > 0)
		rc = XTC_E_INTERNAL;
	for (size_t k = 0; k < n; k++) {
		slot_t *s = &g->slots[g->vslot[k]];
		const xtc_batch_result_t *r = &g->results[k];
		s->rounds++;
		if (rc != XTC_OK) {
			finish(g, s, rc);
			continue;
		}
		switch (r->state) {
		case XTC_BATCH_CONTINUE:
			break;
		case XTC_BATCH_DONE:
			finish(g, s, XTC_OK);
			break;
		case XTC_BATCH_BLOCKED:
			s->state = S_BLOCKED;
			break;
		case XTC_BATCH_ERROR:
			finish(g, s, r->error < 0 ? r->error : XTC_E_INTERNAL);
			break;
		default:
			finish(g, s, XTC_E_INVAL);
			break;
		}
	}
	compact(g);
	return n;
}

/* ---- async offload ------------------------------------------------------ */

/* Shared by the driver and the continuation of one FUTURE/BLOCKING op: the
 * op may outlive the wait (timeout, abort), so it owns its state; the last
 * of the two references frees it. */
typedef struct optok {
	_Atomic int refs;
	_Atomic int done;
	int status;
	xtc_batch_t *g;
	int (*fn)(void *);
	void *arg;
} optok_t;

static void tok_unref(optok_t *t)
{
	if (atomic_fetch_sub(&t->refs, 1) == 1)
		xtc_free(t);
}

static void tok_finish(optok_t *t, int status)
{
	xtc_batch_t *g = t->g;

	t->status = status;
	atomic_store_explicit(&t->done, 1, memory_order_release);
	/* the header is never freed (shells): a late wake is harmless */
	wake_driver_mt(g);
	tok_unref(t);
}

static intptr_t tok_future_cb(intptr_t value, int status, void *user)
{
	tok_finish(user, status);
	return value;
}

static int tok_blocking_cb(void *arg)
{
	optok_t *t = arg;
	int r = t->fn(t->arg);

	tok_finish(t, r > 0 ? 0 : r);
	return 0;
}

/* cancel_hint for every in-flight member whose cancel arrived. */
static void hint_cancels(xtc_batch_t *g, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		slot_t *s = &g->slots[g->vslot[k]];
		if (s->cancel && !s->hinted) {
			s->hinted = 1;
			if (g->a_hint != NULL) {
				g->in_cb = 1;
				g->a_hint(s->handle, s->request, g->user);
				g->in_cb = 0;
			}
		}
	}
}

/* Await the op without stalling the loop: the driver parks (on the fence
 * fd for FENCE) and is woken by the op, a cancel, a close or a kill. */
static int exec_wait(xtc_batch_t *g, const xtc_batch_exec_t *ex,
                     optok_t *tok, size_t n)
{
	xtc_task_t *t = xtc__task_current();
	int64_t deadline = 0;
	int fence = ex->kind == XTC_BATCH_EXEC_FENCE;
	int timed = g->exec_timeout > 0 && ex->kind != XTC_BATCH_EXEC_BLOCKING;

	if (timed)
		deadline = xtc__deadline_after(xtc_clock_mono(), g->exec_timeout);
	for (;;) {
		int64_t left = -1;
		uint32_t rev = 0;
		int rc, one;

		drain(g);
		hint_cancels(g, n);
		if (g->closed == XTC_BATCH_CANCEL ||
		    atomic_load_explicit(&t->kill_pending,
		                         memory_order_relaxed))
			return XTC_E_ABORTED;
		if (!fence && atomic_load_explicit(&tok->done,
		                                   memory_order_acquire))
			return tok->status;
		if (timed) {
			left = deadline - xtc_clock_mono();
			if (left <= 0)
				return XTC_E_AGAIN; /* timed out */
		}
		atomic_store(&g->parked, 1);
		if (mq_ready(&g->inq) ||
		    (!fence && atomic_load(&tok->done))) {
			one = 1;
			if (atomic_compare_exchange_strong(&g->parked, &one, 0))
				continue;
		}
		rc = xtc__park_ex(left, fence ? ex->fd : -1,
		                  fence ? XTC_IO_READABLE : 0, &rev,
		                  XTC__PARK_NOKILL);
		one = 1;
		(void)atomic_compare_exchange_strong(&g->parked, &one, 0);
		if (fence) {
			if (rc == XTC_OK && (rev & XTC_IO_READABLE))
				return XTC_OK;
			if (rc != XTC_OK && rc != XTC_E_AGAIN)
				return rc; /* the fd could not be awaited */
		}
	}
}

/* Check *ex and start awaiting it: XTC_OK (tok set for FUTURE/BLOCKING)
 * or the code every member completes with. */
static int exec_start(xtc_batch_t *g, xtc_batch_exec_t *ex, optok_t **tokp)
{
	optok_t *tok;
	xtc_future_t *mapped = NULL;
	int rc;

	*tokp = NULL;
	switch (ex->kind) {
	case XTC_BATCH_EXEC_SYNC:
		return XTC_OK;
	case XTC_BATCH_EXEC_FENCE:
		if (xtc__up.clock != NULL)
			return XTC_E_NOSYS; /* virtual time (the sim): no fd readiness */
		if (ex->fd < 0 || fcntl(ex->fd, F_GETFD) < 0)
			return XTC_E_INVAL;
		return XTC_OK;
	case XTC_BATCH_EXEC_FUTURE:
		if (ex->future == NULL)
			return XTC_E_INVAL;
		break;
	case XTC_BATCH_EXEC_BLOCKING:
		if (ex->fn == NULL)
			return XTC_E_INVAL;
		break;
	default:
		return XTC_E_INVAL;
	}
	tok = xtc_calloc(1, sizeof *tok);
	if (tok == NULL) {
		if (ex->kind == XTC_BATCH_EXEC_FUTURE)
			xtc_future_drop(ex->future);
		return XTC_E_NOMEM;
	}
	atomic_store(&tok->refs, 2);
	tok->g = g;
	tok->fn = ex->fn;
	tok->arg = ex->arg;
	if (ex->kind == XTC_BATCH_EXEC_FUTURE) {
		rc = xtc_future_map(ex->future, tok_future_cb, tok, &mapped);
		if (rc != XTC_OK) {
			xtc_future_drop(ex->future);
			xtc_free(tok);
			return rc;
		}
		xtc_future_drop(mapped);
	} else {
		rc = xtc_blocking_submit(tok_blocking_cb, tok);
		if (rc != XTC_OK) {
			xtc_free(tok);
			return rc; /* no pool thread */
		}
	}
	*tokp = tok;
	return XTC_OK;
}

/* The async iteration: submit, await, collect (or end every member
 * terminal). Returns the vector size. */
static size_t iterate_async(xtc_batch_t *g)
{
	xtc_batch_exec_t ex;
	optok_t *tok = NULL;
	size_t n = 0;
	int rc, status = XTC_OK;

	for (size_t i = 0; i < g->n_act; i++) {
		uint32_t si = g->act[i];
		slot_t *s = &g->slots[si];
		if (s->state != S_READY)
			continue;
		g->items[n].handle = s->handle;
		g->items[n].request = s->request;
		g->items[n].charge = s->charge;
		g->items[n].rounds = s->rounds;
		g->results[n].state = XTC_BATCH_CONTINUE;
		g->results[n].error = 0;
		g->vslot[n] = si;
		s->hinted = 0;
		n++;
	}
	if (n == 0)
		return 0;
	memset(&ex, 0, sizeof ex);
	ex.fd = -1;
	g->in_cb = 1;
	rc = g->a_submit(g->items, n, &ex, g->user);
	g->in_cb = 0;
	ctr_add(&g->iterations, 1);
	ctr_add(&g->member_rounds, n);
	if (rc > 0)
		rc = XTC_E_INTERNAL;
	if (rc == XTC_OK)
		rc = exec_start(g, &ex, &tok);
	else if (ex.kind == XTC_BATCH_EXEC_FUTURE && ex.future != NULL)
		xtc_future_drop(ex.future); /* a failed submit's future */
	if (rc == XTC_OK && ex.kind != XTC_BATCH_EXEC_SYNC) {
		status = exec_wait(g, &ex, tok, n);
		if (tok != NULL)
			tok_unref(tok);
		if (status > 0)
			status = XTC_OK;
	}
	if (rc == XTC_OK && status >= 0) {
		g->in_cb = 1;
		rc = g->a_collect(g->items, g->results, n, status, g->user);
		g->in_cb = 0;
		if (rc > 0)
			rc = XTC_E_INTERNAL;
	} else if (rc == XTC_OK) {
		rc = status; /* timeout, abort, failed op: terminal */
	}
	for (size_t k = 0; k < n; k++) {
		slot_t *s = &g->slots[g->vslot[k]];
		const xtc_batch_result_t *r = &g->results[k];
		s->rounds++;
		if (rc != XTC_OK) {
			finish(g, s, rc);
			continue;
		}
		if (s->cancel) { /* consumed at the completion boundary */
			finish(g, s, XTC_E_ABORTED);
			continue;
		}
		switch (r->state) {
		case XTC_BATCH_CONTINUE:
			break;
		case XTC_BATCH_DONE:
			finish(g, s, XTC_OK);
			break;
		case XTC_BATCH_BLOCKED:
			s->state = S_BLOCKED;
			break;
		case XTC_BATCH_ERROR:
			finish(g, s, r->error < 0 ? r->error : XTC_E_INTERNAL);
			break;
		default:
			finish(g, s, XTC_E_INVAL);
			break;
		}
	}
	compact(g);
	return n;
}

static int any_ready(const xtc_batch_t *g)
{
	for (size_t i = 0; i < g->n_act; i++)
		if (g->slots[g->act[i]].state == S_READY)
			return 1;
	return 0;
}

/* The driver will not run again: no hand-in may wake it any more. */
static void driver_end(xtc_batch_t *g)
{
	atomic_store(&g->parked, 2);
	while (atomic_load(&g->wakers) != 0)
		(void)xtc__fiber_yield_ex(XTC__PARK_NOKILL);
}

/* The driver proc. Kills are taken at boundaries (NOKILL parks/yields), so
 * a killed driver still completes every accepted request (ABORTED). */
static void drive(void *arg)
{
	xtc_batch_t *g = arg;
	xtc_task_t *t = xtc__task_current();

	g->driver_task = t;
	for (;;) {
		if (atomic_load_explicit(&t->kill_pending,
		                         memory_order_relaxed) &&
		    g->closed != XTC_BATCH_CANCEL) {
			g->closed = XTC_BATCH_CANCEL;
			atomic_store(&g->closed_pub, g->closed);
		}
		boundary(g);
		if (any_ready(g)) {
			if (g->step != NULL)
				iterate(g);
			else
				(void)iterate_async(g);
			/* the step's BLOCKED/DONE results, before the yield:
			 * the lane policy runs while the driver waits, and
			 * must not see members ready that no longer are */
			publish(g);
			(void)xtc__fiber_yield_ex(XTC__PARK_NOKILL);
			continue;
		}
		if (g->closed && g->n_live == 0 && g->n_over == 0 &&
		    atomic_load(&g->mt_pend) == 0 && !mq_ready(&g->inq))
			break;
		atomic_store(&g->parked, 1);
		if (mq_ready(&g->inq) ||
		    (g->closed && g->n_live == 0 && g->n_over == 0 &&
		     atomic_load(&g->mt_pend) == 0)) {
			int one = 1;
			if (atomic_compare_exchange_strong(&g->parked, &one, 0))
				continue;
			/* a hand-in took the flag: park to absorb its wake */
		}
		(void)xtc__park_ex(-1, -1, 0, NULL, XTC__PARK_NOKILL);
		{
			int one = 1;
			(void)atomic_compare_exchange_strong(&g->parked, &one,
			                                     0);
		}
	}
	driver_end(g);
	publish(g);
	if (g->registered) {
		xtc__sched_batch_unregister(g->loop, g->lane);
		g->registered = 0;
	}
	g->driver_task = NULL;
	atomic_store_explicit(&g->driver_alive, 0, memory_order_release);
}

/* ---- public API --------------------------------------------------------- */

/* Bytes of the version-1 options (through .name). */
#define OPTS_V1_SIZE (offsetof(xtc_batch_opts_t, name) + sizeof(const char *))

static int opts_check(const xtc_batch_opts_t *o)
{
	if (o->version < 1 || o->version > XTC_BATCH_VERSION ||
	    o->size < OPTS_V1_SIZE)
		return XTC_E_VERSION;
	/* a newer caller's trailing fields must be unused (zero) */
	for (size_t i = sizeof *o; i < o->size; i++)
		if (((const unsigned char *)o)[i] != 0)
			return XTC_E_VERSION;
	if (o->flags != 0 || o->complete == NULL)
		return XTC_E_INVAL;
	if (o->capacity == 0 || o->max_active == 0 ||
	    o->resource_capacity == 0)
		return XTC_E_INVAL;
	if (o->capacity > XTC_BATCH_MAX_CAPACITY ||
	    o->max_active > XTC_BATCH_MAX_ACTIVE ||
	    o->max_active > o->capacity)
		return XTC_E_RANGE;
	return XTC_OK;
}

static int create_common(xtc_loop_t *loop, const xtc_batch_opts_t *opts,
                         const xtc_batch_async_opts_t *ao, xtc_batch_t **out);

int xtc_batch_create(xtc_loop_t *loop, const xtc_batch_opts_t *opts,
                     xtc_batch_t **out)
{
	if (out != NULL)
		*out = NULL;
	if (opts != NULL && opts->step == NULL)
		return XTC_E_INVAL;
	return create_common(loop, opts, NULL, out);
}

#define AOPTS_V1_SIZE (offsetof(xtc_batch_async_opts_t, exec_timeout_ns) + \
                       sizeof(int64_t))

int xtc_batch_create_async(xtc_loop_t *loop, const xtc_batch_opts_t *opts,
                           const xtc_batch_async_opts_t *ao,
                           xtc_batch_t **out)
{
	if (out != NULL)
		*out = NULL;
	if (ao == NULL || opts == NULL)
		return XTC_E_INVAL;
	if (ao->version < 1 || ao->version > XTC_BATCH_ASYNC_VERSION ||
	    ao->size < AOPTS_V1_SIZE)
		return XTC_E_VERSION;
	for (size_t i = sizeof *ao; i < ao->size; i++)
		if (((const unsigned char *)ao)[i] != 0)
			return XTC_E_VERSION;
	if (ao->flags != 0 || ao->submit == NULL || ao->collect == NULL ||
	    ao->exec_timeout_ns < 0 || opts->step != NULL)
		return XTC_E_INVAL;
	return create_common(loop, opts, ao, out);
}

static int create_common(xtc_loop_t *loop, const xtc_batch_opts_t *opts,
                         const xtc_batch_async_opts_t *ao, xtc_batch_t **out)
{
	xtc_proc_opts_t po;
	xtc_batch_t *g;
	size_t cap, na, off_act, off_vs, off_it, off_rs, off_rec, off_q, total;
	uint32_t np;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (loop == NULL || opts == NULL || out == NULL ||
	    atomic_load_explicit(&loop->magic, memory_order_acquire) !=
	            XTC__LOOP_LIVE)
		return XTC_E_INVAL;
	rc = opts_check(opts);
	if (rc != XTC_OK)
		return rc;
	if (xtc__class_check(loop, opts->sched_class) != XTC_OK)
		return XTC_E_INVAL;
	if (atomic_load_explicit(&loop->started, memory_order_acquire))
		return XTC_E_AGAIN;

	cap = opts->capacity;
	na = opts->max_active;
	off_act = cap * sizeof(slot_t);
	off_vs = off_act + na * sizeof(uint32_t);
	off_it = (off_vs + na * sizeof(uint32_t) + 15) & ~(size_t)15;
	off_rs = off_it + na * sizeof(xtc_batch_item_t);
	off_rec = (off_rs + na * sizeof(xtc_batch_result_t) + 63) & ~(size_t)63;
	np = MT_MIN;
	while (np < cap && np < MT_MAX)
		np <<= 1;
	off_q = off_rec + (size_t)np * sizeof(rec_t);
	total = off_q + (size_t)np * 3 * sizeof(qcell_t);

	g = shell_get();
	if (g == NULL)
		return XTC_E_NOMEM;
	g->mem = xtc_calloc(1, total);
	if (g->mem == NULL) {
		shell_put(g);
		return XTC_E_NOMEM;
	}
	g->slots = g->mem;
	g->act = (uint32_t *)((char *)g->mem + off_act);
	g->vslot = (uint32_t *)((char *)g->mem + off_vs);
	g->items = (xtc_batch_item_t *)((char *)g->mem + off_it);
	g->results = (xtc_batch_result_t *)((char *)g->mem + off_rs);
	for (size_t i = 0; i < cap; i++) {
		g->slots[i].next = i + 1 < cap ? (uint32_t)(i + 1) : NIL;
		g->slots[i].rec = NIL;
	}
	g->recs = (rec_t *)((char *)g->mem + off_rec);
	g->n_recs = np;
	mq_init(&g->inq, (qcell_t *)((char *)g->mem + off_q), (uint64_t)np * 2);
	mq_init(&g->freeq, (qcell_t *)((char *)g->mem + off_q) + (size_t)np * 2,
	        np);
	for (uint32_t i = 0; i < np; i++) {
		g->recs[i].slot = NIL;
		(void)mq_push(&g->freeq, i, 0);
	}
	g->over_head = g->over_tail = NIL;
	g->rec_defer = NIL;
	g->free_head = 0;
	g->wait_head = g->wait_tail = NIL;
	g->loop = loop;
	g->loop_id = loop->id;
	g->capacity = cap;
	g->max_active = na;
	g->resource_capacity = opts->resource_capacity;
	g->step = opts->step;
	if (ao != NULL) {
		g->a_submit = ao->submit;
		g->a_collect = ao->collect;
		g->a_hint = ao->cancel_hint;
		g->exec_timeout = ao->exec_timeout_ns;
	}
	g->complete = opts->complete;
	g->user = opts->user;
	g->lane = xtc__class_index(opts->sched_class);
	atomic_store_explicit(&g->seq, 1, memory_order_relaxed);

	if (g->lane >= 0 && class_taken(loop, g->lane)) {
		xtc_free(g->mem);
		shell_put(g);
		return XTC_E_AGAIN; /* one group per explicit class */
	}
	rc = xtc__sched_batch_register(loop, g->lane);
	if (rc != XTC_OK) {
		xtc_free(g->mem);
		shell_put(g);
		return rc;
	}
	g->registered = 1;

	memset(&po, 0, sizeof po);
	po.name = opts->name != NULL ? opts->name : "xtc_batch";
	po.migratable = 0;
	po.sched_class = opts->sched_class;
	atomic_store_explicit(&g->driver_alive, 1, memory_order_relaxed);
	rc = xtc_proc_spawn(loop, drive, g, &po, &g->driver);
	if (rc != XTC_OK) {
		if (g->registered)
			xtc__sched_batch_unregister(loop, g->lane);
		xtc_free(g->mem);
		shell_put(g);
		return rc;
	}
	atomic_store_explicit(&g->magic, GROUP_LIVE, memory_order_release);
	live_add(g);
	*out = g;
	return XTC_OK;
}

int xtc_batch_submit(xtc_batch_t *g, void *request, uint64_t charge,
                     uint64_t *out_handle)
{
	uint32_t i;
	slot_t *s;
	int rc;

	if (out_handle != NULL)
		*out_handle = 0;
	rc = mutator_gate(g);
	if (rc != XTC_OK)
		return rc;
	if (out_handle == NULL)
		return XTC_E_INVAL;
	if (charge > g->resource_capacity)
		return XTC_E_RANGE;
	if (g->closed || g->free_head == NIL || g->n_over > 0) {
		ctr_add(&g->refused, 1);
		return XTC_E_AGAIN;
	}
	i = g->free_head;
	s = &g->slots[i];
	g->free_head = s->next;
	s->handle = (atomic_fetch_add_explicit(&g->seq, 1,
	                                       memory_order_relaxed)
	             << SLOT_BITS) | i;
	s->request = request;
	s->charge = charge;
	s->rounds = 0;
	s->cancel = 0;
	s->rec = NIL;
	s->state = S_WAITING;
	s->next = NIL;
	if (g->wait_tail == NIL)
		g->wait_head = i;
	else
		g->slots[g->wait_tail].next = i;
	g->wait_tail = i;
	g->n_live++;
	ctr_add(&g->accepted, 1);
	ctr_set(&g->waiting, g->n_live - g->n_act);
	*out_handle = s->handle;
	wake_driver(g);
	return XTC_OK;
}

int xtc_batch_cancel(xtc_batch_t *g, uint64_t handle)
{
	slot_t *s;
	int rc = mutator_gate(g);

	if (rc != XTC_OK)
		return rc;
	if (handle == 0)
		return XTC_E_INVAL;
	if (handle & XTC_BATCH_MT_HANDLE)
		drain(g);
	s = lookup(g, handle);
	if (s == NULL) {
		rec_t *r = lookup_rec(g, handle);
		if (r == NULL)
			return XTC_E_NOTFOUND;
		if (!r->cancel) { /* still waiting for a slot */
			r->cancel = 1;
			g->n_over_cancel++;
			wake_driver(g);
		}
		return XTC_OK;
	}
	if (!s->cancel) {
		s->cancel = 1;
		g->n_cancel++;
		wake_driver(g);
	}
	return XTC_OK;
}

int xtc_batch_resume(xtc_batch_t *g, uint64_t handle)
{
	slot_t *s;
	int rc = mutator_gate(g);

	if (rc != XTC_OK)
		return rc;
	if (handle == 0)
		return XTC_E_INVAL;
	if (handle & XTC_BATCH_MT_HANDLE)
		drain(g);
	s = lookup(g, handle);
	if (s == NULL)
		return lookup_rec(g, handle) != NULL ? XTC_OK : XTC_E_NOTFOUND;
	if (s->state == S_BLOCKED) {
		s->state = S_READY;
		publish(g);
		wake_driver(g);
	}
	return XTC_OK;
}

int xtc_batch_close(xtc_batch_t *g, unsigned mode)
{
	int rc = mutator_gate(g);

	if (rc != XTC_OK)
		return rc;
	if (mode != XTC_BATCH_DRAIN && mode != XTC_BATCH_CANCEL)
		return XTC_E_INVAL;
	if (g->closed != XTC_BATCH_CANCEL)
		g->closed = mode;
	atomic_store(&g->closed_pub, g->closed);
	wake_driver(g);
	return XTC_OK;
}

/* The driver proc died without reaching the end of drive(): killed before
 * its first run, or inside a callback that yielded. Whoever notices (destroy,
 * on the owner side) completes what is left, ABORTED, exactly once. */
static void reap_dead_driver(xtc_batch_t *g)
{
	xtc_proc_info_t info;

	if (!atomic_load_explicit(&g->driver_alive, memory_order_acquire) ||
	    xtc_proc_info(g->driver, &info) == XTC_OK)
		return;
	g->in_cb = 0;
	atomic_store(&g->parked, 2);
	while (atomic_load(&g->wakers) != 0)
		sched_yield();
	g->driver_task = NULL;
	g->closed = XTC_BATCH_CANCEL;
	atomic_store(&g->closed_pub, g->closed);
	boundary(g);
	if (g->registered) {
		xtc__sched_batch_unregister(g->loop, g->lane);
		g->registered = 0;
	}
	atomic_store_explicit(&g->driver_alive, 0, memory_order_release);
}

int xtc_batch_destroy(xtc_batch_t *g)
{
	if (!group_live(g))
		return XTC_E_INVAL;
	if (loop_alive(g)) {
		int rc;
		if (!on_owner(g))
			return XTC_E_INVAL;
		reap_dead_driver(g);
		rc = mutator_gate(g);
		if (rc != XTC_OK)
			return rc;
		if (atomic_load_explicit(&g->driver_alive,
		                         memory_order_acquire))
			return XTC_E_AGAIN;
		/* hand-ins that raced a reaped driver: abort them now */
		if (atomic_load(&g->mt_calls) != 0)
			return XTC_E_AGAIN;
		if (mq_ready(&g->inq) || g->n_over > 0 || g->n_live > 0) {
			g->closed = XTC_BATCH_CANCEL;
			boundary(g);
		}
	}
	/* no mt call may be inside the group's memory when it goes: shut
	 * the gate in the one step that sees it idle. (It stored DEAD, saw a
	 * call in flight and stored LIVE back: a call entering in between
	 * was told XTC_E_INVAL, "bad group", of a live group.) */
	uint64_t idle = 0;
	if (!atomic_compare_exchange_strong(&g->mt_calls, &idle, MT_SHUT))
		return XTC_E_AGAIN;
	atomic_store(&g->magic, GROUP_DEAD);
	/* else the loop was finalised under the group (a usage error): its
	 * driver was abandoned with it; free what is ours */
	live_del(g);
	xtc_free(g->mem);
	g->mem = NULL;
	shell_put(g);
	return XTC_OK;
}

int xtc_batch_get_stats(const xtc_batch_t *cg, xtc_batch_stats_t *out)
{
	xtc_batch_t *g = (xtc_batch_t *)cg;

	if (out == NULL || !group_usable(g))
		return XTC_E_INVAL;
	memset(out, 0, sizeof *out);
	out->accepted = ctr_ld(&g->accepted);
	out->refused = ctr_ld(&g->refused) +
	               atomic_load_explicit(&g->mt_refused,
	                                    memory_order_relaxed);
	out->admitted = ctr_ld(&g->admitted);
	out->completed = ctr_ld(&g->completed);
	out->completed_ok = ctr_ld(&g->completed_ok);
	out->aborted = ctr_ld(&g->aborted);
	out->failed = ctr_ld(&g->failed);
	out->iterations = ctr_ld(&g->iterations);
	out->member_rounds = ctr_ld(&g->member_rounds);
	out->deadlk = ctr_ld(&g->deadlk);
	out->waiting = ctr_ld(&g->waiting);
	out->active = ctr_ld(&g->active);
	out->blocked = ctr_ld(&g->blocked);
	out->resource_used = ctr_ld(&g->resource_pub);
	out->peak_active = ctr_ld(&g->peak_active);
	out->closed = atomic_load_explicit(&g->closed_pub,
	                                   memory_order_relaxed);
	out->driver_alive = atomic_load_explicit(&g->driver_alive,
	                                         memory_order_acquire);
	out->driver = g->driver;
	return XTC_OK;
}

/* ---- cross-thread admission -------------------------------------------- */

/* Entry of every mt call: counts it in mt_calls (destroy waits for it)
 * before it looks at the group. */
static int mt_enter(xtc_batch_t *g)
{
	if (g == NULL)
		return XTC_E_INVAL;
	uint64_t v = atomic_fetch_add(&g->mt_calls, 1);
	if ((v & MT_SHUT) || !group_usable(g)) {
		atomic_fetch_sub(&g->mt_calls, 1);
		return XTC_E_INVAL;
	}
	return XTC_OK;
}

static int mt_leave(xtc_batch_t *g, int rc)
{
	atomic_fetch_sub_explicit(&g->mt_calls, 1, memory_order_release);
	return rc;
}

int xtc_batch_submit_mt(xtc_batch_t *g, void *request, uint64_t charge,
                        uint64_t *out_handle)
{
	uint64_t ri, h;
	rec_t *r;
	int rc;

	if (out_handle != NULL)
		*out_handle = 0;
	rc = mt_enter(g);
	if (rc != XTC_OK)
		return rc;
	if (out_handle == NULL)
		return mt_leave(g, XTC_E_INVAL);
	if (charge > g->resource_capacity)
		return mt_leave(g, XTC_E_RANGE);
	atomic_fetch_add(&g->mt_pend, 1);
	if (atomic_load(&g->closed_pub) != 0 ||
	    atomic_load(&g->parked) == 2)
		goto refuse;
	if (!mq_pop(&g->freeq, &ri, NULL))
		goto refuse;
	r = &g->recs[ri];
	/* the record's own generation, not the shared counter: one RMW less
	 * per hand-in, and still never the same handle twice */
	h = XTC_BATCH_MT_HANDLE | ((++r->gen & MT_SEQ_MASK) << SLOT_BITS) | ri;
	r->p_handle = h;
	r->request = request;
	r->charge = charge;
	if (!mq_push(&g->inq, h, OP_SUBMIT)) {
		/* the record goes back; like rec_free's push, this one can
		 * find its cell still held by a descheduled popper: wait for
		 * it (rare: the ring was full too) rather than leak it */
		while (!mq_push(&g->freeq, ri, 0))
			sched_yield();
		goto refuse;
	}
	*out_handle = h;
	wake_driver_mt(g);
	return mt_leave(g, XTC_OK);
refuse:
	atomic_fetch_sub(&g->mt_pend, 1);
	atomic_fetch_add_explicit(&g->mt_refused, 1, memory_order_relaxed);
	wake_driver_mt(g); /* a closing driver may be waiting for mt_pend */
	return mt_leave(g, XTC_E_AGAIN);
}

static int mt_op(xtc_batch_t *g, uint64_t handle, uint32_t op)
{
	int rc = mt_enter(g);

	if (rc != XTC_OK)
		return rc;
	if (handle == 0)
		return mt_leave(g, XTC_E_INVAL);
	if (atomic_load(&g->parked) == 2 ||
	    !atomic_load_explicit(&g->driver_alive, memory_order_acquire))
		return mt_leave(g, XTC_E_AGAIN);
	if (!mq_push(&g->inq, handle, op))
		return mt_leave(g, XTC_E_AGAIN);
	wake_driver_mt(g);
	return mt_leave(g, XTC_OK);
}

int xtc_batch_cancel_mt(xtc_batch_t *g, uint64_t handle)
{
	return mt_op(g, handle, OP_CANCEL);
}

int xtc_batch_resume_mt(xtc_batch_t *g, uint64_t handle)
{
	return mt_op(g, handle, OP_RESUME);
}

long xtc_batch_mt_capacity(const xtc_batch_t *cg)
{
	xtc_batch_t *g = (xtc_batch_t *)cg;

	if (!group_usable(g))
		return XTC_E_INVAL;
	return (long)g->n_recs;
}

/* ---- placement: xtc_batch_loop_for_device lives in exec.c (the executor
 * knows its carriers); the router is here ---------------------------------- */

#define ROUTER_LIVE 0x524f5554u /* "ROUT" */

/* Router headers are never freed (kept as shells, like group headers), so
 * a route after destroy reads a DEAD magic, not freed memory. */
struct xtc_batch_router {
	_Atomic uint32_t magic;
	xtc_batch_router_t *shell_next;
	size_t n;
	xtc_batch_t **groups;
};

static xtc_batch_router_t *router_shells;

int xtc_batch_router_create(xtc_batch_t *const *groups, size_t n,
                            xtc_batch_router_t **out)
{
	xtc_batch_router_t *r;

	if (out != NULL)
		*out = NULL;
	if (groups == NULL || out == NULL || n == 0)
		return XTC_E_INVAL;
	if (n > XTC_BATCH_ROUTER_MAX)
		return XTC_E_RANGE;
	for (size_t i = 0; i < n; i++)
		if (!group_usable(groups[i]))
			return XTC_E_INVAL;
	pthread_mutex_lock(&shells_mu);
	r = router_shells;
	if (r != NULL)
		router_shells = r->shell_next;
	pthread_mutex_unlock(&shells_mu);
	if (r == NULL && (r = xtc_calloc(1, sizeof *r)) == NULL)
		return XTC_E_NOMEM;
	r->groups = xtc_calloc(n, sizeof *r->groups);
	if (r->groups == NULL) {
		pthread_mutex_lock(&shells_mu);
		r->shell_next = router_shells;
		router_shells = r;
		pthread_mutex_unlock(&shells_mu);
		return XTC_E_NOMEM;
	}
	memcpy(r->groups, groups, n * sizeof *groups);
	r->n = n;
	atomic_store_explicit(&r->magic, ROUTER_LIVE, memory_order_release);
	*out = r;
	return XTC_OK;
}

/* Lamping and Veach's jump consistent hash: bucket in [0, n). */
static size_t jump_hash(uint64_t key, size_t n)
{
	int64_t b = -1, j = 0;

	while (j < (int64_t)n) {
		b = j;
		key = key * 2862933555777941757ull + 1;
		j = (int64_t)((double)(b + 1) *
		              ((double)(1ll << 31) /
		               (double)((key >> 33) + 1)));
	}
	return (size_t)b;
}

int xtc_batch_router_route(const xtc_batch_router_t *cr, uint64_t key,
                           xtc_batch_t **out)
{
	xtc_batch_router_t *r = (xtc_batch_router_t *)cr;

	if (out != NULL)
		*out = NULL;
	if (r == NULL || out == NULL ||
	    atomic_load_explicit(&r->magic, memory_order_acquire) !=
	            ROUTER_LIVE)
		return XTC_E_INVAL;
	*out = r->groups[jump_hash(key, r->n)];
	return XTC_OK;
}

int xtc_batch_router_destroy(xtc_batch_router_t *r)
{
	uint32_t want = ROUTER_LIVE;

	if (r == NULL ||
	    !atomic_compare_exchange_strong(&r->magic, &want, GROUP_DEAD))
		return XTC_E_INVAL;
	/* route is read-only and may race destroy only as a usage error;
	 * the array goes, the header stays a shell */
	xtc_free(r->groups);
	r->groups = NULL;
	r->n = 0;
	pthread_mutex_lock(&shells_mu);
	r->shell_next = router_shells;
	router_shells = r;
	pthread_mutex_unlock(&shells_mu);
	return XTC_OK;
}

#else /* !XTC_SCHED_POLICY: the interface exists, the feature does not */

int xtc_batch_create(xtc_loop_t *loop, const xtc_batch_opts_t *opts,
                     xtc_batch_t **out)
{
	(void)loop;
	(void)opts;
	if (out != NULL)
		*out = NULL;
	return XTC_E_NOSYS;
}

int xtc_batch_submit(xtc_batch_t *g, void *request, uint64_t charge,
                     uint64_t *out_handle)
{
	(void)g;
	(void)request;
	(void)charge;
	if (out_handle != NULL)
		*out_handle = 0;
	return XTC_E_NOSYS;
}

int xtc_batch_cancel(xtc_batch_t *g, uint64_t handle)
{
	(void)g;
	(void)handle;
	return XTC_E_NOSYS;
}

int xtc_batch_resume(xtc_batch_t *g, uint64_t handle)
{
	(void)g;
	(void)handle;
	return XTC_E_NOSYS;
}

int xtc_batch_close(xtc_batch_t *g, unsigned mode)
{
	(void)g;
	(void)mode;
	return XTC_E_NOSYS;
}

int xtc_batch_destroy(xtc_batch_t *g)
{
	(void)g;
	return XTC_E_NOSYS;
}

int xtc_batch_get_stats(const xtc_batch_t *g, xtc_batch_stats_t *out)
{
	(void)g;
	(void)out;
	return XTC_E_NOSYS;
}

int xtc_batch_create_async(xtc_loop_t *loop, const xtc_batch_opts_t *opts,
                           const xtc_batch_async_opts_t *ao,
                           xtc_batch_t **out)
{
	(void)loop;
	(void)opts;
	(void)ao;
	if (out != NULL)
		*out = NULL;
	return XTC_E_NOSYS;
}

int xtc_batch_submit_mt(xtc_batch_t *g, void *request, uint64_t charge,
                        uint64_t *out_handle)
{
	(void)g;
	(void)request;
	(void)charge;
	if (out_handle != NULL)
		*out_handle = 0;
	return XTC_E_NOSYS;
}

int xtc_batch_cancel_mt(xtc_batch_t *g, uint64_t handle)
{
	(void)g;
	(void)handle;
	return XTC_E_NOSYS;
}

int xtc_batch_resume_mt(xtc_batch_t *g, uint64_t handle)
{
	(void)g;
	(void)handle;
	return XTC_E_NOSYS;
}

long xtc_batch_mt_capacity(const xtc_batch_t *g)
{
	(void)g;
	return XTC_E_NOSYS;
}


int xtc_batch_router_create(xtc_batch_t *const *groups, size_t n,
                            xtc_batch_router_t **out)
{
	(void)groups;
	(void)n;
	if (out != NULL)
		*out = NULL;
	return XTC_E_NOSYS;
}

int xtc_batch_router_route(const xtc_batch_router_t *r, uint64_t key,
                           xtc_batch_t **out)
{
	(void)r;
	(void)key;
	if (out != NULL)
		*out = NULL;
	return XTC_E_NOSYS;
}

int xtc_batch_router_destroy(xtc_batch_router_t *r)
{
	(void)r;
	return XTC_E_NOSYS;
}

#endif
