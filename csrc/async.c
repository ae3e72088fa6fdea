/*
 * async.c - coroutines (xtc_async / xtc_await), yield, stack size and the
 * cooperative yield budget.
 *
 * Model: a coroutine is a fiber task of loop.c whose entry stores
 * coro(arg) as the task's result. xtc_await has three shapes, chosen by the
 * caller's context:
 *  - from a fiber task: hook a waiter node (on the caller's stack) onto the
 *    target and park until the target's completion marks the node done;
 *  - from a plain thread while nobody drives the target's loop: drive the
 *    loop on this thread (enter + step) until the target is done;
 *  - from a plain thread while another thread drives it: a futex wait on
 *    the node's done word.
 * From a stackless task body or a timer callback (the carrier stack of a
 * running loop) awaiting an unfinished task cannot block: XTC_E_INVAL.
 *
 * Completion is a handshake (loop_int.h, as futures): the completer takes
 * the node under the task's wlock, stores result and status, publishes
 * FIRING, wakes, publishes DONE; a waiter that sees FIRING waits for DONE,
 * so neither side touches the other's memory after it may be gone.
 * Loop fini, either side:
 *  - the target's loop: task_abandon seals the list ABORTED and fires each
 *    node with XTC_E_ABORTED. A hooked waiter holds a reference on the
 *    task (t->wrefs) until its last access, so fini does not free a task
 *    a waiter on another thread may still lock; the last waiter frees it.
 *  - the waiter's loop: a fiber waiter registers a detach hook for its
 *    whole wait; fini runs it, which unhooks the node (or settles a taken
 *    one) and drops the reference, so no completion reaches the released
 *    fiber.
 * The handle itself stays the caller's to keep valid: an await that starts
 * after the target's loop fini began uses a freed handle.
 *
 * The yield budget costs nothing unless set: xtc_yield_set_budget flips
 * XTC__LF_BUDGET, which makes the loop stamp run_start at dispatch (the
 * only clock read), and xtc_yield_check compares against it.
 *
 * Alternatives rejected: a lock-free waiter stack (a killed proc could not
 * unhook its node, leaving a pointer into a dead stack); polling the task
 * state from a plain thread (burns a CPU; the futex costs one syscall);
 * fini waiting for woken waiters to let go of the task (a fiber waiter's
 * loop may never run again, or be driven by the finalising thread).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loop_int.h"


int xtc_async(xtc_loop_t *loop, xtc_coro_fn fn, void *arg,
              xtc_task_t **out_task)
{
	xtc__spawn_opts_t o = { .retain = out_task != NULL };

	if (loop == NULL || fn == NULL)
		return XTC_E_INVAL;
	return xtc__task_spawn_coro(loop, fn, arg, &o, out_task);
}

void xtc_yield(void)
{
	(void)xtc__fiber_yield();
}

int xtc_yield_ex(void)
{
	return xtc__fiber_yield();
}

/* ---- await -------------------------------------------------------- */

static int task_done(xtc_task_t *t)
{
	return atomic_load(&t->state) == XTC__T_DONE; /* seq_cst: see hook */
}

/* A finished task's outcome: its result, or XTC_E_ABORTED when its loop
 * was finalised with it unfinished (the list was sealed ABORTED). */
static int done_result(xtc_task_t *t, intptr_t *result)
{
	if (atomic_load_explicit(&t->waiters, memory_order_acquire) ==
	    XTC__AWAIT_ABORTED)
		return XTC_E_ABORTED;
	*result = t->result;
	return 0;
}

/* 1 if hooked (a reference on t taken), 0 if the target already completed,
 * XTC_E_ABORTED if its loop was finalised with it unfinished. */
static int waiter_hook(xtc_task_t *t, xtc__await_node_t *n)
{
	xtc__await_node_t *head;
	int rc = 1;

	xtc__task_wlock(t);
	head = atomic_load_explicit(&t->waiters, memory_order_relaxed);
	if (head == XTC__AWAIT_ABORTED) {
		rc = XTC_E_ABORTED;
	} else if (head == XTC__AWAIT_CLOSED) {
		rc = 0;
	} else {
		n->next = head;
		atomic_fetch_add_explicit(&t->wrefs, 1, memory_order_relaxed);
		/* seq_cst: pairs with the completer's DONE store (loop.c) */
		atomic_store(&t->waiters, n);
	}
	xtc__task_wunlock(t);
	return rc;
}

/* The waiter's last access to t: drop the hook's reference, and free t
 * if its loop was finalised meanwhile and left it to us. */
