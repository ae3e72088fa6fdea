/*
 * xb_tail.c - the xtc contender of the tail-latency workload.
 *
 * One executor with `carriers` loops, involuntary preemption at a fixed
 * slice (or the adaptive controller, or none for the control run, or
 * clock-checked slices: xtc_exec_set_preempt_coop, the request's busy loop
 * passing a xtc_yield_if_due point about every microsecond), service
 * mode on so that an idle gap between arrivals does not end the run. A
 * load-generator pthread replays the precomputed schedule: it spins until
 * each scheduled arrival and hands the request to the loops in turn, by
 * one of two ingress paths:
 *  - submit: xtc_exec_submit (the runtime's bounded cross-thread ring); the
 *    callback, on the carrier's stack, spawns one proc for the request;
 *  - polled: a single-producer ring per carrier that a dispatcher proc on
 *    that carrier drains (spawning the procs locally) and yields between
 *    polls, so the carrier never parks: this separates the scheduling of
 *    the requests from the cost of waking a parked carrier.
 * Procs are migratable, so an idle loop may steal. A request proc runs the
 * calibrated busy loop and stamps its completion; sojourn = completion -
 * scheduled arrival, computed by the caller. The generator stops the
 * executor when every request completed (or was dropped because its spawn
 * was refused), or `timeout_ns` after the last arrival (the caller then
 * counts the missing requests).
 *
 * Rejected: stamping the arrival when the spawn happens (hides generator
 * lag); xtc_proc_spawn straight from the generator thread (measured about
 * 10 µs per cross-thread spawn here, which caps the generator far below
 * the offered rates); one long-lived worker proc per carrier pulling from
 * a queue (that measures our queue, not the runtime's scheduling of many
 * fibers).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xb.h"
#include "xb_api.h"

#if XB_HAVE_EXEC

/* The polled ingress: one single-producer single-consumer ring of
 * request indices per carrier, filled by the generator and drained by a
 * dispatcher proc on that carrier. */
#define POLL_RING 65536
typedef struct poll_ring {
	_Alignas(64) _Atomic uint64_t head; /* consumer */
	_Alignas(64) _Atomic uint64_t tail; /* producer */
	int64_t idx[POLL_RING];
} poll_ring_t;

typedef struct tail_run {
	xb_tail_t      *t;
	xtc_exec_t     *ex;
	int64_t         base;
	_Atomic int     stop;      /* polled ingress: dispatchers exit */
	_Atomic int     ready;     /* carriers that have started running */
	int             gen_rc;
	poll_ring_t    *rings;     /* polled ingress: one per carrier */
	/* bumped by the carriers per request: off the line the generator
	 * reads per arrival (sharing it cost both sides a miss per request) */
	_Alignas(64) _Atomic int64_t completed; /* finished or dropped */
	_Atomic int64_t dropped;
	_Alignas(64) char pad;
} tail_run_t;

/* One run at a time: the request procs find their run here. */
static tail_run_t *tail_cur;

static void tail_req(void *arg)
{
	int64_t     i = (int64_t)(intptr_t)arg;
	tail_run_t *r = tail_cur;
	uint64_t    left = r->t->iters[i], chunk = r->t->coop_chunk;
	if (chunk > 0)
		for (; left > chunk; left -= chunk) {
			xb_spin(chunk);
			(void)xtc_yield_if_due();
		}
	xb_spin(left);
	r->t->done[i] = xb_now() - r->base;
	atomic_fetch_add_explicit(&r->completed, 1, memory_order_release);
}

/* Runs on the target carrier's own stack (xtc_exec_submit): the spawn is
 * then local to the loop, the cheap path. */
static void tail_spawn_local(tail_run_t *r, int64_t i, xtc_loop_t *loop);

static void tail_spawn_cb(void *arg)
{
	int64_t     i = (int64_t)(intptr_t)arg;
	tail_run_t *r = tail_cur;
	int         loop = xtc_exec_loop_id();
	/* A refused spawn (e.g. no stack left under a huge backlog) drops the
	 * request, counted; the run goes on. */
	tail_spawn_local(r, i, xtc_exec_loop(r->ex, loop < 0 ? 0 : loop));
}

