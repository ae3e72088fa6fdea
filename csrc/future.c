/*
 * future.c - futures, promises and combinators (xtc_future.h), plus the
 * wait node shared with blocking.c (future_int.h). Completion queues and
 * dispatch are future_cq.c.
 *
 * Model. One heap record (fstate) per pair holds the promise handle, the
 * future handle, the result, a list of parked waiters and at most one
 * continuation. It is reference counted: one reference for the promise,
 * one for the future. Completing takes the tiny per-record lock once to
 * publish the result and detach waiters and the continuation; everything
 * after that (running the continuation, waking waiters) happens unlocked
 * on the completing thread.
 *
 * Because a future handle is consumed by exactly one terminal operation,
 * a record never needs more than one continuation, and the continuation's
 * data (map fn, then fn, forward target, group slot, completion queue tag)
 * lives in a union inside the record: map, then, notify and forwarding
 * allocate nothing, so completing a future never allocates.
 *
 * Invariants
 *  - the result is written once, under the lock, before done is published;
 *  - a waiter node is on the list only while PENDING; the completer takes
 *    the whole list under the lock and fires each node (FIRING, wake, DONE);
 *    a waiter that times out unlinks its node under the lock or, finding it
 *    taken, settles (waits for DONE) before returning;
 *  - a fiber parked on a record has a detach hook registered with its task:
 *    loop fini runs it, which does the same unlink-or-settle and spends the
 *    future handle the fiber held, so a later completion never reaches the
 *    released fiber and the record is still freed;
 *  - the completing thread holds the promise's reference while it runs the
 *    continuation, so the record outlives it;
 *  - a failed call consumes nothing: handles are claimed (use: LIVE ->
 *    BUSY/USED by CAS) only after every check passed, and rolled back.
 *
 * Alternatives rejected
 *  - A mutex + condvar per future: a fiber cannot block its carrier on a
 *    condvar; the park/wake core of the loop is the right primitive, and a
 *    futex word covers plain threads.
 *  - Heap continuation records per combinator: the union makes the common
 *    combinators allocation-free; only groups (n members) and timeouts (a
 *    timer) allocate, at registration time.
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_future.h"
#include "future_int.h"
#include "loop_int.h"

/* ------------------------------------------------------------------ */
/* wait nodes                                                           */
/* ------------------------------------------------------------------ */

static void futex_wake_all(_Atomic uint32_t *w)
{
	xtc__futex_wake(w, INT_MAX);
}

/* Sleep while *w == val, at most until the absolute CLOCK_MONOTONIC
 * deadline dl_ns (< 0 = forever). */
static void futex_wait_until(_Atomic uint32_t *w, uint32_t val, int64_t dl_ns)
{
	struct timespec ts, *tsp = NULL;

	if (dl_ns >= 0) {
		int64_t left = dl_ns - xtc__now_ns();

		if (left <= 0)
			return;
		ts.tv_sec = left / 1000000000;
		ts.tv_nsec = left % 1000000000;
		tsp = &ts;
	}
	xtc__futex_wait(w, val, tsp);
}

static int64_t mono_ns(void)
{
	return xtc__now_ns();
}

void xtc__wnode_init(xtc__wnode_t *w)
{
	w->next = NULL;
	w->task = (xtc__in_fiber() && xtc__gocb_depth == 0)
	              ? xtc__task_current() : NULL;
	atomic_init(&w->state, XTC__WN_PENDING);
}

/* Involuntary preemption of the completer between FIRING and DONE would
 * let a waiter on the same carrier spin on FIRING; defer it. */
static inline void nopreempt_enter(void)
{
	xtc__fiber_t *f = xtc__fiber_current();

	if (f != NULL)
		f->nopreempt++;
}

static inline void nopreempt_leave(void)
{
	xtc__fiber_t *f = xtc__fiber_current();

	if (f != NULL)
		f->nopreempt--;
}

