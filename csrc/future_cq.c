/*
 * future_cq.c - completion queues (xtc_cq_*, xtc_future_notify) and
 * dispatch (xtc_dispatch: run a function as a fiber on a loop, its result
 * a future). Together they are how a goroutine gets a C fiber's result
 * back: the Go wrapper dispatches, notifies a cq, and its netpoller reads
 * the cq's eventfd.
 *
 * Model:
 *  1. A cq is a bounded ring of (tag, value, status) entries with one
 *     consumer and any number of producers, plus an eventfd doorbell the
 *     consumer arms before it sleeps (xtc_cq_arm) and the first producer
 *     after the arm writes.
 *  2. A slot is reserved when a future is registered (xtc_future_notify:
 *     XTC_E_AGAIN when every slot is spoken for), so the push, made by
 *     whatever thread completes the future, can neither block nor fail.
 *  3. A dispatch is a fiber task plus a handle with two references (the
 *     fiber's cleanup hook and the caller's handle); the promise is set
 *     exactly once, by the body or, if it never ran or never finished,
 *     by the cleanup hook.
 *
 * Invariants: reserved counts registered plus unconsumed entries and never
 * exceeds the capacity; a cq is destroyed only with nothing reserved.
 *
 * Rejected: a locked queue for the completion queue (producers are C
 * carriers in the middle of a fiber's completion; a Vyukov-style sequence
 * ring with slots reserved at registration can neither block nor fail); a
 * cq entry allocated per completion (the ring is preallocated).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_future.h"
#include "future_int.h"
#include "loop_int.h"
#include "ring_int.h"

/* ------------------------------------------------------------------ */
/* completion queues                                                    */
/* ------------------------------------------------------------------ */

#define CQ_MAGIC 0x43514551u /* "CQEQ" */
#define CQ_MAX   (1u << 20)

typedef struct cq_slot {
	xtc__rcell_t rc; /* ring_int.h */
	xtc_cq_entry_t e;
} cq_slot_t;

struct xtc_cq {
	uint32_t magic;
	uint32_t mask;
	int fd;
	int fd_released;
	_Atomic uint64_t reserved;  /* registered + unconsumed entries */
	char pad0[64];
	_Atomic uint64_t tail;      /* producers */
	char pad1[64];
	uint64_t head;              /* consumer */
	_Atomic int armed;
	cq_slot_t *slots;
};

int xtc_cq_create(uint32_t capacity, xtc_cq_t **out)
{
	xtc_cq_t *cq;
	uint32_t cap = 1;

	if (out == NULL)
		return XTC_E_INVAL;
	if (capacity < 1 || capacity > CQ_MAX)
		return XTC_E_RANGE;
	while (cap < capacity)
		cap <<= 1;
	cq = calloc(1, sizeof(*cq));
	if (cq == NULL)
		return XTC_E_NOMEM;
	cq->slots = calloc(cap, sizeof(*cq->slots));
	if (cq->slots == NULL) {
		free(cq);
		return XTC_E_NOMEM;
	}
	xtc__ring_init(cq->slots, sizeof(*cq->slots), cap);
	cq->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cq->fd < 0) {
		free(cq->slots);
		free(cq);
		return errno == ENOMEM ? XTC_E_NOMEM : XTC_E_IO;
	}
	cq->mask = cap - 1;
	cq->magic = CQ_MAGIC;
	*out = cq;
	return 0;
}

static int cq_ok(const xtc_cq_t *cq)
{
	return cq != NULL && cq->magic == CQ_MAGIC;
}

int xtc_cq_destroy(xtc_cq_t *cq)
{
	if (!cq_ok(cq))
		return XTC_E_INVAL;
	if (atomic_load(&cq->reserved) != 0)
		return XTC_E_AGAIN;
	cq->magic = XTC__FUTURE_DEAD_MAGIC;
	if (!cq->fd_released)
		close(cq->fd);
	free(cq->slots);
	free(cq);
	return 0;
}

int xtc_cq_fd(const xtc_cq_t *cq)
{
	return cq_ok(cq) ? cq->fd : -1;
}

int xtc_cq_release_fd(xtc_cq_t *cq)
{
	if (!cq_ok(cq))
		return XTC_E_INVAL;
	cq->fd_released = 1;
	return 0;
}

/* Producer (any thread). A slot was reserved, so the ring has room: the
 * slot at pos was released by the consumer one lap ago. */
