/*
 * loop.c - the single-thread event loop: lifecycle, run queue, one step,
 * tasks (stackless and fiber), wakers, parking, the cross-thread inbox and
 * carrier-stack calls.
 *
 * Model (see loop_int.h for the full contract)
 *  - One owner thread at a time drives the loop (xtc__loop_enter). The run
 *    queue is a plain intrusive FIFO touched only by the owner. Other
 *    threads push onto an MPSC inbox (a Treiber stack drained whole and
 *    reversed, so each producer's order is kept) and ring the eventfd when
 *    the owner announced it is about to block (loop->sleeping).
 *  - Task state is one atomic word. A wake from anywhere CASes PARKED ->
 *    READY and the winner owns the queue link; a wake that finds the task
 *    READY or RUNNING sets wake_pending instead, which the task consumes the
 *    next time it parks (the park then returns at once). Because the latch
 *    is only consumed at a park, a latched wake may surface as one spurious
 *    wake-up later; never as a lost one. Parking publishes PARKED with a
 *    seq_cst store and then reads wake_pending (exchanging it only when
 *    set), the waker stores wake_pending and then re-reads the state
 *    (seq_cst): one of the two always sees the other. A waiter whose every
 *    wake comes through one lock may lock-park instead (t->lock_parked,
 *    PARKED published under that lock): the lock holder wakes it with
 *    plain stores, and xtc__task_wake latches rather than take it.
 *  - Fibers run on their own stacks; the loop's root fiber is the carrier
 *    (thread) stack. A yielding or parking fiber switches straight to the
 *    next ready fiber while the loop has no feature bit set, at most
 *    XTC__FAIR_RUNS times in a row; otherwise it returns to the root, which
 *    does the accounting, the fairness poll and reaping. A finished fiber
 *    always exits to the root, because its stack cannot be freed while it
 *    runs on it.
 *  - Go callbacks never run on a fiber stack: xtc__carrier_call bounces to
 *    the root, which calls the function with xtc__gocb_depth raised and
 *    resumes the same fiber immediately.
 *  - Fairness: every XTC__FAIR_RUNS runs (and, when runs are clocked
 *    anyway, after a run that leaves a timer due or XTC__FAIR_NS after the
 *    last poll) the loop drains the inbox, polls io without blocking and
 *    fires due timers, so a busy run queue cannot starve them.
 *  - Stacks: an owner-thread spawn maps its stack at once (the error is
 *    returned to the caller); a cross-thread spawn maps it at first run, so
 *    a backlog in the inbox holds no stacks, and the inbox accepts at most
 *    XTC__REMOTE_SPAWN_MAX pending spawns (XTC_E_AGAIN beyond). Stacks the
 *    thread's cache cannot take at reap wait in a per-loop overflow pool
 *    and go back to the cache at the next spawn; stacks the pool did not
 *    need for XTC__SPOOL_TRIM_NS are unmapped when the loop idles.
 *  - Task structs: reaped ones are recycled, first into a short list of
 *    spares for spawns from other threads (loop->spare: the owner pushes,
 *    a foreign spawner pops under spare_lock), then into the owner's own
 *    list. A foreign spawn used to calloc its struct and the owner to free
 *    it: a malloc on one thread and a free into its arena from another per
 *    spawn, with arena lock contention and heap trims (a pthread spawning
 *    tiny tasks into a one-loop executor: 1.2-1.6 -> 0.85-0.9 us each).
 *  - Fini vs other threads: fini swaps XTC__INBOX_CLOSED into the inbox, so
 *    a later post fails (XTC_E_INVAL, the node stays the poster's), then
 *    waits until every node it ever took has its poster's posts_done
 *    increment (the poster's last touch, after its wake-up) and no
 *    xtc_loop_wake/stop holds `rings`; only then do the last nodes run and
 *    the eventfd close. A spawn or a migration that arrives then is
 *    released like any unfinished task (xtc__loop_adopt_orphan). Rejected:
 *    an enter/leave counter around each post (two RMWs per post instead of
 *    one), a lock (on every post).
 *
 * Invariants
 *  - a task is on at most one queue (run queue, class queue, inbox) and
 *    only while READY (or NEW on the inbox);
 *  - live_tasks counts tasks spawned onto this loop (drained from the inbox)
 *    and not yet reaped; a task struct is recycled only after reap and only
 *    without `retain`;
 *  - a task has at most one outstanding park registration (timer and/or
 *    fd), cancelled on the owner thread before the task runs again.
 *
 * Alternatives rejected: a lock around the run queue (cost on every
 * dispatch); a per-wake heap message (allocation on the hot path, failure
 * modes); clearing wake_pending at dispatch (needs an atomic RMW per
 * dispatch to stay correct; the yield path must stay free of it).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loop_io_int.h"
#include "loop_int.h"

XTC__TLS __thread xtc_loop_t *xtc__tls_loop;
XTC__TLS __thread xtc_task_t *xtc__tls_task;
static XTC__TLS __thread char tls_anchor;

#define TASK_FREE_MAX 512
#define TASK_FREE_OWN 256 /* kept by the owner before feeding the spares */
#define SPARE_MAX 256 /* task structs kept for foreign spawners */

/* ------------------------------------------------------------------ */
/* upcalls: the layers above that the loop reaches (loop_int.h)         */
/* ------------------------------------------------------------------ */

static void up_nop(void)
{
}

static void up_nop_loop(xtc_loop_t *loop)
{
	(void)loop;
}

static int up_no_offer(xtc_loop_t *loop, xtc_task_t *t)
{
	(void)loop;
	(void)t;
	return 0;
}

xtc__loop_upcalls_t xtc__loop_up = {
	.proc_resumed = up_nop,
	.proc_loop_fini = up_nop_loop,
	.sched_loop_fini = up_nop_loop,
	.exec_ring_run = up_nop_loop,
	.exec_offer = up_no_offer,
};

/* Preemption yields through the fiber layer (fiber_int.h), not by name. */
__attribute__((constructor)) static void loop_slice_yield(void)
{
	xtc__fiber_slice_yield = xtc__fiber_yield_slice;
}

uintptr_t xtc__thread_token(void)
{
	return (uintptr_t)&tls_anchor;
}

/* ------------------------------------------------------------------ */
/* global loop id table                                                 */
/* ------------------------------------------------------------------ */

static _Atomic(xtc_loop_t *) loop_table[65536];
static pthread_mutex_t loop_table_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t loop_next_id = 1;

