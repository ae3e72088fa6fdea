/*
 * xb_hog.c - a C kernel that never yields, next to a probe that sleeps
 * 1 ms in a loop, both on one executor loop (one carrier). The probe's
 * lateness (wake-up time minus the requested 1 ms) is the latency a
 * timer-driven task suffers behind a CPU hog. Without involuntary
 * preemption the probe would starve until the hog finished, so the driver
 * refuses to run then.
 *
 * The hog runs until the probe is done (it checks a flag between spin
 * chunks, which is not a yield); both stop at the time budget, so a probe
 * never runs without the hog next to it.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "xb.h"
#include "xb_api.h"

static _Atomic int hog_stop;

#if XB_HAVE_EXEC

typedef struct hog_run {
	xb_hog_t *h;
	int64_t   deadline;
} hog_run_t;

static void hog_proc(void *arg)
{
	hog_run_t *r = arg;
	uint64_t   it = 0;
	while (!atomic_load_explicit(&hog_stop, memory_order_relaxed) &&
	       xb_now() < r->deadline) {
		xb_spin(4096);
		it += 4096;
	}
	r->h->hog_iters = it;
}

static void probe_proc(void *arg)
{
	hog_run_t *r = arg;
	xb_hog_t  *h = r->h;
	for (int k = 0; k < h->probes; k++) {
		int64_t t0 = xb_now();
		if (t0 >= r->deadline)
			break; /* out of budget: later probes would see no hog */
		if (xtc_proc_sleep(h->sleep_ns))
			break;
		h->late[k] = xb_now() - t0 - h->sleep_ns;
		h->done_probes = k + 1;
	}
	atomic_store(&hog_stop, 1);
}

int xb_hog_run(xb_hog_t *h, char *why)
{
	int f = xb_features();
	why[0] = 0;
	if (!(f & XB_F_EXEC)) {
		snprintf(why, XB_WHY, "%s", xb_feature_why(XB_F_EXEC));
		return XB_UNAVAIL;
	}
	if (h->with_hog && !(f & XB_F_PREEMPT)) {
		snprintf(why, XB_WHY, "%s (the probe would starve)",
		         xb_feature_why(XB_F_PREEMPT));
		return XB_UNAVAIL;
	}
	if (h->probes < 1 || h->sleep_ns <= 0 || !h->late || h->budget_ns <= 0 ||
	    (h->with_hog && h->slice_ns <= 0)) {
		snprintf(why, XB_WHY, "bad arguments");
		return XB_FAIL;
	}
	h->done_probes = 0;
	h->hog_iters = 0;
	atomic_store(&hog_stop, 0);

	hog_run_t   r = {.h = h};
	xtc_exec_t *ex = NULL;
	int         ret = XB_OK, rc;
	if ((rc = xtc_exec_init(&ex, 1))) {
		snprintf(why, XB_WHY, "xtc_exec_init: %s", xb_strerror(rc));
		return XB_FAIL;
	}
	if (h->with_hog) {
#if XB_HAVE_PREEMPT
		xtc_preempt_set_involuntary(1);
#endif
		if ((rc = xtc_exec_set_preempt(ex, h->slice_ns))) {
			snprintf(why, XB_WHY, "xtc_exec_set_preempt: %s",
			         xb_strerror(rc));
			ret = XB_FAIL;
			goto out;
		}
	}
	r.deadline = xb_now() + h->budget_ns;
	xtc_loop_t *loop = xtc_exec_loop(ex, 0);
	if ((rc = xtc_proc_spawn(loop, probe_proc, &r, NULL, NULL)) ||
	    (h->with_hog &&
	     (rc = xtc_proc_spawn(loop, hog_proc, &r, NULL, NULL)))) {
		snprintf(why, XB_WHY, "xtc_proc_spawn: %s", xb_strerror(rc));
		ret = XB_FAIL;
		atomic_store(&hog_stop, 1);
	}
	if ((rc = xtc_exec_run(ex)) && ret == XB_OK) {
		snprintf(why, XB_WHY, "xtc_exec_run: %s", xb_strerror(rc));
		ret = XB_FAIL;
	}
out:
#if XB_HAVE_PREEMPT
	if (h->with_hog)
		xtc_preempt_set_involuntary(0);
#endif
	xtc_exec_fini(ex);
	return ret;
}

#else

int xb_hog_run(xb_hog_t *h, char *why)
{
	(void)h;
	snprintf(why, XB_WHY, "xtc_exec.h does not exist yet");
	return XB_UNAVAIL;
}

#endif

uint64_t xb_hog_kernel(void)
{
	uint64_t it = 0;
	while (!atomic_load_explicit(&hog_stop, memory_order_relaxed)) {
		xb_spin(4096);
		it += 4096;
	}
	return it;
}

void xb_hog_kernel_arm(void)
{
	atomic_store(&hog_stop, 0);
}

void xb_hog_kernel_stop(void)
{
	atomic_store(&hog_stop, 1);
}