void xtc__wnode_fire(xtc__wnode_t *w)
{
	xtc_task_t *t = w->task;

	nopreempt_enter();
	atomic_store(&w->state, XTC__WN_FIRING);
	if (t != NULL)
		xtc__task_wake(t);
	else
		futex_wake_all(&w->state);
	atomic_store_explicit(&w->state, XTC__WN_DONE, memory_order_release);
	nopreempt_leave();
}

void xtc__wnode_settle(xtc__wnode_t *w)
{
	unsigned spins = 0;

	while (atomic_load_explicit(&w->state, memory_order_acquire) !=
	       XTC__WN_DONE) {
		if (++spins < 128) {
			XTC__CPU_RELAX();
		} else if (w->task != NULL && xtc__in_fiber() &&
		           xtc__gocb_depth == 0) {
			/* Let the carrier run others; a short bounded nap. */
			(void)xtc__park_ex(1000, -1, 0, NULL, XTC__PARK_NOKILL);
		} else {
			sched_yield();
		}
	}
}

void xtc__wnode_await_done(xtc__wnode_t *w)
{
	unsigned spins = 0;
	long nap = 1000;

	while (atomic_load_explicit(&w->state, memory_order_acquire) !=
	       XTC__WN_DONE) {
		if (++spins < 128) {
			XTC__CPU_RELAX();
		} else {
			struct timespec ts = { 0, nap };

			nanosleep(&ts, NULL);
			if (nap < 1000000)
				nap *= 2;
		}
	}
}

/* Fiber waiters time out on the loop's clock (virtual under the
 * simulator), thread waiters on CLOCK_MONOTONIC (what the futex uses). */
static int64_t wnode_now(const xtc__wnode_t *w)
{
	return w->task != NULL ? xtc__now() : mono_ns();
}

int xtc__wnode_wait(xtc__wnode_t *w, int64_t timeout_ns)
{
	int64_t dl = -1;
	uint32_t s;

	if (timeout_ns > 0) {
		int64_t now = wnode_now(w);
		dl = xtc__deadline_after(now, timeout_ns);
	}
	for (;;) {
		s = atomic_load_explicit(&w->state, memory_order_acquire);
		if (s == XTC__WN_DONE)
			return 0;
		if (s == XTC__WN_FIRING) {
			xtc__wnode_settle(w);
			return 0;
		}
		if (timeout_ns == 0)
			return XTC_E_AGAIN;
		int64_t left = -1;
		if (dl >= 0) {
			left = dl - wnode_now(w);
			if (left <= 0)
				return XTC_E_AGAIN;
		}
		if (w->task != NULL) {
			int rc = xtc__park_ex(left, -1, 0, NULL,
			                      XTC__PARK_NOKILL);
			if (rc != 0 && rc != XTC_E_AGAIN)
				return rc;
		} else {
			futex_wait_until(&w->state, XTC__WN_PENDING, dl);
		}
	}
}

/* ------------------------------------------------------------------ */
/* records                                                              */
/* ------------------------------------------------------------------ */

#define FUT_MAGIC  0x46555455u /* "FUTU" */
#define PROM_MAGIC 0x50524f4du /* "PROM" */

enum { USE_LIVE = 0, USE_BUSY = 1, USE_USED = 2 };

struct xtc_future {
	uint32_t magic;
	_Atomic uint32_t use;
};

struct xtc_promise {
	uint32_t magic;
	_Atomic uint32_t use;
};

typedef struct fstate fstate_t;
typedef void (*cont_fn)(fstate_t *st, intptr_t value, int status);

struct group;
struct tmo;

struct fstate {
	struct xtc_future fut;
	struct xtc_promise prom;
	_Atomic uint32_t refs;
	xtc__spin_t lock;
	_Atomic uint8_t done;
	intptr_t value;
	int status;
	xtc__wnode_t *waiters;
	cont_fn cont;
	union {
		struct { xtc_future_map_fn fn; void *user; xtc_promise_t *out; } map;
		struct { xtc_future_then_fn fn; void *user; xtc_promise_t *out; } then;
		struct { xtc_promise_t *out; } fwd;
		struct { struct group *g; } grp;
		struct { xtc_cq_t *cq; uint64_t tag; } cq;
		struct { struct tmo *rec; } tmo;
	} u;
};

