/*
 * loop_task.c - the task: its struct, its stack, its park registrations,
 * and its life from spawn through wakes to completion, reaping and
 * migration. The loop that runs it is loop.c; the task's state machine and
 * the wake/park protocol are loop_int.h's (its model, "Task states").
 *
 * Model:
 *  1. Stacks: an owner-thread spawn maps its stack at once (the error is
 *     returned to the caller); a cross-thread spawn maps it at first run
 *     (xtc__task_materialize), so a backlog in the inbox holds no stacks,
 *     and the inbox accepts at most XTC__REMOTE_SPAWN_MAX pending spawns
 *     (XTC_E_AGAIN beyond). Stacks the thread's cache cannot take at reap
 *     wait in a per-loop overflow pool and go back to the cache at the
 *     next spawn; stacks the pool did not need for XTC__SPOOL_TRIM_NS are
 *     unmapped when the loop idles.
 *  2. Task structs: reaped ones are recycled, first into a short list of
 *     spares for spawns from other threads (loop->spare: the owner pushes,
 *     a foreign spawner pops under spare_lock), then into the owner's own
 *     list. A foreign spawn used to calloc its struct and the owner to
 *     free it: a malloc on one thread and a free into its arena from
 *     another per spawn, with arena lock contention and heap trims.
 *  3. Migration (xtc__task_detach/attach): a READY task leaves one loop's
 *     bookkeeping on that loop's owner thread and joins another's on its
 *     owner thread; the executor carries it between them through the two
 *     loops' inboxes (exec_carrier.c).
 *
 * Invariants:
 *  1. live_tasks counts tasks spawned onto this loop (drained from the
 *     inbox) and not yet reaped; a task struct is recycled only after reap
 *     and only without `retain`.
 *  2. A task has at most one outstanding park registration (timer and/or
 *     fd), cancelled on the owner thread before the task runs again or
 *     leaves the loop.
 *  3. A finished task is released only when no await waiter holds it
 *     (XTC__WREF_ORPHAN: the last waiter frees it).
 *
 * Rejected: a per-wake heap message (allocation on the hot path, failure
 * modes); a memset of the struct per spawn (two `rep stos` dominated the
 * spawn path: task_reset is field by field); migration done by the
 * executor on the loop's fields (the loop's bookkeeping belongs here).
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

#define TASK_FREE_MAX 512
#define TASK_FREE_OWN 256 /* kept by the owner before feeding the spares */
#define SPARE_MAX 256 /* task structs kept for foreign spawners */

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
void xtc__loop_spool_trim(xtc_loop_t *loop, int64_t now, int all)
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

void xtc__task_park_cancel(xtc_loop_t *loop, xtc_task_t *t)
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

/* Owner: register the park of fiber task t on fd (>= 0) and/or a timeout
 * (> 0 ns); on failure nothing stays registered. */
