/*
 * xb_fair.c - the xtc side of the fairness workload: three always-runnable
 * workers of equal cost on one executor loop, in three scheduling classes
 * with shares 600:300:100. Each worker adds the iterations it completed to
 * its class counter after every chunk; since the work is the same busy
 * loop, iterations are proportional to the CPU the class received. A
 * sampler pthread records the counters every window.
 *
 * With involuntary preemption the workers never yield (C kernels that the
 * runtime must time-slice); without it they yield after every chunk, and
 * the report says which mode ran.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "xb.h"
#include "xb_api.h"

#if XB_HAVE_EXEC

typedef struct fair_run {
	xb_fair_t       *f;
	xtc_exec_t      *ex;
	_Atomic int      stop;
	_Atomic uint64_t count[3];
	int64_t          t0;
} fair_run_t;

typedef struct fair_worker {
	fair_run_t *r;
	int         idx;
} fair_worker_t;

static void fair_proc(void *arg)
{
	fair_worker_t *w = arg;
	fair_run_t    *r = w->r;
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		xb_spin(r->f->chunk_iters);
		atomic_fetch_add_explicit(&r->count[w->idx], r->f->chunk_iters,
		                          memory_order_relaxed);
		if (!r->f->preempt)
			xtc_yield();
	}
}

static void *fair_sampler(void *arg)
{
	fair_run_t *r = arg;
	xb_fair_t  *f = r->f;
	int64_t     next = r->t0;
	while (f->nsamples < f->max_windows) {
		next += f->window_ns;
		struct timespec ts;
		for (;;) {
			int64_t now = xb_now();
			if (now >= next)
				break;
			int64_t d = next - now;
			ts.tv_sec = d / 1000000000LL;
			ts.tv_nsec = d % 1000000000LL;
			nanosleep(&ts, NULL);
		}
		int64_t *s = f->samples + 4 * f->nsamples;
		s[0] = xb_now() - r->t0;
		for (int k = 0; k < 3; k++)
			s[k + 1] = (int64_t)atomic_load_explicit(
				&r->count[k], memory_order_relaxed);
		f->nsamples++;
		if (s[0] >= f->dur_ns)
			break;
	}
	atomic_store(&r->stop, 1);
	return NULL;
}

int xb_fair_run(xb_fair_t *f, char *why)
{
	int feat = xb_features();
	why[0] = 0;
	if (!(feat & XB_F_CLASSES)) {
		snprintf(why, XB_WHY, "%s", xb_feature_why(XB_F_CLASSES));
		return XB_UNAVAIL;
	}
	if (f->preempt && !(feat & XB_F_PREEMPT)) {
		snprintf(why, XB_WHY, "%s", xb_feature_why(XB_F_PREEMPT));
		return XB_UNAVAIL;
	}
	if (f->dur_ns <= 0 || f->window_ns <= 0 || f->max_windows < 1 ||
	    !f->samples || f->chunk_iters < 1) {
		snprintf(why, XB_WHY, "bad arguments");
		return XB_FAIL;
	}
	f->nsamples = 0;

	fair_run_t r;
	memset(&r, 0, sizeof r);
	r.f = f;
	int           ret = XB_OK, rc;
	fair_worker_t w[3];
	if ((rc = xtc_exec_init(&r.ex, 1))) {
		snprintf(why, XB_WHY, "xtc_exec_init: %s", xb_strerror(rc));
		return XB_FAIL;
	}
	if (f->preempt) {
#if XB_HAVE_PREEMPT
		xtc_preempt_set_involuntary(1);
#endif
		if ((rc = xtc_exec_set_preempt(r.ex, f->slice_ns))) {
			snprintf(why, XB_WHY, "xtc_exec_set_preempt: %s",
			         xb_strerror(rc));
			ret = XB_FAIL;
			goto out;
		}
	}
	xtc_loop_t *loop = xtc_exec_loop(r.ex, 0);
	for (int k = 0; k < 3; k++) {
		xtc_exec_class_t cls;
		if ((rc = xtc_exec_class_create(loop, f->shares[k], 0, &cls))) {
			snprintf(why, XB_WHY, "xtc_exec_class_create(%d): %s",
			         f->shares[k], xb_strerror(rc));
			ret = XB_FAIL;
			goto out;
		}
		xtc_proc_opts_t opts;
		memset(&opts, 0, sizeof opts);
		opts.sched_class = cls;
		w[k].r = &r;
		w[k].idx = k;
		if ((rc = xtc_proc_spawn(loop, fair_proc, &w[k], &opts, NULL))) {
			snprintf(why, XB_WHY, "xtc_proc_spawn: %s",
			         xb_strerror(rc));
			ret = XB_FAIL;
			goto out;
		}
	}
	r.t0 = xb_now();
	pthread_t smp;
	if (pthread_create(&smp, NULL, fair_sampler, &r)) {
		atomic_store(&r.stop, 1);
		snprintf(why, XB_WHY, "pthread_create failed");
		ret = XB_FAIL;
		xtc_exec_run(r.ex);
		goto out;
	}
	rc = xtc_exec_run(r.ex);
	pthread_join(smp, NULL);
	if (rc) {
		snprintf(why, XB_WHY, "xtc_exec_run: %s", xb_strerror(rc));
		ret = XB_FAIL;
	}
out:
#if XB_HAVE_PREEMPT
	if (f->preempt)
		xtc_preempt_set_involuntary(0);
#endif
	xtc_exec_fini(r.ex);
	return ret;
}

#else

int xb_fair_run(xb_fair_t *f, char *why)
{
	(void)f;
	snprintf(why, XB_WHY, "xtc_exec.h does not exist yet");
	return XB_UNAVAIL;
}

#endif