#define ST_OF_FUT(f)  ((fstate_t *)((char *)(f) - offsetof(fstate_t, fut)))
#define ST_OF_PROM(p) ((fstate_t *)((char *)(p) - offsetof(fstate_t, prom)))

static void st_lock(fstate_t *st)
{
	xtc__spin_lock(&st->lock); /* preemption off while held */
}

static void st_unlock(fstate_t *st)
{
	xtc__spin_unlock(&st->lock);
}

static void st_unref(fstate_t *st)
{
	if (atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1) {
		st->fut.magic = XTC__FUTURE_DEAD_MAGIC;
		st->prom.magic = XTC__FUTURE_DEAD_MAGIC;
		free(st);
	}
}

static int fut_ok(const xtc_future_t *f)
{
	return f != NULL && f->magic == FUT_MAGIC;
}

/* LIVE -> to; 0 or XTC_E_INVAL (consumed, or in use by another call). */
static int fut_claim(xtc_future_t *f, uint32_t to)
{
	uint32_t live = USE_LIVE;

	if (!fut_ok(f))
		return XTC_E_INVAL;
	return atomic_compare_exchange_strong(&f->use, &live, to) ? 0
	                                                           : XTC_E_INVAL;
}

static void fut_unclaim(xtc_future_t *f)
{
	atomic_store(&f->use, USE_LIVE);
}

/* The future handle is spent: drop its reference. */
static void fut_consume(xtc_future_t *f)
{
	atomic_store(&f->use, USE_USED);
	st_unref(ST_OF_FUT(f));
}

int xtc_future_new_pair(xtc_promise_t **out_prom, xtc_future_t **out_fut)
{
	fstate_t *st;

	if (out_prom == NULL || out_fut == NULL)
		return XTC_E_INVAL;
	st = calloc(1, sizeof(*st));
	if (st == NULL)
		return XTC_E_NOMEM;
	st->fut.magic = FUT_MAGIC;
	st->prom.magic = PROM_MAGIC;
	atomic_init(&st->refs, 2);
	*out_prom = &st->prom;
	*out_fut = &st->fut;
	return 0;
}

/* Publish the result, then run the continuation and wake the waiters on
 * this thread. The caller holds the promise reference. */
static void st_complete(fstate_t *st, intptr_t value, int status)
{
	xtc__wnode_t *w, *next;
	cont_fn cont;

	st_lock(st);
	st->value = value;
	st->status = status;
	atomic_store_explicit(&st->done, 1, memory_order_release);
	w = st->waiters;
	st->waiters = NULL;
	cont = st->cont;
	st->cont = NULL;
	st_unlock(st);
	if (cont != NULL)
		cont(st, value, status);
	for (; w != NULL; w = next) {
		next = w->next;
		xtc__wnode_fire(w);
	}
}

int xtc_promise_set(xtc_promise_t *prom, intptr_t value, int status)
{
	uint32_t live = USE_LIVE;
	fstate_t *st;

	if (prom == NULL || prom->magic != PROM_MAGIC)
		return XTC_E_INVAL;
	if (status > 0)
		return XTC_E_RANGE;
	if (!atomic_compare_exchange_strong(&prom->use, &live, USE_USED))
		return XTC_E_INVAL;
	st = ST_OF_PROM(prom);
	st_complete(st, value, status);
	st_unref(st);
	return 0;
}

void xtc_promise_drop(xtc_promise_t *prom)
{
	(void)xtc_promise_set(prom, 0, XTC_E_ABORTED);
}

int xtc_future_ready(xtc_future_t *fut, int *is_ready)
{
	if (!fut_ok(fut) || is_ready == NULL)
		return XTC_E_INVAL;
	*is_ready = atomic_load_explicit(&ST_OF_FUT(fut)->done,
	                                 memory_order_acquire) != 0;
	return 0;
}

