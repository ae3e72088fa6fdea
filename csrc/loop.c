/*
 * loop.c - the single-thread event loop: lifecycle, run queue, one step,
 * dispatch of tasks (stackless and fiber), parking and yielding, the
 * cross-thread inbox and carrier-stack calls. The task itself (struct,
 * stack, spawn, wake, reap, migration) is loop_task.c.
 *
 * Model (see loop_int.h for the full contract)
 *  - One owner thread at a time drives the loop (xtc__loop_enter). The run
 *    queue is a plain intrusive FIFO touched only by the owner. Other
 *    threads push onto an MPSC inbox (a Treiber stack drained whole and
 *    reversed, so each producer's order is kept) and ring the eventfd when
 *    the owner announced it is about to block (loop->sleeping).
 *  - Task state is one atomic word; the wake/park protocol (a wake CASes
 *    PARKED -> READY or latches wake_pending, a park publishes PARKED and
 *    consumes the latch) is loop_int.h's ("Task states"); the task itself,
 *    from spawn to reap, is loop_task.c's.
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
 *  - owner-only state (run queue, demoted level, timer heap, free lists)
 *    is touched only by the thread between xtc__loop_enter and leave.
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

/* ------------------------------------------------------------------ */
/* upcalls: what the loop fills in the table of base_int.h              */
/* ------------------------------------------------------------------ */

/* Preemption yields through the upcall table (base_int.h), not by name. */
__attribute__((constructor)) static void loop_slice_yield(void)
{
	xtc__up.slice_yield = xtc__fiber_yield_slice;
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
		xtc__up.exec_ring_run(loop);
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

	if (!xtc__loop_live(loop) || p == NULL || p->fn == NULL)
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
	 * plain FIFO next, as a standalone loop does (hooks.busy: exec_lane.c) */
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
		xtc__task_park_cancel(loop, t);
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
		xtc__task_complete(t);
		loop->reap = t;
		break;
	}
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
	if (XTC__UNLIKELY(t->stack_lazy) && xtc__task_materialize(loop, t) != 0)
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
		xtc__task_reap(loop, dead);
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

	if (!xtc__loop_live(loop) || !xtc__loop_on_owner_thread(loop))
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
	/* Timers, then the poller (an executor's carrier steals and parks
	 * outside the step: exec_carrier.c). */
	loop->fair_left = XTC__FAIR_RUNS;
	now = xtc__now();
	if (loop->heap_len > 0 && xtc__timers_fire(loop, now) > 0)
		return 1;
	next = xtc__timers_next(loop);
	if (!may_block || atomic_load(&loop->stop))
		timeout = 0;
	else if (next < 0)
		timeout = -1;
	else
		timeout = next > now ? next - now : 0;
	if (timeout != 0) {
		xtc__loop_spool_trim(loop, now, 0);
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
	rc = xtc__task_park_arm(loop, t, timeout_ns, fd, interest);
	if (rc != 0)
		return rc;
	xtc__stack_reclaim_check();
	if (!park_publish(t))
		fiber_switch_out(loop, t);
	/* Resumed (maybe on another loop after migration). */
	loop = t->loop;
	xtc__task_park_cancel(loop, t);
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
		xtc__up.proc_resumed();
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
	xtc__stack_reclaim_check();
	fiber_switch_out(t->loop, t);
	t->park_why = XTC__PW_NONE;
	if (XTC__UNLIKELY(atomic_load_explicit(&t->kill_pending,
	                                       memory_order_relaxed)))
		xtc__up.proc_resumed();
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
		xtc__up.proc_resumed();
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
	/* an involuntarily preempted fiber never changes thread: it may hold
	 * the carrier's thread-local state mid-update (errno aside, which the
	 * trampoline keeps), and the compiler may have cached TLS addresses */
	if (t->fiber.invol ||
	    !((loop->feat & XTC__LF_EXEC) && xtc__up.exec_offer(loop, t)))
		low_push(loop, t, now);
	fiber_switch_out(loop, t);
	if (XTC__UNLIKELY(atomic_load_explicit(&t->kill_pending,
	                                       memory_order_relaxed)))
		xtc__up.proc_resumed();
	return 0;
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

	if (!xtc__loop_live(loop) || xtc__tls_loop != NULL || xtc__loop_forked(loop))
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
	if (xtc__loop_live(loop) && loop->up.exec != NULL)
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
	if (!xtc__loop_live(loop))
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

/* An executor's loops belong to it: xtc_exec_fini finalises them through
 * xtc__loop_fini_owned; a direct xtc_loop_fini would leave the executor
 * with a recycled shell. */
static int loop_fini(xtc_loop_t *loop);

int xtc_loop_fini(xtc_loop_t *loop)
{
	if (xtc__loop_live(loop) && loop->up.exec != NULL)
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

	if (!xtc__loop_live(loop))
		return XTC_E_INVAL;
	/* Running (on this thread or any other), or inside one of its tasks. */
	if (!atomic_compare_exchange_strong(&loop->owner, &none,
	                                    xtc__thread_token()))
		return XTC_E_INVAL;
	xtc__tls_loop = loop;
	xtc__tls_task = NULL;
	/* before the magic changes: a completer that fires while a hook waits
	 * for it reads the magic (wake -> post), ordered by the hook's wait */
	xtc__loop_detach_waiters(loop);
	atomic_store_explicit(&loop->magic, XTC__LOOP_FINI, memory_order_release);
	inbox_close(loop);
	/* posts made by cleanup hooks from here on fail (XTC_E_INVAL) */
	xtc__loop_release_tasks(loop);
	xtc__up.proc_loop_fini(loop);
	xtc__up.sched_loop_fini(loop);
	xtc__loop_spool_trim(loop, 0, 1);
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