static void waiter_unref(xtc_task_t *t)
{
	if (atomic_fetch_sub_explicit(&t->wrefs, 1, memory_order_acq_rel) ==
	    (XTC__WREF_ORPHAN | 1))
		free(t);
}

/* 1 if unhooked, 0 if the completer already owns the node (it will fire
 * it shortly). */
static int waiter_unhook(xtc_task_t *t, xtc__await_node_t *n)
{
	xtc__await_node_t *p, *prev = NULL;
	int found = 0;

	xtc__task_wlock(t);
	p = atomic_load_explicit(&t->waiters, memory_order_relaxed);
	if (!XTC__AWAIT_SEALED(p)) {
		for (; p != NULL; prev = p, p = p->next) {
			if (p != n)
				continue;
			if (prev != NULL)
				prev->next = n->next;
			else
				atomic_store_explicit(&t->waiters, n->next,
				                      memory_order_relaxed);
			found = 1;
			break;
		}
	}
	xtc__task_wunlock(t);
	return found;
}

static uint32_t node_state(xtc__await_node_t *n)
{
	return atomic_load_explicit(&n->done, memory_order_acquire);
}

/* A taken node: the completer is between FIRING and DONE (two stores and
 * a wake, preemption deferred), or about to start. Never parks, so a
 * detach hook run by loop fini may call it too. */
static void node_settle(xtc__await_node_t *n)
{
	unsigned spins = 0;

	while (node_state(n) != XTC__AW_DONE) {
		if (++spins < 128)
			XTC__CPU_RELAX();
		else
			sched_yield();
	}
}

/* A fired node's outcome (status 0 or XTC_E_ABORTED). */
static int node_outcome(const xtc__await_node_t *n, intptr_t *result)
{
	if (n->status == 0)
		*result = n->result;
	return n->status;
}

/* Take the node back, or, if the completer owns it, wait until it fired.
 * The outcome in the first case is t's own (it may have finished). */
static int node_withdraw(xtc_task_t *t, xtc__await_node_t *n,
                         intptr_t *result, int *withdrawn)
{
	*withdrawn = waiter_unhook(t, n);
	if (*withdrawn)
		return task_done(t) ? done_result(t, result) : XTC_E_AGAIN;
	node_settle(n);
	return node_outcome(n, result);
}

/* Waiter detach hook (xtc__task_set_detach): the waiting fiber's loop is
 * being finalised. Unhook (or settle) so the completion never reaches the
 * released fiber, and drop the reference the fiber would have dropped. */
struct await_detach {
	xtc_task_t *t;
	xtc__await_node_t *n;
};

static void await_detach(void *arg)
{
	struct await_detach *d = arg;

	if (!waiter_unhook(d->t, d->n))
		node_settle(d->n);
	waiter_unref(d->t);
}

/* Hooked fiber waiter: park until fired. *killed when a kill ended it. */
static int await_park(xtc_task_t *cur, xtc_task_t *t, xtc__await_node_t *n,
                      intptr_t *result, int *killed)
{
	int withdrawn;
	uint32_t s;

	/* The target may have completed without seeing the node (it skips
	 * the lock when the list looked empty). */
	if (task_done(t))
		return node_withdraw(t, n, result, &withdrawn);
	while ((s = node_state(n)) == XTC__AW_PENDING) {
		(void)xtc__park_ex(-1, -1, 0, NULL, XTC__PARK_NOKILL);
		if (atomic_load_explicit(&cur->kill_pending,
		                         memory_order_relaxed) &&
		    node_state(n) == XTC__AW_PENDING) {
			*killed = 1;
			/* Killed while waiting: unhook before unwinding. */
			(void)node_withdraw(t, n, result, &withdrawn);
			return XTC_E_ABORTED;
		}
	}
	if (s == XTC__AW_FIRING)
		node_settle(n);
	*killed = atomic_load_explicit(&cur->kill_pending,
	                               memory_order_relaxed) != 0;
	return node_outcome(n, result);
}

static int await_fiber(xtc_task_t *cur, xtc_task_t *t, intptr_t *result)
{
	xtc__await_node_t node = { .task = cur };
	struct await_detach d = { .t = t, .n = &node };
	int rc, killed = 0;

	rc = waiter_hook(t, &node);
	if (rc <= 0)
		return rc == 0 ? done_result(t, result) : rc;
	xtc__task_set_detach(cur, await_detach, &d);
	rc = await_park(cur, t, &node, result, &killed);
	xtc__task_set_detach(cur, NULL, NULL);
	waiter_unref(t);
	if (killed)
		xtc__proc_resumed(); /* may unwind: t and the node are let go */
	return rc;
}