void xtc_future_drop(xtc_future_t *fut)
{
	if (fut_claim(fut, USE_USED) == 0)
		fut_consume(fut);
}

/* 1 if w was still on the waiter list (now removed), 0 if the completer
 * took it. */
static int st_unlink_waiter(fstate_t *st, xtc__wnode_t *w)
{
	xtc__wnode_t **pp;
	int linked = 0;

	st_lock(st);
	for (pp = &st->waiters; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			linked = 1;
			break;
		}
	}
	st_unlock(st);
	return linked;
}

/* A fiber parked in fut_block, as its detach hook sees it. */
struct fut_waiter {
	xtc__wnode_t w;
	fstate_t *st;
};

/* Loop fini releases the parked fiber: unhook its node (or let a
 * completer that took it finish) and spend the future handle the fiber
 * was consuming, so the record is freed once the promise side is done. */
static void fut_detach(void *arg)
{
	struct fut_waiter *fw = arg;

	if (!st_unlink_waiter(fw->st, &fw->w))
		xtc__wnode_await_done(&fw->w);
	fut_consume(&fw->st->fut);
}

/* The claimed future is waited on; 1 = completed (result in *value and
 * *status), 0 = timed out or the wait failed (*status = that code). */
static int fut_block(fstate_t *st, int64_t timeout_ns, intptr_t *value,
                     int *status)
{
	struct fut_waiter fw = { .st = st };
	int rc;

	xtc__wnode_init(&fw.w);
	st_lock(st);
	if (atomic_load_explicit(&st->done, memory_order_relaxed)) {
		st_unlock(st);
		goto done;
	}
	if (timeout_ns == 0) {
		st_unlock(st);
		*status = XTC_E_AGAIN;
		return 0;
	}
	fw.w.next = st->waiters;
	st->waiters = &fw.w;
	st_unlock(st);
	if (fw.w.task != NULL)
		xtc__task_set_detach(fw.w.task, fut_detach, &fw);
	rc = xtc__wnode_wait(&fw.w, timeout_ns);
	if (fw.w.task != NULL)
		xtc__task_set_detach(fw.w.task, NULL, NULL);
	if (rc != 0) {
		if (st_unlink_waiter(st, &fw.w)) {
			*status = rc;
			return 0;
		}
		/* The completer took the node: the result is there. */
		xtc__wnode_settle(&fw.w);
	}
done:
	*value = st->value;
	*status = st->status;
	return 1;
}

/* Waiting on the carrier stack of a loop would stall every fiber on it. */
static int may_block_here(void)
{
	if (xtc__in_fiber())
		return xtc__gocb_depth == 0 ? 0 : XTC_E_DEADLK;
	return xtc__loop_current() != NULL || xtc__gocb_depth > 0
	           ? XTC_E_DEADLK : 0;
}

int xtc_future_await(xtc_future_t *fut, intptr_t *out)
{
	intptr_t v = 0;
	int status, rc;

	if (!fut_ok(fut))
		return XTC_E_INVAL;
	/* a Go callback runs on the carrier stack (off a fiber): report the
	 * callback, as xtc_future_wait and xtc_launch do */
	if (xtc__gocb_depth > 0)
		return XTC_E_DEADLK;
	if (!xtc__in_fiber())
		return XTC_E_INVAL;
	rc = fut_claim(fut, USE_BUSY);
	if (rc != 0)
		return rc;
	if (!fut_block(ST_OF_FUT(fut), -1, &v, &status)) {
		fut_unclaim(fut);
		return status;
	}
	if (out != NULL)
		*out = v;
	fut_consume(fut);
	return status;
}

