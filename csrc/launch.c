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
 * Loop fini. The caller's loop may be finalised while it waits; the fiber
 * is then released without returning, so the wait-for-death rule cannot
 * hold. The caller registers a detach hook (xtc__task_set_detach) that
 * fini runs: it kills the child, and the child reads and writes the record
 * only under its own slot lock after checking it was not killed, marking
 * `firing` before it stores. So after the kill either the child had
 * already begun its store (the hook waits for `released`, a few stores
 * away) or it never touches the record again. A child on the finalised
 * loop itself is released with it and needs nothing.
 *
 * Invariants: the child touches the record only while not killed (checked
 * under its slot lock, which the kill takes) and before `released`; a
 * child that is killed before its store never writes, so a killed child
 * and a completed one are told apart by `done`.
 *
 * Rejected: a monitor + DOWN message (needs the caller to be a proc with a
 * mailbox; plain xtc_async fibers may launch too); heap records with
 * refcounts (a child killed before it ran would leak its reference: no
 * proc exit hook runs user code); waiting at fini for the child to die
 * (its loop may never run again: a hang).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "loop_int.h"
#include "proc_int.h"
#include "xtc_launch.h"

typedef struct launch_rec {
	xtc_launch_fn fn;
	void *arg;
	xtc_task_t *caller;
	xtc_pid_t pid;
	intptr_t result;
	_Atomic int firing;   /* the child began its store (under its lock) */
	_Atomic int done;
	_Atomic int released;
} launch_rec_t;

/* Under the child's own slot lock: 1 if it was not killed, so the caller
 * is still there (the caller's kills all take this lock). With `fire` the
 * child then commits to its store. */
static int child_may_touch(launch_rec_t *r, int fire, xtc_launch_fn *fn,
                           void **arg)
{
	xtc__proc_t *self = xtc__proc_current();
	int ok;

	xtc__spin_lock(&self->lock);
	ok = !self->kill_pending;
	if (ok && fire)
		atomic_store_explicit(&r->firing, 1, memory_order_release);
	if (ok && !fire) {
		*fn = r->fn;
		*arg = r->arg;
	}
	xtc__spin_unlock(&self->lock);
	return ok;
}

static void child_body(void *a)
{
	launch_rec_t *r = a;
	xtc_launch_fn fn = NULL;
	void *arg = NULL;
	intptr_t v;

	if (!child_may_touch(r, 0, &fn, &arg))
		return;
	v = fn(arg);
	if (!child_may_touch(r, 1, NULL, NULL))
		return;
	r->result = v;
	atomic_store_explicit(&r->done, 1, memory_order_release);
	xtc__task_wake(r->caller);
	atomic_store_explicit(&r->released, 1, memory_order_release);
}

/* Detach hook, run by the caller's loop fini on the finalising thread. */
static void launch_detach(void *a)
{
	launch_rec_t *r = a;
	unsigned spins = 0;

	if (r->pid.loop_id == r->caller->loop->id)
		return; /* released with the caller */
	(void)xtc_exit_pid(r->pid, XTC_LAUNCH_CANCEL_REASON);
	/* The kill took the child's lock: a store begun before it is visible
	 * here and ends with `released`; none can begin after it. */
	if (!atomic_load_explicit(&r->firing, memory_order_acquire))
		return;
	while (!atomic_load_explicit(&r->released, memory_order_acquire))
		if (++spins % 128 == 0)
			sched_yield();
		else
			XTC__CPU_RELAX();
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
	xtc__task_set_detach(r->caller, NULL, NULL);
	xtc__proc_resumed(); /* does not return */
}

/* The child runs: wait for it (deadline, kills), and return only once it
 * no longer touches r. */
static int launch_wait(launch_rec_t *r, int64_t timeout_ns)
{
	xtc_pid_t pid = r->pid;
	int64_t deadline = timeout_ns < 0 ? INT64_MAX
	    : xtc__deadline_after(xtc_clock_mono(), timeout_ns);
	int rc;

	for (;;) {
		if (atomic_load_explicit(&r->done, memory_order_acquire))
			break;
		if (!proc_alive(pid))
			break;
		int64_t now = xtc_clock_mono();
		if (now >= deadline) {
			(void)xtc_exit_pid(pid, XTC_LAUNCH_CANCEL_REASON);
			wait_gone(r, pid);
			if (atomic_load(&r->done))
				break; /* finished just in time */
			return XTC_E_AGAIN;
		}
		int64_t left = deadline == INT64_MAX ? -1 : deadline - now;
		rc = park_nokill(left);
		if (atomic_load_explicit(&r->caller->kill_pending,
		                         memory_order_relaxed))
			caller_killed(r, pid);
		if (rc != XTC_OK && rc != XTC_E_AGAIN) {
			/* cannot wait: do not leave the child holding our stack */
			(void)xtc_exit_pid(pid, XTC_LAUNCH_CANCEL_REASON);
			wait_gone(r, pid);
			return rc;
		}
	}
	wait_gone(r, pid);
	return atomic_load(&r->done) ? XTC_OK : XTC_E_ABORTED;
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
	int rc = xtc_proc_spawn(loop, child_body, &r, &po, &r.pid);
	if (rc != XTC_OK)
		return rc;
	xtc__task_set_detach(r.caller, launch_detach, &r);
	rc = launch_wait(&r, timeout_ns);
	xtc__task_set_detach(r.caller, NULL, NULL);
	if (rc == XTC_OK && result)
		*result = r.result;
	return rc;
}