void xtc__cq_push(xtc_cq_t *cq, uint64_t tag, intptr_t value, int status)
{
	uint64_t pos;
	xtc__rcell_t *rc = xtc__ring_claim_reserved(&cq->tail, cq->slots,
	    sizeof(*cq->slots), cq->mask, &pos);
	cq_slot_t *s = (cq_slot_t *)rc;
	static const uint64_t one = 1;

	s->e.tag = tag;
	s->e.value = value;
	s->e.status = status;
	/* seq_cst: the Dekker with xtc_cq_arm (armed, then the slot) */
	xtc__ring_publish(rc, pos, memory_order_seq_cst);
	if (atomic_exchange(&cq->armed, 0)) {
		ssize_t n;
		do
			n = write(cq->fd, &one, sizeof(one));
		while (n < 0 && errno == EINTR);
	}
}

int xtc_cq_pop(xtc_cq_t *cq, xtc_cq_entry_t *out, int max)
{
	int n = 0;

	if (!cq_ok(cq) || out == NULL || max < 0)
		return XTC_E_INVAL;
	while (n < max) {
		xtc__rcell_t *rc = xtc__ring_peek(cq->slots, sizeof(*cq->slots),
		                                  cq->mask, cq->head);

		if (rc == NULL)
			break;
		out[n++] = ((cq_slot_t *)rc)->e;
		xtc__ring_release(rc, cq->head, cq->mask);
		cq->head++;
		atomic_fetch_sub(&cq->reserved, 1);
	}
	return n;
}

int xtc_cq_arm(xtc_cq_t *cq)
{
	xtc__rcell_t *rc;

	if (!cq_ok(cq))
		return XTC_E_INVAL;
	atomic_store(&cq->armed, 1);
	rc = xtc__ring_cell(cq->slots, sizeof(*cq->slots), cq->mask, cq->head);
	return atomic_load(&rc->seq) == cq->head + 1;
}

int xtc__cq_disarm(xtc_cq_t *cq)
{
	if (!cq_ok(cq))
		return XTC_E_INVAL;
	return atomic_exchange(&cq->armed, 0) != 0;
}