int xtc_future_wait(xtc_future_t *fut, intptr_t *out, int64_t timeout_ns)
{
	intptr_t v = 0;
	int status, rc;

	if (!fut_ok(fut))
		return XTC_E_INVAL;
	if (timeout_ns != 0 && (rc = may_block_here()) != 0)
		return rc;
	rc = fut_claim(fut, USE_BUSY);
	if (rc != 0)
		return rc;
	if (!fut_block(ST_OF_FUT(fut), timeout_ns, &v, &status)) {
		fut_unclaim(fut);
		return status;
	}
	if (out != NULL)
		*out = v;
	fut_consume(fut);
	return status;
}

/* ------------------------------------------------------------------ */
/* continuations                                                        */
/* ------------------------------------------------------------------ */

/* The claimed future src gets continuation fn (its u-data already set);
 * runs it now when src is complete. Consumes src. */
static void fut_chain(xtc_future_t *src, cont_fn fn)
{
	fstate_t *st = ST_OF_FUT(src);
	int done;

	st_lock(st);
	done = atomic_load_explicit(&st->done, memory_order_relaxed) != 0;
	if (!done)
		st->cont = fn;
	st_unlock(st);
	if (done) {
		nopreempt_enter();
		fn(st, st->value, st->status);
		nopreempt_leave();
	}
	fut_consume(src);
}

/* Claim src for a continuation and make the pair that continuation will
 * complete; on failure nothing is claimed or leaked. */
static int chain_claim(xtc_future_t *src, xtc_promise_t **p,
                       xtc_future_t **f)
{
	int rc = xtc_future_new_pair(p, f);

	if (rc != 0)
		return rc;
	if ((rc = fut_claim(src, USE_USED)) != 0) {
		xtc_promise_drop(*p);
		xtc_future_drop(*f);
	}
	return rc;
}

static void map_cont(fstate_t *st, intptr_t value, int status)
{
	intptr_t v = st->u.map.fn(value, status, st->u.map.user);

	(void)xtc_promise_set(st->u.map.out, v, status > 0 ? XTC_E_RANGE
	                                                   : status);
}

int xtc_future_map(xtc_future_t *src, xtc_future_map_fn fn, void *user,
                   xtc_future_t **out_fut)
{
	xtc_promise_t *p;
	xtc_future_t *f;
	fstate_t *st;
	int rc;

	if (!fut_ok(src) || fn == NULL || out_fut == NULL)
		return XTC_E_INVAL;
	if ((rc = chain_claim(src, &p, &f)) != 0)
		return rc;
	st = ST_OF_FUT(src);
	st->u.map.fn = fn;
	st->u.map.user = user;
	st->u.map.out = p;
	*out_fut = f;
	fut_chain(src, map_cont);
	return 0;
}

static void fwd_cont(fstate_t *st, intptr_t value, int status)
{
	(void)xtc_promise_set(st->u.fwd.out, value, status);
}

static void then_cont(fstate_t *st, intptr_t value, int status)
{
	xtc_promise_t *out = st->u.then.out;
	xtc_future_t *next = NULL;
	int rc;

	rc = st->u.then.fn(value, status, st->u.then.user, &next);
	if (rc != 0) {
		xtc_future_drop(next);
		(void)xtc_promise_set(out, 0, rc < 0 ? rc : XTC_E_RANGE);
		return;
	}
	if (next == NULL) {
		(void)xtc_promise_set(out, value, status);
		return;
	}
	if (fut_claim(next, USE_USED) != 0) {
		/* fn handed back a spent or busy future. */
		(void)xtc_promise_set(out, 0, XTC_E_INVAL);
		return;
	}
	ST_OF_FUT(next)->u.fwd.out = out;
	fut_chain(next, fwd_cont);
}

int xtc_future_then(xtc_future_t *src, xtc_future_then_fn fn, void *user,
                    xtc_future_t **out_fut)
{
	xtc_promise_t *p;
	xtc_future_t *f;
	fstate_t *st;
	int rc;

	if (!fut_ok(src) || fn == NULL || out_fut == NULL)
		return XTC_E_INVAL;
	if ((rc = chain_claim(src, &p, &f)) != 0)
		return rc;
	st = ST_OF_FUT(src);
	st->u.then.fn = fn;
	st->u.then.user = user;
	st->u.then.out = p;
	*out_fut = f;
	fut_chain(src, then_cont);
	return 0;
}

