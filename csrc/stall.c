/*
 * stall.c - the over-budget stall watchdog.
 *
 * Model: a loop with a stall budget has the XTC__LF_STALL feature bit, so
 * the loop measures every run (it reads the clock at run start and end) and
 * calls the run-end hook with the run's wall time; a run that took at least
 * the budget is counted and reported, synchronously, on the loop thread:
 * through the user's callback, or by default as one line on stderr naming
 * the loop, the proc (pid and name) or the task pointer, the run time and the
 * budget, followed by a backtrace of the loop thread. Detection is at the
 * run-end boundary: a fiber that never yields is reported when it finally
 * gives the loop back (preemption, see xtc_preempt(3), bounds that).
 *
 * Invariants: the count only grows; the state block is allocated at the
 * first setter call and freed at loop fini; settings are atomics so any
 * thread may change them, and the feature bit is flipped on the owner.
 *
 * Alternatives rejected: a watcher thread with a signal (can report a hog
 * while it still runs, but needs async-signal-safe reporting and costs a
 * thread; the preemption monitor already covers the "still running" case).
 */
#include <execinfo.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sched_int.h"
#include "proc_int.h"

typedef struct xtc__stall {
	_Atomic int64_t budget;
	_Atomic(xtc_stall_cb) cb;
	_Atomic(void *) user;
	_Atomic uint64_t count;
	/* identity of the run in flight, captured at run start: at run end
	 * the task (and its proc slot) may already be gone */
	xtc_task_t *cur;
	int cur_is_proc;
	xtc_pid_t cur_pid;
	const char *cur_name;
} xtc__stall_t;

static int loop_ok(const xtc_loop_t *loop)
{
	return loop != NULL && loop->magic == XTC__LOOP_LIVE;
}

/* The stall block, created on first use, on the owner thread (or before
 * the loop runs), so the run-end hook never races its allocation. */
static xtc__stall_t *stall_of(xtc_loop_t *loop)
{
	xtc__stall_t *s = loop->stall;

	if (s == NULL) {
		s = calloc(1, sizeof(*s));
		/* published for the any-thread count getter */
		__atomic_store_n(&loop->stall, s, __ATOMIC_RELEASE);
	}
	return s;
}

enum { SET_BUDGET, SET_CB };

struct stall_req {
	int what;
	int64_t budget;
	xtc_stall_cb cb;
	void *user;
};

static void apply(xtc_loop_t *loop, void *arg)
{
	struct stall_req *r = arg;
	xtc__stall_t *s;

	if (loop->magic == XTC__LOOP_LIVE && (s = stall_of(loop)) != NULL) {
		if (r->what == SET_CB) {
			atomic_store(&s->user, r->user);
			atomic_store(&s->cb, r->cb);
		} else if (r->budget > 0) {
			atomic_store(&s->budget, r->budget);
			xtc__sched_attach(loop);
			xtc__loop_feat_set(loop, XTC__LF_STALL);
		} else {
			atomic_store(&s->budget, 0);
			xtc__loop_feat_clear(loop, XTC__LF_STALL);
		}
	}
	free(r);
}

static void request(xtc_loop_t *loop, struct stall_req r)
{
	struct stall_req *p;

	if (!loop_ok(loop) || (p = malloc(sizeof(*p))) == NULL)
		return;
	*p = r;
	if (xtc__sched_on_owner(loop, apply, p) != XTC_OK)
		free(p);
}

void xtc_loop_set_stall_budget(xtc_loop_t *loop, int64_t budget_ns)
{
	request(loop, (struct stall_req){ SET_BUDGET,
	    budget_ns > 0 ? budget_ns : 0, NULL, NULL });
}

void xtc_loop_set_stall_cb(xtc_loop_t *loop, xtc_stall_cb cb, void *user)
{
	request(loop, (struct stall_req){ SET_CB, 0, cb, user });
}

uint64_t xtc_loop_stall_count(const xtc_loop_t *loop)
{
	const xtc__stall_t *s;

	if (!loop_ok(loop) ||
	    (s = __atomic_load_n(&loop->stall, __ATOMIC_ACQUIRE)) == NULL)
		return 0;
	return atomic_load_explicit(&s->count, memory_order_relaxed);
}

void xtc__stall_begin(xtc_loop_t *loop, xtc_task_t *t)
{
	xtc__stall_t *s = loop->stall;
	xtc__proc_t *p = t->proc;

	if (s == NULL)
		return;
	s->cur = t;
	s->cur_is_proc = p != NULL;
	if (p != NULL) {
		s->cur_pid = xtc__proc_pid(p);
		s->cur_name = p->name;
	}
}

static void default_report(xtc_loop_t *loop, const xtc__stall_t *s,
                           int64_t ran, int64_t budget)
{
	void *frames[32];
	int n;

	if (s->cur_is_proc) {
		fprintf(stderr, "xtc: WARN stall: loop %u proc <%u.%u.%u> \"%s\" "
		    "ran %.3f ms >= budget %.3f ms\n", (unsigned)loop->id,
		    (unsigned)s->cur_pid.loop_id, (unsigned)s->cur_pid.local_id,
		    (unsigned)s->cur_pid.gen, s->cur_name ? s->cur_name : "",
		    ran / 1e6, budget / 1e6);
	} else {
		fprintf(stderr, "xtc: WARN stall: loop %u task %p ran %.3f ms >= "
		    "budget %.3f ms\n", (unsigned)loop->id, (void *)s->cur,
		    ran / 1e6, budget / 1e6);
	}
	fflush(stderr);
	/* the loop thread's stack at the run-end boundary */
	n = backtrace(frames, 32);
	backtrace_symbols_fd(frames, n, STDERR_FILENO);
}

void xtc__stall_check(xtc_loop_t *loop, xtc_task_t *t, int64_t ran_ns)
{
	xtc__stall_t *s = loop->stall;
	int64_t budget;
	xtc_stall_cb cb;

	if (s == NULL)
		return;
	budget = atomic_load_explicit(&s->budget, memory_order_relaxed);
	if (budget <= 0 || ran_ns < budget)
		return;
	atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
	cb = atomic_load(&s->cb);
	if (cb != NULL)
		cb(loop, t, ran_ns, budget, atomic_load(&s->user));
	else
		default_report(loop, s, ran_ns, budget);
}

void xtc__stall_loop_fini(xtc_loop_t *loop)
{
	free(loop->stall);
	loop->stall = NULL;
}

void xtc_exec_set_stall_budget(xtc_exec_t *exec, int64_t budget_ns)
{
	int n = xtc_exec_n_loops(exec);

	for (int i = 0; i < n; i++)
		xtc_loop_set_stall_budget(xtc_exec_loop(exec, i), budget_ns);
}
