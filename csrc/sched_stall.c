/*
 * sched_stall.c - the over-budget stall watchdog.
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
 * A counted stall is also counted for the scheduling class whose run it
 * was (xtc__class_stall_note), so a service sees which class stalls.
 *
 * Invariants: the count only grows; the state block is allocated at the
 * first setter call (by whichever thread, published with a CAS) and freed
 * at loop fini; settings are atomics that any thread stores directly, and
 * the feature bit is flipped on the owner. A setter from another thread
 * while the loop runs queues at most one request per loop: the block
 * embeds the post node and a queued flag, and the owner applies whatever
 * budget is current when it runs it (last writer wins), so a thread
 * calling the setters in a loop cannot grow the inbox or the heap however
 * long the owner takes (before: one malloc'd request per call).
 *
 * Alternatives rejected: a watcher thread with a signal (needs
 * async-signal-safe reporting and costs a thread per process even when
 * nobody looks; a poll of the published record by whoever wants in-flight
 * reports costs nothing on the carrier beyond two sequence bumps per run).
 */
#include "rtcode_int.h" /* first: this file is runtime code */
#include <execinfo.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sched_int.h"

typedef struct xtc__stall {
	_Atomic int64_t budget;
	_Atomic(xtc_stall_cb) cb;
	_Atomic(void *) user;
	_Atomic uint64_t count;
	/* identity of the run in flight, captured at run start: at run end
	 * the task (and its proc slot) may already be gone. Written by the
	 * owner only, between two bumps of seq (odd while writing); read by
	 * any thread with the sequence-lock retry. Fields are relaxed atomics
	 * so a racing read is defined (and retried). */
	_Atomic uint64_t seq;
	_Atomic uint64_t runs;
	_Atomic(xtc_task_t *) cur;
	_Atomic int cur_is_proc;
	_Atomic uint64_t cur_pid; /* packed xtc_pid_t */
	_Atomic(const char *) cur_name;
	_Atomic int64_t cur_start;
	_Atomic int64_t cur_ran;  /* -1 while the run is in flight */
	/* CPU time against wall time (see Model): the carrier thread's CPU
	 * clock and its reading the run started under (cpu0, taken at
	 * cpu_at, at most budget / XTC__STALL_CPU_DIV before the start);
	 * cur_cpu / cur_off: the split of the last over-budget run, -1 for
	 * a run that stayed under the budget (not measured) */
	_Atomic int cur_clock;
	_Atomic int64_t cur_cpu0;
	_Atomic int64_t cur_cpu;
	_Atomic int64_t cur_off;
	/* owner only: the last reading of the thread's CPU clock */
	int64_t base_cpu, base_at;
	int base_ok;
	/* the one cross-thread request (see Invariants) */
	_Atomic int apply_queued;
	/* cb and user change together: a report never pairs one callback
	 * with another's user pointer (taken only when a stall is reported) */
	xtc__spin_t cb_lock;
	xtc__post_t apply_node;
} xtc__stall_t;

#define RLX memory_order_relaxed

/* A run's CPU time is read from a sample of the thread's CPU clock taken
 * at most budget / XTC__STALL_CPU_DIV of wall time before the run started:
 * at most DIV syscalls per budget of busy wall time, none per run. */
#define XTC__STALL_CPU_DIV 8