/* ---- groups -------------------------------------------------------- */

struct group {
	_Atomic int remaining;  /* members not yet complete; last one frees */
	_Atomic int first_err;  /* when_all */
	_Atomic int won;        /* when_any */
	int n;
	int any;
	xtc_promise_t *out;
};

static void group_cont(fstate_t *st, intptr_t value, int status)
{
	struct group *g = st->u.grp.g;

	if (g->any) {
		if (atomic_exchange(&g->won, 1) == 0)
			(void)xtc_promise_set(g->out, value, status);
	} else if (status != 0) {
		int zero = 0;
		atomic_compare_exchange_strong(&g->first_err, &zero, status);
	}
	if (atomic_fetch_sub(&g->remaining, 1) == 1) {
		if (!g->any)
			(void)xtc_promise_set(g->out, g->n,
			                      atomic_load(&g->first_err));
		free(g);
	}
}

static int ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a;
	uintptr_t y = (uintptr_t)*(void *const *)b;

	return x < y ? -1 : x > y;
}

static int has_duplicates(xtc_future_t **futs, int n)
{
	xtc_future_t **v;
	int dup = 0;

	if (n <= 32) {
		for (int i = 0; i < n; i++)
			for (int j = i + 1; j < n; j++)
				if (futs[i] == futs[j])
					return 1;
		return 0;
	}
	v = malloc((size_t)n * sizeof(*v));
	if (v == NULL)
		return -1;
	memcpy(v, futs, (size_t)n * sizeof(*v));
	qsort(v, (size_t)n, sizeof(*v), ptr_cmp);
	for (int i = 1; i < n && !dup; i++)
		dup = v[i] == v[i - 1];
	free(v);
	return dup;
}

static int group_make(xtc_future_t **futs, int n, int any,
                      xtc_future_t **out_fut)
{
	struct group *g;
	xtc_promise_t *p;
	xtc_future_t *f;
	int rc, i;

	if (futs == NULL || out_fut == NULL || n < 1)
		return XTC_E_INVAL;
	if (n > XTC_FUTURE_MAX_GROUP)
		return XTC_E_RANGE;
	for (i = 0; i < n; i++)
		if (!fut_ok(futs[i]))
			return XTC_E_INVAL;
	rc = has_duplicates(futs, n);
	if (rc != 0)
		return rc < 0 ? XTC_E_NOMEM : XTC_E_INVAL;
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return XTC_E_NOMEM;
	rc = xtc_future_new_pair(&p, &f);
	if (rc != 0) {
		free(g);
		return rc;
	}
	for (i = 0; i < n; i++) {
		if (fut_claim(futs[i], USE_USED) != 0) {
			while (--i >= 0)
				fut_unclaim(futs[i]);
			xtc_promise_drop(p);
			xtc_future_drop(f);
			free(g);
			return XTC_E_INVAL;
		}
	}
	atomic_init(&g->remaining, n);
	g->n = n;
	g->any = any;
	g->out = p;
	*out_fut = f;
	for (i = 0; i < n; i++) {
		ST_OF_FUT(futs[i])->u.grp.g = g;
		fut_chain(futs[i], group_cont);
	}
	return 0;
}

int xtc_future_when_all(xtc_future_t **futs, int n, xtc_future_t **out_fut)
{
	return group_make(futs, n, 0, out_fut);
}

int xtc_future_when_any(xtc_future_t **futs, int n, xtc_future_t **out_fut)
{
	return group_make(futs, n, 1, out_fut);
}

/* ---- timeouts ------------------------------------------------------ */

/* Two references: the loop side and the source side. The source side is
 * dropped by the source's continuation. The loop side is dropped on the
 * loop thread by whichever ends the timer: the timer callback when the
 * timeout won, or the disarm post when the source won (the callback of a
 * timer that fires after the source won leaves it to that post). */