static int await_thread(xtc_task_t *t, intptr_t *result)
{
	xtc__await_node_t node = { .task = NULL };
	int rc, withdrawn = 0;
	uint32_t s;

	rc = waiter_hook(t, &node);
	if (rc <= 0)
		return rc == 0 ? done_result(t, result) : rc;
	if (task_done(t)) {
		rc = node_withdraw(t, &node, result, &withdrawn);
	} else {
		while ((s = node_state(&node)) == XTC__AW_PENDING)
			xtc__futex_wait(&node.done, XTC__AW_PENDING, NULL);
		if (s == XTC__AW_FIRING)
			node_settle(&node);
		rc = node_outcome(&node, result);
	}
	waiter_unref(t);
	return rc;
}

static int await_drive(xtc_loop_t *loop, xtc_task_t *t, intptr_t *result)
{
	int rc = 0;

	while (!task_done(t)) {
		rc = xtc__loop_step(loop, 1);
		if (rc < 0)
			break;
		rc = 0;
	}
	xtc__loop_leave(loop);
	return rc != 0 ? rc : done_result(t, result);
}

int xtc_await(xtc_task_t *t, intptr_t *result)
{
	xtc_task_t *cur = xtc__tls_task;
	intptr_t r = 0;
	xtc_loop_t *home;
	int rc;

	/* t->loop changes when the executor migrates t: read it once, with an
	 * atomic load, since the migrating carrier writes it concurrently. */
	if (t == NULL)
		return XTC_E_INVAL;
	home = xtc__task_loop(t);
	if (home == NULL)
		return XTC_E_INVAL;
	if (t == cur)
		return XTC_E_DEADLK;
	if (task_done(t)) {
		rc = done_result(t, &r);
	} else {
		if (xtc__gocb_depth > 0)
			return XTC_E_DEADLK;
		if (cur != NULL && cur->is_fiber)
			rc = await_fiber(cur, t, &r);
		else if (cur != NULL || xtc__tls_loop != NULL)
			return XTC_E_INVAL; /* carrier stack of a running loop */
		else if (xtc__loop_enter(home) == 0)
			rc = await_drive(home, t, &r);
		else
			rc = await_thread(t, &r);
	}
	if (rc == 0 && result != NULL)
		*result = r;
	return rc;
}

/* ---- stack size --------------------------------------------------- */

size_t xtc_stack_size(void)
{
	return xtc__stack_default();
}

int xtc_set_stack_size(size_t bytes)
{
	if (bytes < 16 * 1024)
		return XTC_E_INVAL;
	return xtc__stack_set_default(bytes);
}

/* ---- yield budget ------------------------------------------------- */

void xtc_yield_set_budget(xtc_loop_t *loop, int64_t budget_ns)
{
	if (loop == NULL || loop->magic != XTC__LOOP_LIVE)
		return;
	loop->yield_budget = budget_ns > 0 ? budget_ns : 0;
	xtc__loop_budget_update(loop);
}

static int64_t effective_budget(const xtc_loop_t *loop)
{
	int64_t a = loop->yield_budget, b = loop->lat_budget;

	if (a <= 0)
		return b > 0 ? b : 0;
	if (b <= 0)
		return a;
	return a < b ? a : b;
}

int xtc_yield_check(void)
{
	xtc_task_t *t = xtc__tls_task;
	xtc_loop_t *loop;
	int64_t budget;
	int due = 0;

	if (t == NULL)
		return 0;
	loop = t->loop;
	if (XTC__LIKELY(loop->feat == 0))
		return 0;
	if ((loop->feat & XTC__LF_PREEMPT) && loop->hooks.check_due != NULL &&
	    loop->hooks.check_due(loop))
		due = 1;
	if (!due && (loop->feat & XTC__LF_BUDGET)) {
		budget = effective_budget(loop);
		if (budget > 0 && xtc__now() - t->run_start >= budget)
			due = 1;
	}
	if (due)
		atomic_fetch_add_explicit(&loop->yield_due, 1,
		                          memory_order_relaxed);
	return due;
}

int xtc_yield_if_due(void)
{
	if (!xtc_yield_check())
		return 0;
	/* the slice ran out: demoted when the loop preempts (loop_int.h) */
	return xtc__fiber_yield_slice() == 0;
}

uint64_t xtc_yield_due_count(const xtc_loop_t *loop)
{
	if (loop == NULL || loop->magic != XTC__LOOP_LIVE)
		return 0;
	return atomic_load_explicit(&loop->yield_due, memory_order_relaxed);
}
