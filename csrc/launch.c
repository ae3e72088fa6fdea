/*
 * launch.c - xtc_launch: bounded-time work on a child proc.
 *
 * Model: the caller (a fiber task) spawns a child proc whose body runs the
 * user function, stores the result in a record on the caller's stack, wakes
 * the caller, and only then marks the record released. The caller parks
 * with the deadline; on expiry it kills the child (xtc_exit_pid with
 * XTC_LAUNCH_CANCEL_REASON) and waits, parking in short naps, until the
 * child's slot is no longer alive, i.e. its teardown (links, monitors,
 * mailbox) has run. The caller returns only after the child has either
 * released the record or died, so the record can live on its stack. For
 * the same reason the caller parks with XTC__PARK_NOKILL: when it is
 * killed while waiting it cancels the child, waits for it to be gone, and
 * only then unwinds.
 *
 * Invariants: the child touches the record only before `released`; a
 * child that is killed never reaches its store, so a killed child and a
 * completed one are told apart by `done`.
 *
 * Rejected: a monitor + DOWN message (needs the caller to be a proc with a
 * mailbox; plain xtc_async fibers may launch too); heap records with
 * refcounts (the wait-for-death rule makes the stack record safe).
 */
#include <stdatomic.h>
#include <string.h>

#include "loop_int.h"
#include "proc_int.h"
#include "xtc_launch.h"

typedef struct launch_rec {
	xtc_launch_fn fn;
	void *arg;
	xtc_task_t *caller;
	intptr_t result;
	_Atomic int done;
	_Atomic int released;
} launch_rec_t;

static void child_body(void *a)
{
	launch_rec_t *r = a;
	intptr_t v = r->fn(r->arg);
	xtc_task_t *caller = r->caller;
	r->result = v;
	atomic_store_explicit(&r->done, 1, memory_order_release);
	xtc__task_wake(caller);
	atomic_store_explicit(&r->released, 1, memory_order_release);
}

/* 1 while pid names a live proc. */
static int proc_alive(xtc_pid_t pid)
{
	xtc__ptab_t *ref = NULL;
	xtc__proc_t *p = xtc__proc_ref(pid, &ref);
	int alive = 0;
	if (p != NULL) {
		xtc__spin_lock(&p->lock);
		alive = p->gen == pid.gen && p->state == XTC__PROC_ALIVE;
		xtc__spin_unlock(&p->lock);
	}
	if (ref)
		xtc__proc_unref(ref);
	return alive;
}

/* Every park here is NOKILL: a kill of the caller must not unwind its
 * stack (and the record on it) while the child may still write there. */
static int park_nokill(int64_t ns)
{
	return xtc__park_ex(ns, -1, 0, NULL, XTC__PARK_NOKILL);
}

/* Wait (parked) until the child released the record or died. */
static void wait_gone(launch_rec_t *r, xtc_pid_t pid)
{
	int64_t nap = 20000;
	while (!atomic_load_explicit(&r->released, memory_order_acquire) &&
	       proc_alive(pid)) {
		(void)park_nokill(nap);
		if (nap < 2000000)
			nap *= 2;
	}
	/* a completed child may still be between its wake and `released` */
	while (atomic_load_explicit(&r->done, memory_order_acquire) &&
	       !atomic_load_explicit(&r->released, memory_order_acquire))
		(void)park_nokill(10000);
}

/* The calling proc was asked to exit while it waited: cancel the child,
 * wait until it no longer touches the record, then honour the kill. */
static void caller_killed(launch_rec_t *r, xtc_pid_t pid)
{
	(void)xtc_exit_pid(pid, XTC_LAUNCH_CANCEL_REASON);
	wait_gone(r, pid);
	xtc__proc_resumed(); /* does not return */
}

int xtc_launch(xtc_loop_t *loop, xtc_launch_fn fn, void *arg,
               int64_t timeout_ns, const xtc_launch_opts_t *opts,
               intptr_t *result)
{
	if (fn == NULL || (opts && opts->loop != 0))
		return XTC_E_INVAL;
	if (xtc__gocb_depth > 0)
		return XTC_E_DEADLK;
	if (!xtc__in_fiber())
		return XTC_E_INVAL;
	if (loop == NULL)
		loop = xtc__loop_current();
	launch_rec_t r;
	memset(&r, 0, sizeof r);
	r.fn = fn;
	r.arg = arg;
	r.caller = xtc__task_current();
	xtc_proc_opts_t po;
	memset(&po, 0, sizeof po);
	po.name = opts && opts->name ? opts->name : "xtc_launch";
	po.mailbox_cap = opts ? opts->mailbox_cap : 0;
	xtc_pid_t pid;
	int rc = xtc_proc_spawn(loop, child_body, &r, &po, &pid);
	if (rc != XTC_OK)
		return rc;
	int64_t deadline = timeout_ns < 0 ? INT64_MAX : xtc_clock_mono() + timeout_ns;
	for (;;) {
		if (atomic_load_explicit(&r.done, memory_order_acquire))
			break;
		if (!proc_alive(pid))
			break;
		int64_t now = xtc_clock_mono();
		if (now >= deadline) {
			(void)xtc_exit_pid(pid, XTC_LAUNCH_CANCEL_REASON);
			wait_gone(&r, pid);
			if (atomic_load(&r.done))
				break; /* finished just in time */
			return XTC_E_AGAIN;
		}
		int64_t left = deadline == INT64_MAX ? -1 : deadline - now;
		rc = park_nokill(left);
		if (atomic_load_explicit(&r.caller->kill_pending,
		                         memory_order_relaxed))
			caller_killed(&r, pid);
		if (rc != XTC_OK && rc != XTC_E_AGAIN) {
			/* cannot wait: do not leave the child holding our stack */
			(void)xtc_exit_pid(pid, XTC_LAUNCH_CANCEL_REASON);
			wait_gone(&r, pid);
			return rc;
		}
	}
	wait_gone(&r, pid);
	if (!atomic_load(&r.done))
		return XTC_E_ABORTED;
	if (result)
		*result = r.result;
	return XTC_OK;
}