static int loop_id_alloc(xtc_loop_t *loop)
{
	uint32_t i, id;
	int rc = XTC_E_RESOURCE;

	pthread_mutex_lock(&loop_table_mu);
	for (i = 0; i < 65535; i++) {
		id = loop_next_id;
		loop_next_id = loop_next_id == 65535 ? 1 : loop_next_id + 1;
		if (atomic_load(&loop_table[id]) == NULL) {
			atomic_store(&loop_table[id], loop);
			loop->id = (uint16_t)id;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&loop_table_mu);
	return rc;
}

static void loop_id_free(xtc_loop_t *loop)
{
	pthread_mutex_lock(&loop_table_mu);
	if (loop->id != 0 && atomic_load(&loop_table[loop->id]) == loop)
		atomic_store(&loop_table[loop->id], NULL);
	pthread_mutex_unlock(&loop_table_mu);
}

xtc_loop_t *xtc__loop_by_id(uint16_t id)
{
	return id == 0 ? NULL : atomic_load_explicit(&loop_table[id],
	                                             memory_order_acquire);
}

/* ------------------------------------------------------------------ */
/* validation helpers                                                   */
/* ------------------------------------------------------------------ */

static inline int loop_live(const xtc_loop_t *loop)
{
	/* acquire: pairs with the release stores of init and fini */
	return loop != NULL &&
	       atomic_load_explicit(&loop->magic, memory_order_acquire) ==
	               XTC__LOOP_LIVE;
}

int xtc__loop_on_owner_thread(const xtc_loop_t *loop)
{
	return loop != NULL &&
	       atomic_load_explicit(&loop->owner, memory_order_relaxed) ==
	               xtc__thread_token();
}

/* ------------------------------------------------------------------ */
/* run queue                                                            */
/* ------------------------------------------------------------------ */

static inline void rq_push(xtc_loop_t *loop, xtc_task_t *t)
{
	t->node.next = NULL;
	if (loop->rq_tail != NULL)
		loop->rq_tail->node.next = &t->node;
	else
		loop->rq_head = t;
	loop->rq_tail = t;
}

xtc_task_t *xtc__rq_pop(xtc_loop_t *loop)
{
	xtc_task_t *t = loop->rq_head;

	if (t != NULL) {
		loop->rq_head = (xtc_task_t *)t->node.next;
		if (loop->rq_head == NULL)
			loop->rq_tail = NULL;
	}
	return t;
}

/* The demoted level: a plain FIFO like the run queue (loop_int.h). */
static void low_push(xtc_loop_t *loop, xtc_task_t *t, int64_t now)
{
	atomic_store_explicit(&t->state, XTC__T_READY, memory_order_relaxed);
	t->demoted = 1;
	t->low_since = now != 0 ? now : xtc__now();
	t->node.next = NULL;
	if (loop->low_tail != NULL)
		loop->low_tail->node.next = &t->node;
	else
		loop->low_head = t;
	loop->low_tail = t;
	loop->demotions++;
}

xtc_task_t *xtc__loop_low_pop(xtc_loop_t *loop)
{
	xtc_task_t *t = loop->low_head;

	if (t != NULL) {
		loop->low_head = (xtc_task_t *)t->node.next;
		if (loop->low_head == NULL)
			loop->low_tail = NULL;
		t->demoted = 0;
	}
	return t;
}

static inline void make_ready(xtc_loop_t *loop, xtc_task_t *t)
{
	atomic_store_explicit(&t->state, XTC__T_READY, memory_order_relaxed);
	if (XTC__UNLIKELY(loop->feat != 0) && loop->hooks.enqueue != NULL &&
	    loop->hooks.enqueue(loop, t))
		return;
	rq_push(loop, t);
}

void xtc__loop_make_ready(xtc_loop_t *loop, xtc_task_t *t)
{
	make_ready(loop, t);
}

/* ------------------------------------------------------------------ */
/* inbox                                                                */
/* ------------------------------------------------------------------ */

void xtc__loop_ring(xtc_loop_t *loop, int how)
{
	if (how == XTC__SLEEP_RUN) {
		xtc__loop_up.exec_ring_run(loop);
		return;
	}
	if (how == 0)
		return;
	atomic_store_explicit(&loop->wake_at, xtc__now(), memory_order_relaxed);
	if (how == XTC__SLEEP_FUTEX)
		xtc__futex_wake(&loop->sleeping, 1);
	else
		xtc__io_wakeup(loop);
}

static void kick(xtc_loop_t *loop)
{
	int s;

	if (atomic_load(&loop->sleeping) &&
	    (s = atomic_exchange(&loop->sleeping, 0)) != 0)
		xtc__loop_ring(loop, s);
}

int xtc__loop_post(xtc_loop_t *loop, xtc__post_t *p)
{
	xtc__post_t *head;

	if (!loop_live(loop) || p == NULL || p->fn == NULL)
		return XTC_E_INVAL;
	head = atomic_load_explicit(&loop->inbox, memory_order_relaxed);
	do {
		if (XTC__UNLIKELY(head == XTC__INBOX_CLOSED))
			return XTC_E_INVAL; /* fini got here first */
		p->next = head;
	} while (!atomic_compare_exchange_weak(&loop->inbox, &head, p));
	if (!xtc__loop_on_owner_thread(loop))
		kick(loop);
	/* The one extra RMW of a post. Release: fini's acquire load of the
	 * count orders this poster's last touch of the loop (the kick) before
	 * fini closes the eventfd and recycles the shell. */
	atomic_fetch_add_explicit(&loop->posts_done, 1, memory_order_release);
	return 0;
}

/* Take the whole inbox (leaving `with` behind), oldest node first. */
static xtc__post_t *inbox_take(xtc_loop_t *loop, xtc__post_t *with)
{
	xtc__post_t *p, *rev = NULL, *next;

	p = atomic_exchange(&loop->inbox, with);
	for (; p != NULL; p = next) { /* LIFO -> FIFO */
		next = p->next;
		p->next = rev;
		rev = p;
		loop->posts_taken++;
	}
	return rev;
}

static int inbox_run(xtc_loop_t *loop, xtc__post_t *p)
{
	xtc__post_t *next;
	int n = 0;

	for (; p != NULL; p = next) {
		next = p->next;
		p->fn(loop, p);
		n++;
	}
	return n;
}

static int inbox_drain(xtc_loop_t *loop)
{
	return inbox_run(loop, inbox_take(loop, NULL));
}

/* Fini: no post gets in after this (XTC_E_INVAL), and none is still
 * inside xtc__loop_post (every node taken has its poster's posts_done
 * increment) nor inside xtc_loop_wake/stop, so the eventfd may close and
 * the shell be reused. Then the last nodes run (magic is FINI: they free
 * or hand their task to release_all_tasks). Posters never block, so the
 * wait is a few instructions of theirs at most. */
static void inbox_close(xtc_loop_t *loop)
{
	xtc__post_t *p = inbox_take(loop, XTC__INBOX_CLOSED);

	while (atomic_load_explicit(&loop->posts_done, memory_order_acquire) !=
	               loop->posts_taken ||
	       atomic_load(&loop->rings) != 0)
		sched_yield();
	inbox_run(loop, p);
}

/* ------------------------------------------------------------------ */
/* task structs                                                         */
/* ------------------------------------------------------------------ */

/* Field by field on purpose: a memset of the struct compiles to two
 * `rep stos`, which dominated the spawn path. Every field of struct
 * xtc_task is reset here except the fiber (xtc__fiber_init rewrites it)
 * and those task_spawn always writes (loop, is_fiber, pinned, retain,
 * admitted, the body, proc, sched_class, cleanup; writing them twice cost
 * ~10 instructions a spawn). A new field must be added to one of the
 * two. */
static void task_reset(xtc_task_t *t)
{
	t->node.next = NULL;
	t->node.fn = NULL;
	atomic_store_explicit(&t->state, XTC__T_NEW, memory_order_relaxed);
	atomic_store_explicit(&t->wake_pending, 0, memory_order_relaxed);
	atomic_store_explicit(&t->kill_pending, 0, memory_order_relaxed);
	t->park_why = 0;
	t->park_armed = 0;
	atomic_store_explicit(&t->wlock.v, 0, memory_order_relaxed);
	t->stack_lazy = 0;
	atomic_store_explicit(&t->lock_parked, 0, memory_order_relaxed);
	t->stack_size = 0;
	t->result = 0;
	t->revents = 0;
	t->park_timer.state = XTC__TM_IDLE;
	t->park_timer.kind = XTC__TMK_INTERNAL;
	t->park_timer.loop = NULL;
	t->park_io = NULL;
	atomic_store_explicit(&t->waiters, NULL, memory_order_relaxed);
	atomic_store_explicit(&t->wrefs, 0, memory_order_relaxed);
	t->all_prev = t->all_next = NULL;
	t->run_start = 0;
	t->runs = 0;
	t->demoted = 0;
	t->svc_ns = 0;
	t->xq.seq = 0;
	t->detach = NULL;
	t->detach_arg = NULL;
}

/* A task struct for a spawn from another thread: a spare the owner
 * returned, else calloc. Each calloc'd struct used to be freed by the
 * owner's thread, so every foreign spawn paid a malloc on one thread and a
 * free into that thread's arena from the other: arena lock contention,
 * heap growth and trims (madvise, a TLB shootdown) on both sides (a
 * pthread spawning into a 1-loop executor: ~40% of the samples in malloc
 * and the kernel under it). The spares hold what the owner reaped. */
static xtc_task_t *spare_pop(xtc_loop_t *loop)
{
	xtc_task_t *t;

	if (atomic_load_explicit(&loop->spare, memory_order_relaxed) == NULL)
		return NULL;
	xtc__spin_lock(&loop->spare_lock);
	t = atomic_load_explicit(&loop->spare, memory_order_acquire);
	while (t != NULL && !atomic_compare_exchange_weak_explicit(
	    &loop->spare, &t, (xtc_task_t *)t->node.next,
	    memory_order_acquire, memory_order_acquire))
		;
	if (t != NULL) /* under the lock: spare_drain zeroes the count */
		atomic_fetch_sub_explicit(&loop->spare_n, 1,
		                          memory_order_relaxed);
	xtc__spin_unlock(&loop->spare_lock);
	if (t != NULL)
		memset(t, 0, sizeof(*t));
	return t;
}

/* Owner: offer a reaped struct to foreign spawners (1) or not (0). */
static int spare_push(xtc_loop_t *loop, xtc_task_t *t)
{
	xtc_task_t *h;

	if (atomic_load_explicit(&loop->spare_n, memory_order_relaxed) >=
	    SPARE_MAX)
		return 0;
	atomic_fetch_add_explicit(&loop->spare_n, 1, memory_order_relaxed);
	h = atomic_load_explicit(&loop->spare, memory_order_relaxed);
	do
		t->node.next = (xtc__post_t *)h;
	while (!atomic_compare_exchange_weak_explicit(&loop->spare, &h, t,
	    memory_order_release, memory_order_relaxed));
	return 1;
}

/* fini, on the owner: no spawner pops once the list is empty (under the
 * lock, so a pop in flight finishes first) */
static void spare_drain(xtc_loop_t *loop)
{
	xtc_task_t *t, *next;

	xtc__spin_lock(&loop->spare_lock);
	t = atomic_exchange_explicit(&loop->spare, NULL, memory_order_acquire);
	atomic_store_explicit(&loop->spare_n, 0, memory_order_relaxed);
	xtc__spin_unlock(&loop->spare_lock);
	for (; t != NULL; t = next) {
		next = (xtc_task_t *)t->node.next;
		free(t);
	}
}

static xtc_task_t *task_alloc(xtc_loop_t *loop, int on_owner)
{
	xtc_task_t *t = NULL;

	if (on_owner && loop->task_free != NULL) {
		t = loop->task_free;
		loop->task_free = (xtc_task_t *)t->node.next;
		loop->task_free_len--;
		task_reset(t);
		return t;
	}
	/* the owner too, once its own list is empty: a loop that only
	 * spawns locally parks its first reaped structs there */
	if ((t = spare_pop(loop)) != NULL)
		return t;
	return calloc(1, sizeof(*t));
}

/* Owner. Its own list first up to TASK_FREE_OWN, then the spares while
 * they are short, so a loop fed from other threads recycles what they
 * allocated, then its own list up to TASK_FREE_MAX. The spares first
 * made a loop that spawns locally cycle its structs through them: a push
 * and the owner's pop back, six atomic operations per spawn and exit. */
static void task_free(xtc_loop_t *loop, xtc_task_t *t)
{
	if (loop->magic != XTC__LOOP_LIVE) {
		free(t);
		return;
	}
	if (loop->task_free_len >= TASK_FREE_OWN && spare_push(loop, t))
		return;
	if (loop->task_free_len < TASK_FREE_MAX) {
		t->node.next = (xtc__post_t *)loop->task_free;
		loop->task_free = t;
		loop->task_free_len++;
		return;
	}
	free(t);
}

/* ------------------------------------------------------------------ */
/* overflow stack pool                                                  */
/* ------------------------------------------------------------------ */

/* Reap: keep the dead fiber's stack when the thread cache is full. */
static void spool_put(xtc_loop_t *loop, xtc__fiber_t *f)
{
	if (f->stack.map == NULL || loop->magic != XTC__LOOP_LIVE ||
	    xtc__stack_cache_count() < XTC__STACK_CACHE_MAX)
		return;
	if (loop->spool_n == loop->spool_cap) {
		uint32_t cap = loop->spool_cap ? loop->spool_cap * 2 : 64;
		xtc__stack_t *s;
		if (loop->spool_cap >= XTC__SPOOL_MAX)
			return;
		s = realloc(loop->spool, cap * sizeof(*s));
		if (s == NULL)
			return;
		loop->spool = s;
		loop->spool_cap = cap;
	}
	loop->spool[loop->spool_n++] = f->stack;
	memset(&f->stack, 0, sizeof(f->stack));
}

/* Spawn: refill the thread cache from the pool so the next stack
 * allocation is a cache hit. */
static inline void spool_refill(xtc_loop_t *loop)
{
	xtc__stack_t st;

	if (XTC__LIKELY(loop->spool_n == 0) ||
	    xtc__stack_cache_count() >= XTC__STACK_CACHE_MAX)
		return;
	st = loop->spool[--loop->spool_n];
	if (loop->spool_n < loop->spool_low)
		loop->spool_low = loop->spool_n;
	xtc__stack_free(&st);
}

/* Idle: release the stacks the pool did not need since the last trim. */
static void spool_trim(xtc_loop_t *loop, int64_t now, int all)
{
	uint32_t drop;

	if (!all && (loop->spool_n == 0 || now < loop->spool_trim_at))
		return;
	drop = all ? loop->spool_n : loop->spool_low;
	while (drop-- > 0 && loop->spool_n > 0) {
		xtc__stack_t st = loop->spool[--loop->spool_n];
		xtc__stack_free(&st);
	}
	loop->spool_low = loop->spool_n;
	loop->spool_trim_at = now + XTC__SPOOL_TRIM_NS;
	if (all) {
		free(loop->spool);
		loop->spool = NULL;
		loop->spool_cap = loop->spool_n = loop->spool_low = 0;
	}
}

/* ------------------------------------------------------------------ */
/* park registrations                                                   */
/* ------------------------------------------------------------------ */

static void park_cancel(xtc_loop_t *loop, xtc_task_t *t)
{
	if (t->park_timer.state == XTC__TM_ARMED) /* no call when untimed */
		xtc__timer_disarm(&t->park_timer);
	if (t->park_io != NULL) {
		xtc__io_disarm(loop, t->park_io);
		t->park_io = NULL;
	}
	t->park_armed = 0;
}

static void park_timer_cb(void *user)
{
	xtc_task_t *t = user;

	if (t->park_why == XTC__PW_NONE)
		t->park_why = XTC__PW_TIMEOUT;
	xtc__task_wake(t);
}

static void park_io_cb(void *arg, uint32_t revents)
{
	xtc_task_t *t = arg;

	t->park_io = NULL;
	t->revents |= revents;
	t->park_why = XTC__PW_FD;
	xtc__task_wake(t);
}

/* ------------------------------------------------------------------ */
/* finishing and reaping                                                */
/* ------------------------------------------------------------------ */

static void futex_wake(_Atomic uint32_t *w)
{
	xtc__futex_wake(w, INT32_MAX);
}

/* Fire a taken await node (the handshake in loop_int.h): FIRING, wake,
 * DONE. DONE is the last access; the node may vanish right after. */
static void await_fire(xtc__await_node_t *n, intptr_t result, int status)
{
	xtc_task_t *w = n->task;

	n->result = result;
	n->status = status;
	atomic_store_explicit(&n->done, XTC__AW_FIRING, memory_order_release);
	if (w != NULL)
		xtc__task_wake(w);
	else
		futex_wake(&n->done);
	atomic_store_explicit(&n->done, XTC__AW_DONE, memory_order_release);
}

/* Fire every node of a list taken under wlock. Involuntary preemption is
 * deferred meanwhile: a waiter on this carrier would spin on FIRING. */
static void await_fire_all(xtc__await_node_t *n, intptr_t result, int status)
{
	xtc__fiber_t *f = xtc__fiber_current();
	xtc__await_node_t *next;

	if (f != NULL)
		f->nopreempt++;
	for (; n != NULL && !XTC__AWAIT_SEALED(n); n = next) {
		next = n->next;
		await_fire(n, result, status);
	}
	if (f != NULL)
		f->nopreempt--;
}

/* The task is done: publish it, then release every waiter. */
static void task_complete(xtc_task_t *t)
{
	xtc__await_node_t *n;

	/* seq_cst store, then the waiter list: a waiter hooks its node, then
	 * re-reads the state (async.c), so either we see its node here or it
	 * sees DONE there. The common no-waiter case takes no lock. */
	atomic_store(&t->state, XTC__T_DONE);
	if (atomic_load(&t->waiters) == NULL)
		return;
	xtc__task_wlock(t);
	n = atomic_exchange(&t->waiters, XTC__AWAIT_CLOSED);
	xtc__task_wunlock(t);
	await_fire_all(n, t->result, 0);
}

/* Free or recycle t unless an await waiter still holds it (XTC__WREF_ORPHAN:
 * the last waiter frees it). 1 if the caller may free/recycle t. */
static int task_unheld(xtc_task_t *t)
{
	if (XTC__LIKELY(atomic_load_explicit(&t->wrefs, memory_order_acquire) ==
	                0))
		return 1;
	return atomic_fetch_or_explicit(&t->wrefs, XTC__WREF_ORPHAN,
	                                memory_order_acq_rel) == 0;
}

/* Owner thread, root stack. */
static void task_reap(xtc_loop_t *loop, xtc_task_t *t)
{
	if (XTC__UNLIKELY(t->admitted)) { /* finished without a first run */
		t->admitted = 0;
		xtc__loop_admit_done(loop);
	}
	if (t->park_armed)
		park_cancel(loop, t);
	loop->live_tasks--;
	if (t->cleanup != NULL)
		t->cleanup(t, t->proc);
	if (t->is_fiber && !t->stack_lazy &&
	    !xtc__fiber_release_cached(&t->fiber)) {
		spool_put(loop, &t->fiber); /* the thread cache is full */
		xtc__fiber_release(&t->fiber);
	}
	if (!t->retain) {
		xtc__task_all_unlink(loop, t);
		if (task_unheld(t))
			task_free(loop, t);
	}
}

/* ------------------------------------------------------------------ */
/* spawning                                                             */
/* ------------------------------------------------------------------ */

static void spawn_post_fn(xtc_loop_t *loop, xtc__post_t *p)
{
	xtc_task_t *t = (xtc_task_t *)p;

	/* the admission stays with the task until it first runs (run_task) */
	if (loop->magic != XTC__LOOP_LIVE) {
		/* Finalising: it never ran, but it may be awaited already. */
		xtc__loop_adopt_orphan(loop, t);
		return;
	}
	loop->live_tasks++;
	xtc__task_all_link(loop, t);
	xtc__loop_make_ready(loop, t);
}

static void wake_post_fn(xtc_loop_t *loop, xtc__post_t *p)
{
	xtc_task_t *t = (xtc_task_t *)p;

	if (loop->magic == XTC__LOOP_LIVE)
		xtc__loop_make_ready(loop, t);
}

static void fiber_main(void *arg);

/* What a spawn sets besides the options (a small struct: a zeroed
 * xtc_task_t prototype on the stack cost a `rep stos` per spawn). */
struct spawn_body {
	int is_fiber;
	xtc_task_fn fn;
	void *user;
	xtc__fiber_entry body;
	xtc_coro_fn coro;
	void *arg;
};

static int task_spawn(xtc_loop_t *loop, const struct spawn_body *proto,
                      const xtc__spawn_opts_t *opts, xtc_task_t **out)
{
	int on_owner, admitted;
	xtc_task_t *t;
	int rc;

	if (!loop_live(loop) || xtc__loop_forked(loop))
		return XTC_E_INVAL;
	on_owner = xtc__loop_on_owner_thread(loop);
	if (loop->max_tasks > 0 && loop->live_tasks >= loop->max_tasks)
		return XTC_E_RESOURCE;
	if (!on_owner) {
		/* Validate what the lazy stack allocation would refuse. */
		size_t ss = opts ? opts->stack_size : 0;
		if (proto->is_fiber && ss != 0 && ss < XTC__STACK_MIN)
			return XTC_E_INVAL;
		if (proto->is_fiber && ss > XTC__STACK_MAX)
			return XTC_E_RANGE;
		if ((rc = xtc__loop_admit(loop)) != XTC_OK)
			return rc;
	}
	t = task_alloc(loop, on_owner);
	if (t == NULL) {
		if (!on_owner)
			xtc__loop_admit_done(loop);
		return XTC_E_NOMEM;
	}
	t->loop = loop;
	t->is_fiber = proto->is_fiber;
	t->fn = proto->fn;
	t->user = proto->user;
	t->body = proto->body;
	t->coro = proto->coro;
	t->arg = proto->arg;
	if (opts != NULL) {
		t->pinned = !opts->migratable;
		t->sched_class = opts->sched_class;
		t->proc = opts->proc;
		t->cleanup = opts->cleanup;
		t->retain = opts->retain != 0;
	} else {
		t->pinned = 1;
		t->sched_class = NULL;
		t->proc = NULL;
		t->cleanup = NULL;
		t->retain = 0;
	}
	/* Admitted work (cross-thread, or a dispatch posted here) maps its
	 * stack at first run: a paced backlog must hold no stacks (a stack is
	 * two VMAs; 65536 of them would exhaust vm.max_map_count). */
	admitted = !on_owner || (opts != NULL && opts->admitted);
	if (t->is_fiber && !admitted) {
		spool_refill(loop);
		rc = xtc__fiber_init(&t->fiber, opts ? opts->stack_size : 0,
		                     fiber_main, t);
		if (rc != 0) {
			task_free(loop, t);
			return rc;
		}
	} else if (t->is_fiber) {
		t->stack_lazy = 1;
		t->stack_size = opts ? opts->stack_size : 0;
	}
	if (out != NULL)
		*out = t;
	t->admitted = admitted;
	if (on_owner) {
		loop->live_tasks++;
		xtc__task_all_link(loop, t);
		xtc__loop_make_ready(loop, t);
		return 0;
	}
	t->node.fn = spawn_post_fn;
	rc = xtc__loop_post(loop, &t->node);
	if (rc != 0) {
		xtc__loop_admit_done(loop);
		free(t);
	}
	return rc;
}

int xtc__task_spawn_fiber(xtc_loop_t *loop, xtc__fiber_entry body, void *arg,
                          const xtc__spawn_opts_t *opts, xtc_task_t **out)
{
	struct spawn_body proto = { .is_fiber = 1, .body = body, .arg = arg };

	if (body == NULL)
		return XTC_E_INVAL;
	return task_spawn(loop, &proto, opts, out);
}

/* Used by async.c: a coroutine is a fiber task whose result is kept. */
int xtc__task_spawn_coro(xtc_loop_t *loop, xtc_coro_fn fn, void *arg,
                         const xtc__spawn_opts_t *opts, xtc_task_t **out)
{
	struct spawn_body proto = { .is_fiber = 1, .coro = fn, .arg = arg };

	if (fn == NULL)
		return XTC_E_INVAL;
	return task_spawn(loop, &proto, opts, out);
}

int xtc__task_spawn_fn(xtc_loop_t *loop, xtc_task_fn fn, void *user,
                       const xtc__spawn_opts_t *opts, xtc_task_t **out)
{
	struct spawn_body proto = { .is_fiber = 0, .fn = fn, .user = user };

	if (fn == NULL)
		return XTC_E_INVAL;
	return task_spawn(loop, &proto, opts, out);
}

int xtc_task_spawn(xtc_loop_t *loop, xtc_task_fn fn, void *user,
                   xtc_task_t **out_task)
{
	xtc__spawn_opts_t o = { .retain = out_task != NULL };

	return xtc__task_spawn_fn(loop, fn, user, &o, out_task);
}

/* ------------------------------------------------------------------ */
/* waking                                                               */
/* ------------------------------------------------------------------ */

static void enqueue_woken(xtc_task_t *t)
{
	xtc_loop_t *loop = xtc__task_loop(t);

	if (xtc__loop_on_owner_thread(loop)) {
		xtc__loop_make_ready(loop, t);
		return;
	}
	t->node.fn = wake_post_fn;
	xtc__loop_post(loop, &t->node);
}

int xtc__task_wake(xtc_task_t *t)
{
	uint32_t s;

	if (t == NULL)
		return XTC_E_INVAL;
	for (;;) {
		s = atomic_load(&t->state);
		switch (s) {
		case XTC__T_PARKED:
			if (!atomic_load_explicit(&t->lock_parked,
			                          memory_order_acquire)) {
				if (atomic_compare_exchange_strong(
					    &t->state, &s, XTC__T_READY)) {
					enqueue_woken(t);
					return 0;
				}
				continue;
			}
			/* lock-parked: only its lock holder wakes it */
			/* fall through */
		case XTC__T_READY:
		case XTC__T_RUNNING:
			if (atomic_load_explicit(&t->wake_pending,
			                         memory_order_relaxed) == 0)
				atomic_store(&t->wake_pending, 1);
			/* It may have parked before seeing the latch. */
			if (atomic_load(&t->state) == XTC__T_PARKED &&
			    !atomic_load_explicit(&t->lock_parked,
			                          memory_order_acquire))
				continue;
			return 0;
		default: /* NEW: will run anyway; DONE: nothing to do */
			return 0;
		}
	}
}

int xtc__task_wake_lockheld(xtc_task_t *t)
{
	if (t != NULL &&
	    atomic_load_explicit(&t->lock_parked, memory_order_relaxed)) {
		atomic_store_explicit(&t->state, XTC__T_READY,
		                      memory_order_relaxed);
		atomic_store_explicit(&t->lock_parked, 0, memory_order_release);
		enqueue_woken(t);
		return 0;
	}
	return xtc__task_wake(t);
}

int xtc_task_waker(xtc_task_t *task, xtc_waker_t *out)
{
	if (task == NULL || out == NULL)
		return XTC_E_INVAL;
	out->loop = xtc__task_loop(task);
	out->task = task;
	return 0;
}

int xtc_waker_wake(const xtc_waker_t *w)
{
	if (w == NULL || w->task == NULL)
		return XTC_E_INVAL;
	return xtc__task_wake(w->task);
}

/* Publish PARKED, then consume a latched wake. Returns 1 if the caller
 * still owns the task (a wake was latched and the CAS back to RUNNING
 * won): the park is void. */
static int park_publish(xtc_task_t *t)
{
	uint32_t s = XTC__T_PARKED;

	atomic_store(&t->state, XTC__T_PARKED);
	/* A seq_cst load is enough to see a latch (the waker stores it
	 * seq_cst, then re-reads the state): the RMW is paid only when there
	 * is something to consume, not on every park. */
	if (atomic_load(&t->wake_pending) == 0 ||
	    atomic_exchange(&t->wake_pending, 0) == 0)
		return 0;
	return atomic_compare_exchange_strong(&t->state, &s, XTC__T_RUNNING);
}

/* ------------------------------------------------------------------ */
/* dispatch                                                             */
/* ------------------------------------------------------------------ */

/* From a fiber that gave up the CPU (queued itself or parked): switch to
 * the next ready fiber directly when allowed, else to the root. Returns
 * when this fiber runs again (possibly on another thread). */
static void fiber_switch_out(xtc_loop_t *loop, xtc_task_t *t)
{
	xtc_task_t *next;

	/* An executor loop whose deque and class queues are empty serves the
	 * plain FIFO next, as a standalone loop does (hooks.busy: exec.c) */
	if ((XTC__LIKELY(loop->feat == 0) || (loop->feat == XTC__LF_EXEC &&
	    !loop->hooks.busy(loop))) && --loop->fair_left > 0 &&
	    (next = loop->rq_head) != NULL && next->is_fiber &&
	    !next->stack_lazy) {
		xtc__rq_pop(loop);
		if (next == t) {
			atomic_store_explicit(&t->state, XTC__T_RUNNING,
			                      memory_order_relaxed);
			loop->runs++;
			t->runs++;
			return;
		}
		atomic_store_explicit(&next->state, XTC__T_RUNNING,
		                      memory_order_relaxed);
		loop->runs++;
		next->runs++;
		xtc__tls_task = next;
		xtc__fiber_switch(&next->fiber);
		return;
	}
	xtc__tls_task = NULL;
	xtc__fiber_switch(loop->root);
}

static void fiber_finish(xtc_task_t *t) __attribute__((noreturn));
static void fiber_finish(xtc_task_t *t)
{
	xtc_loop_t *loop = t->loop;

	task_complete(t);
	loop->reap = t;
	xtc__tls_task = NULL;
	xtc__fiber_exit_to(loop->root);
}

static void fiber_main(void *arg)
{
	xtc_task_t *t = arg;

	if (t->coro != NULL)
		t->result = t->coro(t->arg);
	else
		t->body(t->arg);
	fiber_finish(t);
}

int xtc__task_exit(intptr_t result)
{
	xtc_task_t *t = xtc__tls_task;

	if (t == NULL || !t->is_fiber)
		return XTC_E_INVAL;
	if (xtc__gocb_depth > 0)
		return XTC_E_DEADLK;
	t->result = result;
	fiber_finish(t);
}

/* Root stack: run fiber t until control comes back to the root, serving
 * carrier-stack calls and reaping a finished fiber. */
static void run_fiber(xtc_loop_t *loop, xtc_task_t *t)
{
	xtc__tls_task = t;
	xtc__fiber_switch(&t->fiber);
	while (loop->ccall_fn != NULL) {
		void (*fn)(void *) = loop->ccall_fn;
		void *arg = loop->ccall_arg;
		xtc_task_t *back = loop->ccall_task;

		loop->ccall_fn = NULL;
		xtc__tls_task = NULL;
		xtc__gocb_enter();
		fn(arg);
		xtc__gocb_leave();
		xtc__tls_task = back;
		xtc__fiber_switch(&back->fiber);
	}
	xtc__tls_task = NULL;
}

static void run_stackless(xtc_loop_t *loop, xtc_task_t *t)
{
	int v;

	if (t->park_armed)
		park_cancel(loop, t);
	t->park_why = XTC__PW_NONE;
	xtc__tls_task = t;
	v = t->fn(t, t->user);
	xtc__tls_task = NULL;
	switch (v) {
	case XTC_TASK_RESCHED:
		xtc__loop_make_ready(loop, t);
		break;
	case XTC_TASK_PENDING:
		if (park_publish(t))
			xtc__loop_make_ready(loop, t);
		break;
	default: /* DONE, and any invalid verdict; reaped by run_task */
		task_complete(t);
		loop->reap = t;
		break;
	}
}

/* First run of a fiber spawned from another thread: map its stack here. A
 * failure finishes the task unrun (result XTC_E_NOMEM or the error). */
static int stack_materialize(xtc_loop_t *loop, xtc_task_t *t)
{
	int rc;

	spool_refill(loop);
	rc = xtc__fiber_init(&t->fiber, t->stack_size, fiber_main, t);

	if (rc == 0) {
		t->stack_lazy = 0;
		return 0;
	}
	t->result = rc;
	task_complete(t);
	task_reap(loop, t);
	return rc;
}

static void run_task(xtc_loop_t *loop, xtc_task_t *t)
{
	int64_t start = 0;
	uint32_t feat = loop->feat;

	if (XTC__UNLIKELY(t->admitted)) {
		/* first run of cross-thread work: its admission ends here, so
		 * admission is paced by execution, not by the inbox drain */
		t->admitted = 0;
		xtc__loop_admit_done(loop);
	}
	if (XTC__UNLIKELY(t->stack_lazy) && stack_materialize(loop, t) != 0)
		return;

	atomic_store_explicit(&t->state, XTC__T_RUNNING, memory_order_relaxed);
	loop->runs++;
	t->runs++;
	if (XTC__UNLIKELY(feat & XTC__LF_TIMED)) {
		start = xtc__now();
		t->run_start = start;
		if (loop->hooks.run_begin != NULL)
			loop->hooks.run_begin(loop, t, start);
	}
	if (t->is_fiber)
		run_fiber(loop, t);
	else
		run_stackless(loop, t);
	/* STALL CHECK / CLASS CHARGE: t is still valid here even when it
	 * finished (state DONE); it is reaped only afterwards. With feat == 0
	 * a fiber chain may have run several tasks; no hook cares then. */
	if (XTC__UNLIKELY(feat & XTC__LF_TIMED)) {
		int64_t end = loop->yield_at;
		loop->yield_at = 0;
		if (end < start) /* none, or left by a run nested in this one */
			end = xtc__now();
		loop->run_end_at = end;
		if (loop->hooks.run_end != NULL)
			loop->hooks.run_end(loop, t, end - start);
		/* Time-based fairness: a due timer or XTC__FAIR_NS since the
		 * last poll forces the poll at the end of this step. */
		if ((loop->heap_len > 0 && loop->heap[0]->deadline <= end) ||
		    end - loop->fair_last >= XTC__FAIR_NS)
			loop->fair_left = 0;
	}
	if (loop->reap != NULL) {
		xtc_task_t *dead = loop->reap;
		loop->reap = NULL;
		task_reap(loop, dead);
	}
}

static int fairness_poll(xtc_loop_t *loop)
{
	int n = 0;

	if (atomic_load_explicit(&loop->inbox, memory_order_relaxed) != NULL)
		n += inbox_drain(loop);
	if (loop->io->armed > 0 || loop->io->pending != NULL) {
		int r = xtc__io_poll(loop, 0);
		if (r > 0)
			n += r;
	}
	if (loop->heap_len > 0)
		n += xtc__timers_fire(loop, xtc__now());
	return n;
}

/* The hook (sched.c: classes, the executor's deque, the demoted level's
 * aging) first, then the plain FIFO, then the demoted level: sched.c
 * decides the order; the last line is also what serves demoted work when
 * preemption was switched off with some left. */
static xtc_task_t *pick(xtc_loop_t *loop)
{
	xtc_task_t *t;

	if (XTC__UNLIKELY(loop->feat != 0) && loop->hooks.pick != NULL) {
		/* CLASS PICK HOOK */
		t = loop->hooks.pick(loop);
		if (t != NULL)
			return t;
	}
	t = xtc__rq_pop(loop);
	if (XTC__UNLIKELY(t == NULL && loop->low_head != NULL))
		t = xtc__loop_low_pop(loop);
	return t;
}

int xtc__loop_step(xtc_loop_t *loop, int may_block)
{
	xtc_task_t *t;
	int64_t now, next, timeout;
	int progress = 0, n;

	if (!loop_live(loop) || !xtc__loop_on_owner_thread(loop))
		return XTC_E_INVAL;
	if (atomic_load_explicit(&loop->inbox, memory_order_relaxed) != NULL)
		progress += inbox_drain(loop);

	t = pick(loop);
	if (t != NULL) {
		run_task(loop, t);
		if (--loop->fair_left <= 0) {
			loop->fair_left = XTC__FAIR_RUNS;
			fairness_poll(loop);
			if (loop->feat & XTC__LF_TIMED)
				loop->fair_last = xtc__now();
		}
		return 1;
	}

	/* Nothing ready. Posts just drained may have changed what the caller
	 * waits for (quiescence, a finished task): report before blocking. */
	if (progress > 0)
		return 1;
	/* Timers, then the idle hook, then the poller. */
	loop->fair_left = XTC__FAIR_RUNS;
	now = xtc__now();
	if (loop->heap_len > 0 && xtc__timers_fire(loop, now) > 0)
		return 1;
	next = xtc__timers_next(loop);
	if (loop->hooks.idle != NULL && loop->feat != 0) {
		/* IDLE HOOK (steal / simulator) */
		n = loop->hooks.idle(loop, next);
		if (n != 0)
			return n > 0 ? 1 : n;
		if (loop->feat & XTC__LF_SIM)
			return progress > 0;
	}
	if (!may_block || atomic_load(&loop->stop))
		timeout = 0;
	else if (next < 0)
		timeout = -1;
	else
		timeout = next > now ? next - now : 0;
	if (timeout != 0) {
		spool_trim(loop, now, 0);
		atomic_store(&loop->sleeping, XTC__SLEEP_POLL);
		if (atomic_load(&loop->inbox) != NULL || atomic_load(&loop->stop))
			timeout = 0;
	}
	n = xtc__io_poll(loop, timeout);
	atomic_store_explicit(&loop->sleeping, 0, memory_order_relaxed);
	if (n < 0)
		return n;
	progress += n;
	if (loop->heap_len > 0)
		progress += xtc__timers_fire(loop, xtc__now());
	return progress > 0;
}

int xtc__loop_quiescent(const xtc_loop_t *loop)
{
	if (loop->live_tasks > 0 || loop->pending_timers > 0 ||
	    atomic_load(&loop->inbox) != NULL)
		return 0;
	if (loop->hooks.busy != NULL && loop->hooks.busy((xtc_loop_t *)loop))
		return 0;
	return 1;
}

/* ------------------------------------------------------------------ */
/* parking (fibers and stackless)                                       */
/* ------------------------------------------------------------------ */

static int poll_fd_now(int fd, uint32_t interest, uint32_t *rev)
{
	struct pollfd p = { .fd = fd, .events = (short)xtc__io_to_poll(interest) };
	int n;

	do
		n = poll(&p, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return XTC_E_IO;
	if (n == 0)
		return XTC_E_AGAIN;
	*rev = xtc__io_from_poll((uint32_t)p.revents);
	return 0;
}

int xtc__park(int64_t timeout_ns, int fd, uint32_t interest,
              uint32_t *out_revents)
{
	return xtc__park_ex(timeout_ns, fd, interest, out_revents, 0);
}

int xtc__park_ex(int64_t timeout_ns, int fd, uint32_t interest,
                 uint32_t *out_revents, int flags)
{
	xtc_task_t *t = xtc__tls_task;
	xtc_loop_t *loop;
	uint32_t rev = 0;
	int rc;

	if (out_revents != NULL)
		*out_revents = 0;
	/* Inside a Go callback first: it runs on the carrier stack, where no
	 * task is current. */
	if (xtc__gocb_depth > 0)
		return XTC_E_DEADLK;
	if (t == NULL || !t->is_fiber)
		return XTC_E_INVAL;
	if (t->park_armed || (fd >= 0 &&
	    (interest & (XTC_IO_READABLE | XTC_IO_WRITABLE)) == 0))
		return XTC_E_INVAL;
	loop = t->loop;
	if (timeout_ns == 0) {
		if (fd >= 0) {
			rc = poll_fd_now(fd, interest, &rev);
			if (rc == 0 && out_revents != NULL)
				*out_revents = rev;
			return rc;
		}
		return atomic_exchange(&t->wake_pending, 0) ? 0 : XTC_E_AGAIN;
	}
	t->park_why = XTC__PW_NONE;
	t->revents = 0;
	if (fd >= 0) {
		rc = xtc__io_arm(loop, fd, interest, park_io_cb, t, &t->park_io);
		if (rc != 0)
			return rc;
	}
	if (timeout_ns > 0) {
		int64_t now = xtc__now();
		int64_t dl = timeout_ns > INT64_MAX - now ? INT64_MAX
		                                          : now + timeout_ns;
		rc = xtc__timer_arm(loop, &t->park_timer, dl, park_timer_cb, t);
		if (rc != 0) {
			park_cancel(loop, t);
			return rc;
		}
	}
	t->park_armed = 1;
	if (!park_publish(t))
		fiber_switch_out(loop, t);
	/* Resumed (maybe on another loop after migration). */
	loop = t->loop;
	park_cancel(loop, t);
	if (t->park_why == XTC__PW_FD || t->revents != 0) {
		if (out_revents != NULL)
			*out_revents = t->revents;
		rc = 0;
	} else {
		rc = t->park_why == XTC__PW_TIMEOUT ? XTC_E_AGAIN : 0;
	}
	t->park_why = XTC__PW_NONE;
	if (XTC__UNLIKELY(atomic_load_explicit(&t->kill_pending,
	                                       memory_order_relaxed)) &&
	    !(flags & XTC__PARK_NOKILL))
		xtc__loop_up.proc_resumed();
	return rc;
}

int xtc__task_park(void)
{
	return xtc__park(-1, -1, 0, NULL);
}

/* The caller checked xtc__park_prepublish_ok and stored PARKED itself
 * under the lock its wakers take (loop_int.h): no registration, no
 * seq_cst publish, no latch to consume. */
int xtc__park_published(void)
{
	xtc_task_t *t = xtc__tls_task;

	t->park_why = XTC__PW_NONE;
	t->revents = 0;
	fiber_switch_out(t->loop, t);
	t->park_why = XTC__PW_NONE;
	if (XTC__UNLIKELY(atomic_load_explicit(&t->kill_pending,
	                                       memory_order_relaxed)))
		xtc__loop_up.proc_resumed();
	return 0;
}

/* The caller is a fiber task: queue it at the back and give up the CPU. */
int xtc__fiber_yield(void)
{
	return xtc__fiber_yield_ex(0);
}

static int yield_demoted(xtc_loop_t *loop, xtc_task_t *t, int64_t now);

int xtc__fiber_yield_ex(int flags)
{
	xtc_task_t *t = xtc__tls_task;
	xtc_loop_t *loop;

	/* a Go callback first: its carrier stack has no current task (Go code
	 * never runs on a fiber stack) */
	if (XTC__UNLIKELY(xtc__gocb_depth > 0))
		return XTC_E_DEADLK;
	if (XTC__UNLIKELY(t == NULL || !t->is_fiber))
		return XTC_E_INVAL;
	loop = t->loop;
	/* a voluntary yielder that used a whole slice since it last parked
	 * is CPU-bound work too: it must not keep the level above the
	 * preempted ones to itself (loop_int.h) */
	if (XTC__UNLIKELY(loop->feat & XTC__LF_PREEMPT) && loop->demote_ns > 0 &&
	    t->sched_class == NULL) {
		/* one clock read: the demotion's stamp and the run's end */
		int64_t now = xtc__now();
		if (t->svc_ns + (now - t->run_start) >= loop->demote_ns) {
			loop->yield_at = now;
			return yield_demoted(loop, t, now);
		}
	}
	make_ready(loop, t);
	fiber_switch_out(loop, t);
	if (XTC__UNLIKELY(atomic_load_explicit(&t->kill_pending,
	                                       memory_order_relaxed)) &&
	    !(flags & XTC__PARK_NOKILL))
		xtc__loop_up.proc_resumed();
	return 0;
}

/* Slice end: demote (loop_int.h), unless an idle executor peer takes the
 * task or demotion does not apply (no preemption, a class task: the class
 * queue keeps its own order and charge). */
int xtc__fiber_yield_slice(void)
{
	xtc_task_t *t = xtc__tls_task;
	xtc_loop_t *loop;

	if (XTC__UNLIKELY(xtc__gocb_depth > 0))
		return XTC_E_DEADLK;
	if (XTC__UNLIKELY(t == NULL || !t->is_fiber))
		return XTC_E_INVAL;
	loop = t->loop;
	t->cut = 1; /* the executor's next dispatch reads and clears it */
	if (!(loop->feat & XTC__LF_PREEMPT) || t->sched_class != NULL)
		return xtc__fiber_yield();
	return yield_demoted(loop, t, 0);
}

/* A default-lane fiber of a preempting loop gives up the CPU at the
 * demoted level (or to an idle executor peer). */
static int yield_demoted(xtc_loop_t *loop, xtc_task_t *t, int64_t now)
{
	if (!((loop->feat & XTC__LF_EXEC) && xtc__loop_up.exec_offer(loop, t)))
		low_push(loop, t, now);
	fiber_switch_out(loop, t);
	if (XTC__UNLIKELY(atomic_load_explicit(&t->kill_pending,
	                                       memory_order_relaxed)))
		xtc__loop_up.proc_resumed();
	return 0;
}

static int stackless_self_ok(xtc_task_t *self)
{
	return self != NULL && self == xtc__tls_task && !self->is_fiber &&
	       !self->park_armed;
}

int xtc_task_park_on_timer(xtc_task_t *self, int64_t delay_ns)
{
	int64_t now, dl;
	int rc;

	if (!stackless_self_ok(self) || delay_ns < 0)
		return XTC_E_INVAL;
	now = xtc__now();
	dl = delay_ns > INT64_MAX - now ? INT64_MAX : now + delay_ns;
	rc = xtc__timer_arm(self->loop, &self->park_timer, dl, park_timer_cb,
	                    self);
	if (rc == 0)
		self->park_armed = 1;
	return rc;
}

int xtc_task_park_on_fd(xtc_task_t *self, int fd, uint32_t interest)
{
	int rc;

	if (!stackless_self_ok(self) || fd < 0 ||
	    (interest & (XTC_IO_READABLE | XTC_IO_WRITABLE)) == 0)
		return XTC_E_INVAL;
	self->revents = 0;
	rc = xtc__io_arm(self->loop, fd, interest, park_io_cb, self,
	                 &self->park_io);
	if (rc == 0)
		self->park_armed = 1;
	return rc;
}

/* ------------------------------------------------------------------ */
/* carrier-stack calls                                                  */
/* ------------------------------------------------------------------ */

int xtc__carrier_call(void (*fn)(void *), void *arg)
{
	xtc_task_t *t = xtc__tls_task;
	xtc_loop_t *loop;

	if (fn == NULL)
		return XTC_E_INVAL;
	if (t != NULL && t->is_fiber) {
		loop = t->loop;
		loop->ccall_fn = fn;
		loop->ccall_arg = arg;
		loop->ccall_task = t;
		xtc__fiber_switch(loop->root);
		return 0;
	}
	xtc__gocb_enter();
	fn(arg);
	xtc__gocb_leave();
	return 0;
}

/* ------------------------------------------------------------------ */
/* lifecycle                                                            */
/* ------------------------------------------------------------------ */

/* Finalised loops are kept as shells (magic == XTC__LOOP_FINI) and reused
 * by the next init, so a call on a finalised loop reads valid memory and
 * returns XTC_E_INVAL instead of touching freed memory. The shell list only
 * holds as many loops as were ever alive at once. */
static xtc_loop_t *shells;
static pthread_mutex_t shells_mu = PTHREAD_MUTEX_INITIALIZER;

static xtc_loop_t *shell_get(void)
{
	xtc_loop_t *loop;

	pthread_mutex_lock(&shells_mu);
	loop = shells;
	if (loop != NULL)
		shells = loop->shell_next;
	pthread_mutex_unlock(&shells_mu);
	if (loop == NULL)
		loop = aligned_alloc(64, (sizeof(*loop) + 63) & ~(size_t)63);
	return loop;
}

static void shell_put(xtc_loop_t *loop)
{
	pthread_mutex_lock(&shells_mu);
	loop->shell_next = shells;
	shells = loop;
	pthread_mutex_unlock(&shells_mu);
}

/* fork(): a child gets a copy of every loop but none of the threads that
 * own or run them, and shares their kernel objects with the parent. Each
 * fork bumps a generation; a loop remembers the generation it was made
 * in, so the child can tell inherited loops from its own. */
static _Atomic uint32_t fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_child(void)
{
	atomic_fetch_add_explicit(&fork_gen, 1, memory_order_relaxed);
}

static void fork_register(void)
{
	(void)pthread_atfork(NULL, NULL, fork_child);
}

int xtc__loop_forked(const xtc_loop_t *loop)
{
	return loop->fork_gen !=
	       atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

int xtc_loop_init(xtc_loop_t **out)
{
	xtc_loop_t *loop;
	int rc;

	if (out == NULL)
		return XTC_E_INVAL;
	*out = NULL;
	loop = shell_get();
	if (loop == NULL)
		return XTC_E_NOMEM;
	memset(loop, 0, sizeof(*loop));
	pthread_once(&fork_once, fork_register);
	loop->fork_gen = atomic_load_explicit(&fork_gen, memory_order_relaxed);
	loop->index = -1;
	loop->fair_left = XTC__FAIR_RUNS;
	xtc__timers_init(loop);
	rc = xtc__io_init(loop);
	if (rc != 0) {
		loop->magic = XTC__LOOP_FINI;
		shell_put(loop);
		return rc;
	}
	rc = loop_id_alloc(loop);
	if (rc != 0) {
		xtc__io_fini(loop);
		loop->magic = XTC__LOOP_FINI;
		shell_put(loop);
		return rc;
	}
	atomic_store_explicit(&loop->magic, XTC__LOOP_LIVE, memory_order_release);
	*out = loop;
	return 0;
}

int xtc__loop_enter(xtc_loop_t *loop)
{
	uintptr_t none = 0;
	int rc;

	if (!loop_live(loop) || xtc__tls_loop != NULL || xtc__loop_forked(loop))
		return XTC_E_INVAL;
	rc = xtc__fiber_thread_init();
	if (rc != 0)
		return rc;
	if (!atomic_compare_exchange_strong(&loop->owner, &none,
	                                    xtc__thread_token()))
		return XTC_E_INVAL;
	loop->root = xtc__fiber_root();
	xtc__tls_loop = loop;
	atomic_store_explicit(&loop->started, 1, memory_order_release);
	return 0;
}

void xtc__loop_leave(xtc_loop_t *loop)
{
	if (loop == NULL || !xtc__loop_on_owner_thread(loop))
		return;
	xtc__tls_loop = NULL;
	atomic_store(&loop->owner, 0);
}

int xtc_loop_run(xtc_loop_t *loop)
{
	int rc;

	/* An executor's loop runs on its carrier (xtc_exec_run). */
	if (loop_live(loop) && loop->up.exec != NULL)
		return XTC_E_INVAL;
	rc = xtc__loop_enter(loop);
	if (rc != 0)
		return rc == XTC_E_NOMEM ? rc : XTC_E_INVAL;
	rc = 0;
	while (!atomic_load_explicit(&loop->stop, memory_order_relaxed) &&
	       !xtc__loop_quiescent(loop)) {
		rc = xtc__loop_step(loop, 1);
		if (rc < 0)
			break;
		rc = 0;
	}
	atomic_store(&loop->stop, 0);
	xtc__loop_leave(loop);
	return rc;
}

/* xtc_loop_wake/stop from any thread write the eventfd without a node:
 * they hold loop->rings meanwhile (seq_cst against inbox_close: either fini
 * sees the count or the caller sees the inbox closed). */
static int ring_enter(xtc_loop_t *loop)
{
	if (!loop_live(loop))
		return 0;
	atomic_fetch_add(&loop->rings, 1);
	if (atomic_load(&loop->inbox) != XTC__INBOX_CLOSED)
		return 1;
	atomic_fetch_sub(&loop->rings, 1);
	return 0;
}

static void ring_leave(xtc_loop_t *loop)
{
	atomic_fetch_sub_explicit(&loop->rings, 1, memory_order_release);
}

int xtc_loop_stop(xtc_loop_t *loop)
{
	if (!ring_enter(loop))
		return XTC_E_INVAL;
	atomic_store(&loop->stop, 1);
	if (!xtc__loop_on_owner_thread(loop)) {
		if (atomic_load(&loop->sleeping) == XTC__SLEEP_FUTEX)
			kick(loop);
		xtc__io_wakeup(loop);
	}
	ring_leave(loop);
	return 0;
}

int xtc_loop_wake(xtc_loop_t *loop)
{
	int rc;

	if (!ring_enter(loop))
		return XTC_E_INVAL;
	if (atomic_load(&loop->sleeping) == XTC__SLEEP_FUTEX)
		kick(loop);
	rc = xtc__io_wakeup(loop);
	ring_leave(loop);
	return rc;
}

/* Fini of an unfinished task: its waiters (threads, fibers of other
 * loops; fiber waiters of this loop were unhooked by their detach hooks)
 * get XTC_E_ABORTED. The list is sealed before DONE is published, so a
 * waiter that hooked in between is fired here, never taken for a normal
 * completion. */
static void task_abandon(xtc_task_t *t)
{
	xtc__await_node_t *n;

	xtc__task_wlock(t);
	n = atomic_exchange(&t->waiters, XTC__AWAIT_ABORTED);
	xtc__task_wunlock(t);
	atomic_store(&t->state, XTC__T_DONE);
	await_fire_all(n, 0, XTC_E_ABORTED);
}

/* Unhook every unfinished task that waits on an object a completer on
 * another thread may still fire (futures, blocking jobs, launch children):
 * first, so no later wake or result store can reach a released task. A
 * wake posted before its hook returned sits in the inbox and is dropped
 * by the drain that follows. */
static void detach_waiters(xtc_loop_t *loop)
{
	xtc_task_t *t;

	for (t = loop->all; t != NULL; t = t->all_next) {
		void (*fn)(void *) = t->detach;

		if (fn == NULL || atomic_load(&t->state) == XTC__T_DONE)
			continue;
		t->detach = NULL;
		fn(t->detach_arg);
	}
}

void xtc__loop_adopt_orphan(xtc_loop_t *loop, xtc_task_t *t)
{
	void (*fn)(void *) = t->detach;

	if (fn != NULL && atomic_load(&t->state) != XTC__T_DONE) {
		t->detach = NULL;
		fn(t->detach_arg);
	}
	loop->live_tasks++;
	xtc__task_all_link(loop, t);
}

static void release_all_tasks(xtc_loop_t *loop)
{
	xtc_task_t *t, *next;

	for (t = loop->all; t != NULL; t = next) {
		next = t->all_next;
		if (t->park_armed)
			park_cancel(loop, t);
		if (atomic_load(&t->state) != XTC__T_DONE) {
			task_abandon(t);
			if (t->cleanup != NULL)
				t->cleanup(t, t->proc);
			if (t->is_fiber && !t->stack_lazy)
				xtc__fiber_release(&t->fiber);
		}
		if (task_unheld(t))
			free(t);
	}
	loop->all = NULL;
	for (t = loop->task_free; t != NULL; t = next) {
		next = (xtc_task_t *)t->node.next;
		free(t);
	}
	loop->task_free = NULL;
	loop->task_free_len = 0;
	spare_drain(loop);
	loop->rq_head = loop->rq_tail = NULL;
	loop->low_head = loop->low_tail = NULL;
}

/* An executor's loops belong to it: xtc_exec_fini finalises them through
 * xtc__loop_fini_owned; a direct xtc_loop_fini would leave the executor
 * with a recycled shell. */
static int loop_fini(xtc_loop_t *loop);

int xtc_loop_fini(xtc_loop_t *loop)
{
	if (loop_live(loop) && loop->up.exec != NULL)
		return XTC_E_INVAL;
	return loop_fini(loop);
}

int xtc__loop_fini_owned(xtc_loop_t *loop)
{
	return loop_fini(loop);
}

static int loop_fini(xtc_loop_t *loop)
{
	xtc_loop_t *saved_loop = xtc__tls_loop;
	xtc_task_t *saved_task = xtc__tls_task;
	uintptr_t none = 0;

	if (!loop_live(loop))
		return XTC_E_INVAL;
	/* Running (on this thread or any other), or inside one of its tasks. */
	if (!atomic_compare_exchange_strong(&loop->owner, &none,
	                                    xtc__thread_token()))
		return XTC_E_INVAL;
	xtc__tls_loop = loop;
	xtc__tls_task = NULL;
	/* before the magic changes: a completer that fires while a hook waits
	 * for it reads the magic (wake -> post), ordered by the hook's wait */
	detach_waiters(loop);
	atomic_store_explicit(&loop->magic, XTC__LOOP_FINI, memory_order_release);
	inbox_close(loop);
	/* posts made by cleanup hooks from here on fail (XTC_E_INVAL) */
	release_all_tasks(loop);
	xtc__loop_up.proc_loop_fini(loop);
	xtc__loop_up.sched_loop_fini(loop);
	spool_trim(loop, 0, 1);
	xtc__timers_fini(loop);
	xtc__io_fini(loop);
	loop_id_free(loop);
	xtc__tls_loop = saved_loop;
	xtc__tls_task = saved_task;
	memset(&loop->hooks, 0, sizeof(loop->hooks));
	loop->feat = 0;
	memset(&loop->up, 0, sizeof(loop->up));
	atomic_store(&loop->owner, 0);
	shell_put(loop);
	return 0;
}

/* ------------------------------------------------------------------ */
/* hooks and feature bits                                               */
/* ------------------------------------------------------------------ */

void xtc__loop_set_hooks(xtc_loop_t *loop, const xtc__loop_hooks_t *hooks)
{
	if (loop == NULL)
		return;
	if (hooks == NULL)
		memset(&loop->hooks, 0, sizeof(loop->hooks));
	else
		loop->hooks = *hooks;
}

void xtc__loop_feat_set(xtc_loop_t *loop, uint32_t bits)
{
	if (loop != NULL)
		loop->feat |= bits;
}

void xtc__loop_feat_clear(xtc_loop_t *loop, uint32_t bits)
{
	if (loop != NULL)
		loop->feat &= ~bits;
}

void xtc__loop_budget_update(xtc_loop_t *loop)
{
	if (loop == NULL)
		return;
	if (loop->yield_budget > 0 || loop->lat_budget > 0)
		loop->feat |= XTC__LF_BUDGET;
	else
		loop->feat &= ~(uint32_t)XTC__LF_BUDGET;
}