struct tmo {
	_Atomic int refs;
	_Atomic int claimed;
	int fired;               /* loop thread */
	xtc_loop_t *loop;
	xtc_promise_t *out;
	struct xtc_timer tm;     /* intrusive, loop thread */
	xtc__post_t post;        /* source won: disarm on the loop thread */
};

static void tmo_unref(struct tmo *r)
{
	if (atomic_fetch_sub(&r->refs, 1) == 1)
		free(r);
}

static void tmo_timer_cb(void *user)
{
	struct tmo *r = user;

	r->fired = 1;
	if (atomic_exchange(&r->claimed, 1) == 0) {
		(void)xtc_promise_set(r->out, 0, XTC_E_AGAIN);
		tmo_unref(r);
	}
}

static void tmo_disarm_post(xtc_loop_t *loop, xtc__post_t *p)
{
	struct tmo *r = (struct tmo *)((char *)p - offsetof(struct tmo, post));

	if (loop->magic == XTC__LOOP_LIVE && !r->fired)
		xtc__timer_disarm(&r->tm);
	tmo_unref(r);
}

static void tmo_cont(fstate_t *st, intptr_t value, int status)
{
	struct tmo *r = st->u.tmo.rec;

	if (atomic_exchange(&r->claimed, 1) == 0) {
		(void)xtc_promise_set(r->out, value, status);
		r->post.fn = tmo_disarm_post;
		if (xtc__loop_on_owner_thread(r->loop))
			tmo_disarm_post(r->loop, &r->post);
		else if (xtc__loop_post(r->loop, &r->post) != 0)
			tmo_unref(r); /* loop finalised: its timers are gone */
	}
	tmo_unref(r);
}

int xtc_future_with_timeout(xtc_future_t *src, int64_t timeout_ns,
                            xtc_future_t **out_fut)
{
	xtc_loop_t *loop = xtc__loop_current();
	xtc_promise_t *p;
	xtc_future_t *f;
	struct tmo *r;
	int64_t now, dl;
	int rc;

	if (!fut_ok(src) || out_fut == NULL || timeout_ns <= 0 || loop == NULL)
		return XTC_E_INVAL;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return XTC_E_NOMEM;
	if ((rc = chain_claim(src, &p, &f)) != 0) {
		free(r);
		return rc;
	}
	atomic_init(&r->refs, 2);
	r->loop = loop;
	r->out = p;
	now = xtc__now();
	dl = xtc__deadline_after(now, timeout_ns);
	rc = xtc__timer_arm(loop, &r->tm, dl, tmo_timer_cb, r);
	if (rc != 0) {
		fut_unclaim(src);
		xtc_promise_drop(p);
		xtc_future_drop(f);
		free(r);
		return rc;
	}
	*out_fut = f;
	ST_OF_FUT(src)->u.tmo.rec = r;
	fut_chain(src, tmo_cont);
	return 0;
}

/* ------------------------------------------------------------------ */
/* what future_cq.c needs of a record                                   */
/* ------------------------------------------------------------------ */

int xtc__future_ok(const xtc_future_t *f)
{
	return fut_ok(f);
}

static void cq_cont(fstate_t *st, intptr_t value, int status)
{
	xtc__cq_push(st->u.cq.cq, st->u.cq.tag, value, status);
}

int xtc__future_chain_cq(xtc_future_t *fut, xtc_cq_t *cq, uint64_t tag)
{
	int rc;

	if ((rc = fut_claim(fut, USE_USED)) != 0)
		return rc;
	ST_OF_FUT(fut)->u.cq.cq = cq;
	ST_OF_FUT(fut)->u.cq.tag = tag;
	fut_chain(fut, cq_cont);
	return 0;
}

void xtc__future_pair_discard(xtc_future_t *f)
{
	ST_OF_FUT(f)->refs = 0;
	free(ST_OF_FUT(f));
}