static int64_t cpu_read(clockid_t c)
{
	struct timespec ts;
	if (clock_gettime(c, &ts) != 0)
		return -1;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
#define ACQ memory_order_acquire

/* A pid packed in one word (xtc__up.proc_label packs it the same way). */
static xtc_pid_t pid_unpack(uint64_t v)
{
	xtc_pid_t p;

	p.loop_id = (uint16_t)(v >> 48);
	p.local_id = (uint16_t)(v >> 32);
	p.gen = (uint32_t)v;
	return p;
}

static void wr_begin(xtc__stall_t *s)
{
	/* acquire: the field stores that follow cannot move above the odd
	 * count (a fence would do the same, but TSan rejects fences) */
	atomic_fetch_add_explicit(&s->seq, 1, memory_order_acq_rel);
}

static void wr_end(xtc__stall_t *s)
{
	atomic_fetch_add_explicit(&s->seq, 1, memory_order_release);
}

static int loop_ok(const xtc_loop_t *loop)
{
	return loop != NULL && loop->magic == XTC__LOOP_LIVE;
}

static void apply_post(xtc_loop_t *loop, xtc__post_t *n);

/* The stall block, created on first use by any thread (a CAS publishes
 * it; the hooks load it with acquire and do nothing while it is NULL). */
static xtc__stall_t *stall_get(xtc_loop_t *loop)
{
	xtc__stall_t *s = __atomic_load_n(&loop->up.stall, __ATOMIC_ACQUIRE);
	xtc__stall_t *n;

	if (s != NULL)
		return s;
	n = calloc(1, sizeof(*n));
	if (n == NULL)
		return NULL;
	n->apply_node.fn = apply_post;
	if (__atomic_compare_exchange_n(&loop->up.stall, &s, n, 0,
	    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return n;
	free(n);
	return s;
}

/* Owner thread (or a loop nobody runs): the feature bit follows the
 * budget current now. */
static void apply_feat(xtc_loop_t *loop, xtc__stall_t *s)
{
	if (atomic_load(&s->budget) > 0) {
		xtc__sched_attach(loop);
		xtc__loop_feat_set(loop, XTC__LF_STALL);
	} else {
		xtc__loop_feat_clear(loop, XTC__LF_STALL);
	}
}

static void apply_post(xtc_loop_t *loop, xtc__post_t *n)
{
	xtc__stall_t *s = (xtc__stall_t *)((char *)n -
	    offsetof(xtc__stall_t, apply_node));

	/* cleared before the budget is read: a setter that still saw the
	 * flag set stored its budget before that, so it is applied here */
	atomic_store(&s->apply_queued, 0);
	if (loop->magic == XTC__LOOP_LIVE)
		apply_feat(loop, s);
}

static void budget_changed(xtc_loop_t *loop, xtc__stall_t *s)
{
	if (atomic_load(&loop->owner) == 0 || xtc__loop_on_owner_thread(loop)) {
		apply_feat(loop, s);
		return;
	}
	if (atomic_exchange(&s->apply_queued, 1))
		return; /* the queued request will read our budget */
	if (xtc__loop_post(loop, &s->apply_node) != XTC_OK)
		atomic_store(&s->apply_queued, 0); /* finalised */
}

void xtc_loop_set_stall_budget(xtc_loop_t *loop, int64_t budget_ns)
{
	xtc__stall_t *s;

	if (!loop_ok(loop) || (s = stall_get(loop)) == NULL)
		return;
	atomic_store(&s->budget, budget_ns > 0 ? budget_ns : 0);
	budget_changed(loop, s);
}

void xtc_loop_set_stall_cb(xtc_loop_t *loop, xtc_stall_cb cb, void *user)
{
	xtc__stall_t *s;

	if (!loop_ok(loop) || (s = stall_get(loop)) == NULL)
		return;
	xtc__spin_lock(&s->cb_lock);
	atomic_store(&s->user, user);
	atomic_store(&s->cb, cb);
	xtc__spin_unlock(&s->cb_lock);
}

uint64_t xtc_loop_stall_count(const xtc_loop_t *loop)
{
	const xtc__stall_t *s;

	if (!loop_ok(loop) ||
	    (s = __atomic_load_n(&loop->up.stall, __ATOMIC_ACQUIRE)) == NULL)
		return 0;
	return atomic_load_explicit(&s->count, memory_order_relaxed);
}

void xtc__stall_begin(xtc_loop_t *loop, xtc_task_t *t, int64_t now)
{
	xtc__stall_t *s = __atomic_load_n(&loop->up.stall, __ATOMIC_ACQUIRE);
	void *p = t->proc;
	const char *name = NULL;
	uint64_t pid = 0;

	if (s == NULL)
		return;
	/* the CPU clock sample this run is measured from */
	int64_t budget = atomic_load_explicit(&s->budget, RLX);
	clockid_t clk;
	if (budget > 0 && (!s->base_ok || now - s->base_at < 0 ||
	    now - s->base_at >= budget / XTC__STALL_CPU_DIV) &&
	    pthread_getcpuclockid(pthread_self(), &clk) == 0) {
		s->base_cpu = cpu_read(clk);
		s->base_at = now;
		s->base_ok = s->base_cpu >= 0;
		atomic_store_explicit(&s->cur_clock, s->base_ok ? (int)clk : 0,
		                      RLX);
	}
	/* the proc layer is above this one: its upcall names the proc */
	if (p != NULL)
		pid = xtc__up.proc_label(p, &name); /* packed as below */
	wr_begin(s);
	atomic_store_explicit(&s->cur_cpu0, s->base_ok ? s->base_cpu : -1, RLX);
	atomic_store_explicit(&s->cur_cpu, -1, RLX);
	atomic_store_explicit(&s->cur_off, -1, RLX);
	atomic_store_explicit(&s->cur, t, RLX);
	atomic_store_explicit(&s->cur_is_proc, p != NULL, RLX);
	atomic_store_explicit(&s->cur_pid, pid, RLX);
	atomic_store_explicit(&s->cur_name, name, RLX);
	atomic_store_explicit(&s->cur_start, now, RLX);
	atomic_store_explicit(&s->cur_ran, -1, RLX);
	atomic_fetch_add_explicit(&s->runs, 1, RLX);
	wr_end(s);
}

int xtc_loop_stall_inflight(const xtc_loop_t *loop, xtc_stall_info_t *out)
{
	const xtc__stall_t *s;
	xtc__stall_t *w;
	uint64_t q0, q1;
	xtc_stall_info_t r;
	int64_t cpu0 = -1;
	int clk = 0;

	if (!loop_ok(loop) || out == NULL)
		return XTC_E_INVAL;
	memset(out, 0, sizeof(*out));
	s = __atomic_load_n(&loop->up.stall, __ATOMIC_ACQUIRE);
	if (s == NULL)
		return XTC_E_NOTFOUND;
	w = (xtc__stall_t *)s; /* atomics only: C11 loads take non-const */
	for (int tries = 0;; tries++) {
		q0 = atomic_load_explicit(&w->seq, memory_order_acquire);
		if (q0 & 1) {
			if (tries > 1000)
				return XTC_E_AGAIN;
			continue;
		}
		memset(&r, 0, sizeof(r));
		/* acquire loads keep the re-read of seq below them (a fence
		 * would too, but TSan rejects fences); free on x86-64 */
		r.run = atomic_load_explicit(&w->runs, ACQ);
		r.task = atomic_load_explicit(&w->cur, ACQ);
		if (atomic_load_explicit(&w->cur_is_proc, ACQ))
			r.pid = pid_unpack(atomic_load_explicit(&w->cur_pid,
			    ACQ));
		r.name = atomic_load_explicit(&w->cur_name, ACQ);
		r.started_ns = atomic_load_explicit(&w->cur_start, ACQ);
		r.ran_ns = atomic_load_explicit(&w->cur_ran, ACQ);
		r.cpu_ns = atomic_load_explicit(&w->cur_cpu, ACQ);
		r.off_cpu_ns = atomic_load_explicit(&w->cur_off, ACQ);
		cpu0 = atomic_load_explicit(&w->cur_cpu0, ACQ);
		clk = atomic_load_explicit(&w->cur_clock, ACQ);
		q1 = atomic_load_explicit(&w->seq, RLX);
		if (q0 == q1)
			break;
		if (tries > 1000)
			return XTC_E_AGAIN;
	}
	if (r.run == 0)
		return XTC_E_NOTFOUND;
	r.budget_ns = atomic_load_explicit(&w->budget, RLX);
	r.running = r.ran_ns < 0;
	if (r.running) {
		r.ran_ns = xtc__now() - r.started_ns;
		if (r.ran_ns < 0)
			r.ran_ns = 0;
		/* in flight past the budget: the carrier's CPU clock, read
		 * from this thread (the carrier pays nothing) */
		r.cpu_ns = r.off_cpu_ns = -1;
		int64_t c1;
		if (r.budget_ns > 0 && r.ran_ns >= r.budget_ns && cpu0 >= 0 &&
		    (c1 = cpu_read((clockid_t)clk)) >= cpu0) {
			r.cpu_ns = c1 - cpu0 < r.ran_ns ? c1 - cpu0 : r.ran_ns;
			r.off_cpu_ns = r.ran_ns - r.cpu_ns;
		}
	}
	*out = r;
	return XTC_OK;
}

static void default_report(xtc_loop_t *loop, const xtc__stall_t *s,
                           int64_t ran, int64_t budget, int64_t cpu)
{
	void *frames[32];
	char split[96] = "";
	int n;

	/* "ran" is wall time: the thread may not have been running */
	if (cpu >= 0)
		snprintf(split, sizeof split, " (on CPU %.3f ms, thread not "
		         "running %.3f ms)", cpu / 1e6, (ran - cpu) / 1e6);

	if (atomic_load_explicit(&s->cur_is_proc, RLX)) {
		xtc_pid_t pid = pid_unpack(atomic_load_explicit(&s->cur_pid,
		    RLX));
		const char *name = atomic_load_explicit(&s->cur_name, RLX);
		fprintf(stderr, "xtc: WARN stall: loop %u proc <%u.%u.%u> \"%s\" "
		    "ran %.3f ms%s >= budget %.3f ms\n", (unsigned)loop->id,
		    (unsigned)pid.loop_id, (unsigned)pid.local_id,
		    (unsigned)pid.gen, name ? name : "",
		    ran / 1e6, split, budget / 1e6);
	} else {
		fprintf(stderr, "xtc: WARN stall: loop %u task %p ran %.3f ms%s "
		    ">= budget %.3f ms\n", (unsigned)loop->id,
		    (void *)atomic_load_explicit(&s->cur, RLX),
		    ran / 1e6, split, budget / 1e6);
	}
	fflush(stderr);
	/* the loop thread's stack at the run-end boundary */
	n = backtrace(frames, 32);
	backtrace_symbols_fd(frames, n, STDERR_FILENO);
}

void xtc__stall_check(xtc_loop_t *loop, xtc_task_t *t, int64_t ran_ns)
{
	xtc__stall_t *s = __atomic_load_n(&loop->up.stall, __ATOMIC_ACQUIRE);
	int64_t budget;
	xtc_stall_cb cb;
	void *user;

	if (s == NULL)
		return;
	if (atomic_load_explicit(&s->cur, RLX) == t &&
	    atomic_load_explicit(&s->cur_ran, RLX) < 0) {
		wr_begin(s);
		atomic_store_explicit(&s->cur_ran, ran_ns < 0 ? 0 : ran_ns, RLX);
		wr_end(s);
	}
	budget = atomic_load_explicit(&s->budget, memory_order_relaxed);
	if (budget <= 0 || ran_ns < budget)
		return;
	/* over budget: how much of it the thread ran (one clock read, only
	 * here). The sample may precede the run's start by up to
	 * budget / DIV: the run's CPU time is at most what the clock moved
	 * since, and at most its wall time. */
	int64_t cpu0 = atomic_load_explicit(&s->cur_cpu0, RLX), cpu = -1;
	if (cpu0 >= 0 && s->base_ok) {
		int64_t c1 = cpu_read((clockid_t)atomic_load_explicit(
		    &s->cur_clock, RLX));
		if (c1 >= cpu0)
			cpu = c1 - cpu0 < ran_ns ? c1 - cpu0 : ran_ns;
	}
	if (atomic_load_explicit(&s->cur, RLX) == t) {
		wr_begin(s);
		atomic_store_explicit(&s->cur_cpu, cpu, RLX);
		atomic_store_explicit(&s->cur_off, cpu < 0 ? -1 : ran_ns - cpu,
		                      RLX);
		wr_end(s);
	}
	atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
	/* and the class's (the charge before this check named its lane),
	 * before the callback: a callback reading the counts sees this one */
	xtc__class_stall_note(loop);
	xtc__spin_lock(&s->cb_lock);
	cb = atomic_load(&s->cb);
	user = atomic_load(&s->user);
	xtc__spin_unlock(&s->cb_lock);
	if (cb != NULL)
		cb(loop, t, ran_ns, budget, user);
	else
		default_report(loop, s, ran_ns, budget, cpu);
}

void xtc__stall_loop_fini(xtc_loop_t *loop)
{
	free(loop->up.stall);
	loop->up.stall = NULL;
}