static void tail_spawn_local(tail_run_t *r, int64_t i, xtc_loop_t *loop)
{
	xtc_proc_opts_t opts;
	memset(&opts, 0, sizeof opts);
	opts.migratable = r->t->carriers > 1;
	if (xtc_proc_spawn(loop, tail_req, (void *)(intptr_t)i, &opts, NULL)) {
		r->t->done[i] = -2;
		atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->completed, 1,
		                          memory_order_release);
	}
}

typedef struct dispatcher {
	tail_run_t *r;
	int         idx;
} dispatcher_t;

/* Drains its carrier's ring, spawning one proc per request locally, and
 * yields when the ring is empty: the carrier never parks (busy polling,
 * as the dispatcher cores of Shinjuku and LibPreemptible do). */
static void tail_dispatcher(void *arg)
{
	dispatcher_t *d = arg;
	tail_run_t   *r = d->r;
	poll_ring_t  *q = &r->rings[d->idx];
	xtc_loop_t   *loop = xtc_exec_loop(r->ex, d->idx);
	while (!atomic_load_explicit(&r->stop, memory_order_acquire)) {
		uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
		uint64_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
		for (; h != t; h++)
			tail_spawn_local(r, q->idx[h % POLL_RING], loop);
		atomic_store_explicit(&q->head, h, memory_order_release);
		xtc_yield();
	}
}

static int poll_push(tail_run_t *r, int c, int64_t i)
{
	poll_ring_t *q = &r->rings[c];
	uint64_t     t = atomic_load_explicit(&q->tail, memory_order_relaxed);
	if (t - atomic_load_explicit(&q->head, memory_order_acquire) >=
	    POLL_RING)
		return XTC_E_AGAIN;
	q->idx[t % POLL_RING] = i;
	atomic_store_explicit(&q->tail, t + 1, memory_order_release);
	return 0;
}

/* Submitted to every carrier before the run: the clock starts only when
 * all carriers run, so thread start-up is not a burst of late arrivals. */
static void tail_ready_cb(void *arg)
{
	atomic_fetch_add_explicit(&((tail_run_t *)arg)->ready, 1,
	                          memory_order_release);
}