int xtc_future_notify(xtc_future_t *fut, xtc_cq_t *cq, uint64_t tag)
{
	int rc;

	if (!xtc__future_ok(fut) || !cq_ok(cq))
		return XTC_E_INVAL;
	if (atomic_fetch_add(&cq->reserved, 1) > cq->mask) {
		atomic_fetch_sub(&cq->reserved, 1);
		return XTC_E_AGAIN;
	}
	if ((rc = xtc__future_chain_cq(fut, cq, tag)) != 0) {
		atomic_fetch_sub(&cq->reserved, 1);
		return rc;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* dispatch                                                             */
/* ------------------------------------------------------------------ */

#define DISP_MAGIC 0x44495350u /* "DISP" */

/* Two references: the fiber (dropped by the task's cleanup hook, which the
 * loop calls at reap, and also when the task is released unrun or
 * unfinished at fini) and the handle. */
struct xtc_dispatch_handle {
	uint32_t magic;
	_Atomic int refs;
	_Atomic int cancelled;
	_Atomic int completed;
	int (*fn)(void *);
	xtc_coro_fn cfn;
	void *arg;
	xtc_promise_t *prom;
	xtc__post_t post;    /* cross-thread spawn request */
};

static void disp_unref(xtc_dispatch_handle_t *h)
{
	if (atomic_fetch_sub(&h->refs, 1) == 1) {
		h->magic = XTC__FUTURE_DEAD_MAGIC;
		free(h);
	}
}

/* Exactly once, whoever comes first: the body or the cleanup hook. */
static void disp_complete(xtc_dispatch_handle_t *h, intptr_t v, int status)
{
	if (atomic_exchange(&h->completed, 1) == 0)
		(void)xtc_promise_set(h->prom, v, status);
}

static void disp_body(void *arg)
{
	xtc_dispatch_handle_t *h = arg;
	intptr_t v;

	if (atomic_load(&h->cancelled)) {
		disp_complete(h, 0, XTC_E_ABORTED);
		return;
	}
	v = h->cfn != NULL ? h->cfn(h->arg) : (intptr_t)h->fn(h->arg);
	disp_complete(h, v, atomic_load(&h->cancelled) ? XTC_E_ABORTED : 0);
}

static void disp_cleanup(xtc_task_t *t, void *proc)
{
	xtc_dispatch_handle_t *h = t->arg;

	(void)proc;
	/* A fiber whose stack could not be mapped at its first run finishes
	 * unrun with the error as its result: report that (XTC_E_NOMEM), as
	 * an eager spawn failure would. Otherwise (fini) it was released
	 * unfinished. After disp_body completed, this changes nothing. */
	disp_complete(h, 0, t->result < 0 ? (int)t->result : XTC_E_ABORTED);
	disp_unref(h);
}

/* Loop thread: a dispatch from another thread is spawned here, so the
 * task and its stack come from this carrier's own caches (a foreign
 * thread's cache is always cold: the stacks are freed on the carrier). */
static void disp_spawn_post(xtc_loop_t *loop, xtc__post_t *p)
{
	xtc_dispatch_handle_t *h = (xtc_dispatch_handle_t *)
		((char *)p - offsetof(xtc_dispatch_handle_t, post));
	/* the dispatch's admission (dispatch_common) passes to the task */
	xtc__spawn_opts_t opts = { .cleanup = disp_cleanup, .admitted = 1 };
	int rc = XTC_E_ABORTED; /* loop finalised before it ran */

	if (loop->magic == XTC__LOOP_LIVE)
		rc = xtc__task_spawn_fiber(loop, disp_body, h, &opts, NULL);
	if (rc != 0) {
		xtc__loop_admit_done(loop);
		/* The future reports the spawn failure instead. */
		disp_complete(h, 0, rc);
		disp_unref(h);
	}
}

static int dispatch_common(xtc_loop_t *loop, int (*fn)(void *),
                           xtc_coro_fn cfn, void *arg,
                           xtc_future_t **out_future,
                           xtc_dispatch_handle_t **out_handle)
{
	xtc__spawn_opts_t opts = { .cleanup = disp_cleanup };
	xtc_dispatch_handle_t *h;
	xtc_future_t *f;
	int rc, remote;

	if (loop == NULL || (fn == NULL && cfn == NULL) || out_future == NULL)
		return XTC_E_INVAL;
	remote = !xtc__loop_on_owner_thread(loop);
	/* paced like every cross-thread spawn: XTC_E_AGAIN at the cap */
	if (remote && (rc = xtc__loop_admit(loop)) != XTC_OK)
		return rc;
	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		if (remote)
			xtc__loop_admit_done(loop);
		return XTC_E_NOMEM;
	}
	rc = xtc_future_new_pair(&h->prom, &f);
	if (rc != 0) {
		if (remote)
			xtc__loop_admit_done(loop);
		free(h);
		return rc;
	}
	h->magic = DISP_MAGIC;
	h->fn = fn;
	h->cfn = cfn;
	h->arg = arg;
	atomic_init(&h->refs, out_handle != NULL ? 2 : 1);
	/* Published before the spawn: the fiber may run (and finish) on its
	 * carrier before this call returns. From another thread the spawn
	 * itself is posted to the loop (see disp_spawn_post); a spawn error
	 * then completes the future instead of failing this call. */
	*out_future = f;
	if (out_handle != NULL)
		*out_handle = h;
	if (!remote) {
		rc = xtc__task_spawn_fiber(loop, disp_body, h, &opts, NULL);
	} else {
		h->post.fn = disp_spawn_post;
		rc = xtc__loop_post(loop, &h->post);
		if (rc != 0)
			xtc__loop_admit_done(loop);
	}
	if (rc != 0) {
		*out_future = NULL;
		if (out_handle != NULL)
			*out_handle = NULL;
		/* Nobody else saw these: free without completing. */
		xtc__future_pair_discard(f);
		free(h);
		return rc;
	}
	return 0;
}

int xtc_dispatch(xtc_loop_t *loop, int (*fn)(void *), void *arg,
                 xtc_future_t **out_future, xtc_dispatch_handle_t **out_handle)
{
	if (fn == NULL)
		return XTC_E_INVAL;
	return dispatch_common(loop, fn, NULL, arg, out_future, out_handle);
}

int xtc__dispatch_coro(xtc_loop_t *loop, xtc_coro_fn fn, void *arg,
                       xtc_future_t **out_future,
                       xtc_dispatch_handle_t **out_handle)
{
	if (fn == NULL)
		return XTC_E_INVAL;
	return dispatch_common(loop, NULL, fn, arg, out_future, out_handle);
}

int xtc_dispatch_cancel(xtc_dispatch_handle_t *h)
{
	if (h == NULL || h->magic != DISP_MAGIC)
		return XTC_E_INVAL;
	atomic_store(&h->cancelled, 1);
	disp_unref(h);
	return 0;
}

void xtc_dispatch_handle_free(xtc_dispatch_handle_t *h)
{
	if (h != NULL && h->magic == DISP_MAGIC)
		disp_unref(h);
}

int xtc_dispatch_cancelled(void)
{
	xtc_task_t *t = xtc__task_current();

	if (t == NULL || !t->is_fiber || t->body != disp_body)
		return 0;
	return atomic_load(&((xtc_dispatch_handle_t *)t->arg)->cancelled);
}

/* libxtc's xtc_cancel_requested (xtc_proc.h): here because a dispatch is
 * a services-layer concept; the kill flag is the task's. */
int xtc_cancel_requested(void)
{
	xtc_task_t *t = xtc__task_current();

	if (t == NULL || !t->is_fiber)
		return 0;
	if (atomic_load_explicit(&t->kill_pending, memory_order_acquire))
		return 1;
	return xtc_dispatch_cancelled();
}