int xtc__task_park_arm(xtc_loop_t *loop, xtc_task_t *t, int64_t timeout_ns,
                       int fd, uint32_t interest)
{
	int rc;

	if (fd >= 0) {
		rc = xtc__io_arm(loop, fd, interest, park_io_cb, t, &t->park_io);
		if (rc != 0)
			return rc;
	}
	if (timeout_ns > 0) {
		int64_t now = xtc__now();
		int64_t dl = xtc__deadline_after(now, timeout_ns);
		rc = xtc__timer_arm(loop, &t->park_timer, dl, park_timer_cb, t);
		if (rc != 0) {
			xtc__task_park_cancel(loop, t);
			return rc;
		}
	}
	t->park_armed = 1;
	return 0;
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
void xtc__task_complete(xtc_task_t *t)
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
void xtc__task_reap(xtc_loop_t *loop, xtc_task_t *t)
{
	if (XTC__UNLIKELY(t->admitted)) { /* finished without a first run */
		t->admitted = 0;
		xtc__loop_admit_done(loop);
	}
	if (t->park_armed)
		xtc__task_park_cancel(loop, t);
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
	xtc__loop_make_ready_inl(loop, t);
}

static void wake_post_fn(xtc_loop_t *loop, xtc__post_t *p)
{
	xtc_task_t *t = (xtc_task_t *)p;

	if (loop->magic == XTC__LOOP_LIVE)
		xtc__loop_make_ready_inl(loop, t);
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

	if (!xtc__loop_live(loop) || xtc__loop_forked(loop))
		return XTC_E_INVAL;
	on_owner = xtc__loop_on_owner_thread(loop);
	if (loop->max_tasks > 0 && loop->live_tasks >= loop->max_tasks)
		return XTC_E_RESOURCE;
	if (!on_owner) {
		/* Validate what the lazy stack allocation would refuse. */
		size_t ss = opts ? opts->stack_size : 0;
		if (proto->is_fiber && (rc = xtc__stack_size_check(ss)) != XTC_OK)
			return rc;
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
		xtc__loop_make_ready_inl(loop, t);
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
		xtc__loop_make_ready_inl(loop, t);
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


static void fiber_finish(xtc_task_t *t) __attribute__((noreturn));
static void fiber_finish(xtc_task_t *t)
{
	xtc_loop_t *loop = t->loop;

	xtc__task_complete(t);
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


/* First run of a fiber spawned from another thread: map its stack here. A
 * failure finishes the task unrun (result XTC_E_NOMEM or the error). */
int xtc__task_materialize(xtc_loop_t *loop, xtc_task_t *t)
{
	int rc;

	spool_refill(loop);
	rc = xtc__fiber_init(&t->fiber, t->stack_size, fiber_main, t);

	if (rc == 0) {
		t->stack_lazy = 0;
		return 0;
	}
	t->result = rc;
	xtc__task_complete(t);
	xtc__task_reap(loop, t);
	return rc;
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
	dl = xtc__deadline_after(now, delay_ns);
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
void xtc__loop_detach_waiters(xtc_loop_t *loop)
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

void xtc__loop_release_tasks(xtc_loop_t *loop)
{
	xtc_task_t *t, *next;

	for (t = loop->all; t != NULL; t = next) {
		next = t->all_next;
		if (t->park_armed)
			xtc__task_park_cancel(loop, t);
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

/* ------------------------------------------------------------------ */
/* migration (an executor moves a stolen task between its loops)        */
/* ------------------------------------------------------------------ */

/* An admission (loop_int.h) moves with a task that has not run yet. */
static void admission_move(xtc_loop_t *from, xtc_loop_t *to)
{
	atomic_fetch_add_explicit(&to->remote_pending, 1, memory_order_relaxed);
	xtc__loop_admit_done(from);
}

void xtc__task_detach(xtc_loop_t *from, xtc_task_t *t, xtc_loop_t *to)
{
	/* A task woken early from a timed or fd park still has its timer in
	 * from's heap and its fd in from's poller; only from's owner may touch
	 * those, so the registration ends here (the resumed park finds nothing
	 * armed). */
	if (t->park_armed)
		xtc__task_park_cancel(from, t);
	xtc__task_all_unlink(from, t);
	from->live_tasks--;
	/* Atomic: wakers and awaiters read it concurrently (xtc__task_loop). */
	xtc__task_set_loop(t, to);
	if (t->admitted) /* not run yet: its admission moves with it */
		admission_move(from, to);
}

void xtc__task_attach(xtc_loop_t *l, xtc_task_t *t)
{
	xtc__task_all_link(l, t);
	l->live_tasks++;
}

void xtc__task_detach_undo(xtc_loop_t *from, xtc_task_t *t, xtc_loop_t *to)
{
	if (t->admitted)
		admission_move(to, from);
	xtc__task_set_loop(t, from);
	xtc__task_attach(from, t);
	xtc__loop_make_ready(from, t);
}