static void *tail_gen(void *arg)
{
	tail_run_t *r = arg;
	xb_tail_t  *t = r->t;

	int64_t wait_until = xb_now() + 1000000000LL;
	while (atomic_load_explicit(&r->ready, memory_order_acquire) <
	           t->carriers &&
	       xb_now() < wait_until)
		xb_cpu_relax();
	r->base = xb_now() + 1000000; /* first arrivals 1 ms from now */

	for (int64_t i = 0; i < t->n; i++) {
		int64_t target = r->base + t->arrival[i];
		int64_t now;
		while ((now = xb_now()) < target)
			xb_cpu_relax();
		t->lag[i] = now - target;
		for (;;) {
			int c = (int)(i % t->carriers);
			int rc = r->rings ? poll_push(r, c, i)
			                  : xtc_exec_submit(r->ex, c, tail_spawn_cb,
			                                    (void *)(intptr_t)i);
			if (rc == 0)
				break;
			if (rc != XTC_E_AGAIN) {
				r->gen_rc = rc;
				goto stop;
			}
			t->spawn_retries++;
			xb_cpu_relax();
		}
		if (r->gen_rc)
			goto stop;
	}
	int64_t deadline = r->base + t->arrival[t->n - 1] + t->timeout_ns;
	while (atomic_load_explicit(&r->completed, memory_order_acquire) <
	       t->n) {
		if (xb_now() > deadline) {
			t->timed_out = 1;
			break;
		}
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
stop:
	atomic_store_explicit(&r->stop, 1, memory_order_release);
	xtc_exec_stop(r->ex);
	return NULL;
}

int xb_tail_run(xb_tail_t *t, char *why)
{
	int f = xb_features();
	why[0] = 0;
	if (!(f & XB_F_EXEC)) {
		snprintf(why, XB_WHY, "%s", xb_feature_why(XB_F_EXEC));
		return XB_UNAVAIL;
	}
	if (t->slice_ns > 0 && !(f & XB_F_PREEMPT)) {
		snprintf(why, XB_WHY, "%s", xb_feature_why(XB_F_PREEMPT));
		return XB_UNAVAIL;
	}
	if (t->adaptive && !(f & XB_F_ADAPTIVE)) {
		snprintf(why, XB_WHY, "%s", xb_feature_why(XB_F_ADAPTIVE));
		return XB_UNAVAIL;
	}
	if (t->n < 1 || t->carriers < 1 || !t->arrival || !t->iters ||
	    !t->done || !t->lag) {
		snprintf(why, XB_WHY, "bad arguments");
		return XB_FAIL;
	}
	for (int64_t i = 0; i < t->n; i++) {
		t->done[i] = -1;
		t->lag[i] = 0;
	}
	t->completed = 0;
	t->dropped = 0;
	t->timed_out = 0;
	t->spawn_retries = 0;
	t->parks = t->wakes = t->slow_wakes = 0;
	t->wake_ns = t->wake_max_ns = 0;

	tail_run_t r;
	memset(&r, 0, sizeof r);
	r.t = t;
	int ret = XB_OK, rc;
#if XB_HAVE_ADAPTIVE
	xtc_fn_quantum_t *q = NULL;
#endif
#if XB_HAVE_PREEMPT
	xtc_preempt_stats_t ps0, ps1;
	uint64_t            sent;
	memset(&ps0, 0, sizeof ps0);
	memset(&ps1, 0, sizeof ps1);
	if (XB_LINKED(xtc_preempt_stats_global))
		xtc_preempt_stats_global(&ps0, &sent);
#endif
	/* warm stacks before the clock: the pool outlives executors, so
	 * every run after the first starts warm anyway */
	if (XB_LINKED(xtc_stack_reserve))
		(void)xtc_stack_reserve(4096);
	if ((rc = xtc_exec_init(&r.ex, t->carriers))) {
		snprintf(why, XB_WHY, "xtc_exec_init: %s", xb_strerror(rc));
		return XB_FAIL;
	}
	xtc_exec_set_service_mode(r.ex, 1);
#if XB_HAVE_PREEMPT
	if (t->slice_ns > 0 && t->coop_chunk == 0)
		xtc_preempt_set_involuntary(1);
#endif
	if (t->coop_chunk > 0 && (rc = xtc_exec_set_preempt_coop(r.ex, 1))) {
		snprintf(why, XB_WHY, "xtc_exec_set_preempt_coop: %s",
		         xb_strerror(rc));
		ret = XB_FAIL;
		goto out;
	}
	if (t->slice_ns > 0 && (rc = xtc_exec_set_preempt(r.ex, t->slice_ns))) {
		snprintf(why, XB_WHY, "xtc_exec_set_preempt: %s",
		         xb_strerror(rc));
		ret = rc == XTC_E_NOSYS ? XB_UNAVAIL : XB_FAIL;
		goto out;
	}
#if XB_HAVE_ADAPTIVE
	if (t->adaptive) {
		xtc_fn_quantum_opts_t qo;
		memset(&qo, 0, sizeof qo);
		qo.initial_ns = t->slice_ns;
		qo.period_ns = t->adapt_period_ns;
		qo.workers = t->carriers;
		if ((rc = xtc_fn_quantum_create(&qo, &q)) ||
		    (rc = xtc_exec_set_preempt_adaptive(r.ex, q))) {
			snprintf(why, XB_WHY, "adaptive controller: %s",
			         xb_strerror(rc));
			ret = rc == XTC_E_NOSYS ? XB_UNAVAIL : XB_FAIL;
			goto out;
		}
	}
#endif
	dispatcher_t disp[64];
	if (t->ingress == XB_INGRESS_POLL) {
		if (t->carriers > 64) {
			snprintf(why, XB_WHY, "polled ingress: at most 64 carriers");
			ret = XB_FAIL;
			goto out;
		}
		r.rings = aligned_alloc(64, sizeof(poll_ring_t) * (size_t)t->carriers);
		if (!r.rings) {
			snprintf(why, XB_WHY, "out of memory");
			ret = XB_FAIL;
			goto out;
		}
		for (int c = 0; c < t->carriers; c++) {
			atomic_init(&r.rings[c].head, 0);
			atomic_init(&r.rings[c].tail, 0);
			disp[c].r = &r;
			disp[c].idx = c;
			if ((rc = xtc_proc_spawn(xtc_exec_loop(r.ex, c),
			                         tail_dispatcher, &disp[c], NULL,
			                         NULL))) {
				snprintf(why, XB_WHY, "xtc_proc_spawn(dispatcher): %s",
				         xb_strerror(rc));
				ret = XB_FAIL;
				goto out;
			}
		}
	}
	for (int c = 0; c < t->carriers; c++)
		if ((rc = xtc_exec_submit(r.ex, c, tail_ready_cb, &r))) {
			snprintf(why, XB_WHY, "xtc_exec_submit: %s",
			         xb_strerror(rc));
			ret = XB_FAIL;
			goto out;
		}
	tail_cur = &r;

	pthread_t gen;
	if (pthread_create(&gen, NULL, tail_gen, &r)) {
		snprintf(why, XB_WHY, "pthread_create failed");
		ret = XB_FAIL;
		goto out;
	}
	rc = xtc_exec_run(r.ex);
	pthread_join(gen, NULL);
	for (int c = 0; c < t->carriers; c++) {
		xtc_loop_stats_t ls;
		if (xtc_exec_loop_stats(r.ex, c, &ls) != 0)
			continue;
		t->parks += ls.parks;
		t->wakes += ls.wakes;
		t->slow_wakes += ls.slow_wakes;
		t->wake_ns += ls.wake_ns;
		if (ls.wake_max_ns > t->wake_max_ns)
			t->wake_max_ns = ls.wake_max_ns;
	}
	t->dropped = atomic_load(&r.dropped);
	t->completed = atomic_load(&r.completed) - t->dropped;
	if (rc) {
		snprintf(why, XB_WHY, "xtc_exec_run: %s", xb_strerror(rc));
		ret = XB_FAIL;
	} else if (r.gen_rc) {
		snprintf(why, XB_WHY, "xtc_exec_submit/xtc_proc_spawn: %s",
		         xb_strerror(r.gen_rc));
		ret = XB_FAIL;
	}
out:
#if XB_HAVE_PREEMPT
	xtc_preempt_set_involuntary(0);
#endif
	xtc_exec_fini(r.ex);
	tail_cur = NULL;
	free(r.rings);
#if XB_HAVE_PREEMPT
	if (XB_LINKED(xtc_preempt_stats_global) &&
	    xtc_preempt_stats_global(&ps1, &sent) == 0) {
		t->preemptions = ps1.preemptions - ps0.preemptions;
		t->cost_ns = (int64_t)ps1.cost_ns;
		t->timer_fires = ps1.timer_fires - ps0.timer_fires;
		t->direct = ps1.direct - ps0.direct;
		t->fallbacks = ps1.timer_fallbacks - ps0.timer_fallbacks;
		t->stretches = ps1.stretches - ps0.stretches;
		t->overhead_ns = ps1.overhead_ns - ps0.overhead_ns;
	}
#endif
#if XB_HAVE_ADAPTIVE
	if (q) {
		t->final_quantum_ns = xtc_fn_quantum_get(q);
		t->tail_index = XB_LINKED(xtc_fn_quantum_tail_index)
		                        ? xtc_fn_quantum_tail_index(q)
		                        : 0;
		if (XB_LINKED(xtc_fn_quantum_trajectory)) {
			xtc_fn_quantum_point_t tp[XB_TRAJ];
			int k = xtc_fn_quantum_trajectory(q, tp, XB_TRAJ);
			for (int i = 0; i < k; i++) {
				t->traj_q[i] = tp[i].quantum_ns;
				t->traj_load[i] = tp[i].load;
				t->traj_alpha[i] = tp[i].tail_index;
			}
			t->n_traj = k > 0 ? k : 0;
		}
		xtc_fn_quantum_destroy(q);
	}
#endif
	return ret;
}

#else /* !XB_HAVE_EXEC */

int xb_tail_run(xb_tail_t *t, char *why)
{
	(void)t;
	snprintf(why, XB_WHY, "xtc_exec.h does not exist yet");
	return XB_UNAVAIL;
}

#endif
