/*
 * xb_common.c - busy work, clock, feature probe.
 *
 * The busy loop is a 64-bit LCG step per iteration; the empty asm keeps the
 * compiler from vectorising it or computing it in closed form, so its cost
 * is one multiply-add dependency chain, the same shape as the Go version in
 * work.go. Each side is calibrated separately (iterations per ns, best of
 * several runs) and requests are expressed in nanoseconds of work.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "xb.h"
#include "xb_api.h"

int64_t xb_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

XTC_PREEMPTIBLE uint64_t xb_spin(uint64_t iters)
{
	uint64_t x = iters | 1;
	for (uint64_t i = 0; i < iters; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

double xb_calibrate(void)
{
	const uint64_t n = 2000000;
	int64_t best = INT64_MAX;
	xb_spin(n / 4); /* warm up */
	for (int r = 0; r < 7; r++) {
		int64_t t0 = xb_now();
		xb_spin(n);
		int64_t dt = xb_now() - t0;
		if (dt > 0 && dt < best)
			best = dt;
	}
	return (double)n / (double)best;
}

__attribute__((noinline)) void xb_noop(void)
{
	__asm__ volatile("" ::: "memory");
}

static char xb_why_buf[5][XB_WHY];

static int core_linked(void)
{
	return XB_LINKED(xtc_loop_init) && XB_LINKED(xtc_loop_run) &&
	       XB_LINKED(xtc_loop_fini) && XB_LINKED(xtc_proc_spawn) &&
	       XB_LINKED(xtc_yield) && XB_LINKED(xtc_send) &&
	       XB_LINKED(xtc_recv) && XB_LINKED(xtc_free) &&
	       XB_LINKED(xtc_self) && XB_LINKED(xtc_proc_sleep);
}

static int exec_linked(void)
{
#if XB_HAVE_EXEC
	return XB_LINKED(xtc_exec_init) && XB_LINKED(xtc_exec_run) &&
	       XB_LINKED(xtc_exec_stop) && XB_LINKED(xtc_exec_fini) &&
	       XB_LINKED(xtc_exec_loop) && XB_LINKED(xtc_exec_set_service_mode) &&
	       XB_LINKED(xtc_exec_loop_id) && XB_LINKED(xtc_exec_submit);
#else
	return 0;
#endif
}

int xb_features(void)
{
	int f = 0;
	for (int i = 0; i < 5; i++)
		xb_why_buf[i][0] = 0;

	if (core_linked())
		f |= XB_F_CORE;
	else
		snprintf(xb_why_buf[0], XB_WHY,
		         "loop/proc functions are not linked yet");

	if (!XB_HAVE_EXEC)
		snprintf(xb_why_buf[1], XB_WHY, "xtc_exec.h does not exist yet");
	else if (!exec_linked())
		snprintf(xb_why_buf[1], XB_WHY,
		         "executor functions are not linked yet");
	else if (f & XB_F_CORE)
		f |= XB_F_EXEC;
	else
		snprintf(xb_why_buf[1], XB_WHY, "needs the core");

#if XB_HAVE_EXEC
	if (!XB_LINKED(xtc_exec_class_create))
		snprintf(xb_why_buf[2], XB_WHY,
		         "xtc_exec_class_create is not linked yet");
	else if (f & XB_F_EXEC)
		f |= XB_F_CLASSES;
	else
		snprintf(xb_why_buf[2], XB_WHY, "needs the executor");
#else
	snprintf(xb_why_buf[2], XB_WHY, "xtc_exec.h does not exist yet");
#endif

#if XB_HAVE_PREEMPT && XB_HAVE_EXEC
	if (!XB_LINKED(xtc_preempt_set_involuntary) ||
	    !XB_LINKED(xtc_exec_set_preempt))
		snprintf(xb_why_buf[3], XB_WHY,
		         "preemption functions are not linked yet");
	else if (XB_LINKED(xtc_preempt_supported) && !xtc_preempt_supported())
		snprintf(xb_why_buf[3], XB_WHY,
		         "xtc_preempt_supported() == 0 on this platform");
	else if (XB_LINKED(xtc_preempt_involuntary_supported) &&
	         !xtc_preempt_involuntary_supported())
		snprintf(xb_why_buf[3], XB_WHY,
		         "xtc_preempt_involuntary_supported() == 0 here");
	else if (f & XB_F_EXEC)
		f |= XB_F_PREEMPT;
	else
		snprintf(xb_why_buf[3], XB_WHY, "needs the executor");
#else
	snprintf(xb_why_buf[3], XB_WHY, "xtc_preempt.h does not exist yet");
#endif

#if XB_HAVE_ADAPTIVE
	if (!(f & XB_F_PREEMPT))
		snprintf(xb_why_buf[4], XB_WHY, "needs involuntary preemption");
	else if (!XB_LINKED(xtc_fn_quantum_create) ||
	         !XB_LINKED(xtc_fn_quantum_destroy) ||
	         !XB_LINKED(xtc_fn_quantum_get) ||
	         !XB_LINKED(xtc_exec_set_preempt_adaptive))
		snprintf(xb_why_buf[4], XB_WHY,
		         "adaptive controller is not linked yet");
	else
		f |= XB_F_ADAPTIVE;
#else
	snprintf(xb_why_buf[4], XB_WHY,
	         "no adaptive quantum controller in the public headers yet");
#endif
	return f;
}

const char *xb_feature_why(int bit)
{
	for (int i = 0; i < 5; i++)
		if (bit == (1 << i))
			return xb_why_buf[i];
	return "";
}

const char *xb_xtc_version(void)
{
	return XB_LINKED(xtc_version_string) ? xtc_version_string() : "unlinked";
}

const char *xb_io_backend(void)
{
	return XB_LINKED(xtc_io_backend_name) ? xtc_io_backend_name() : "unlinked";
}

void xb_preempt_stats(uint64_t out[9])
{
	memset(out, 0, 9 * sizeof out[0]);
#if XB_HAVE_PREEMPT
	xtc_preempt_stats_t s;
	uint64_t            sent = 0;
	if (!XB_LINKED(xtc_preempt_stats_global) ||
	    xtc_preempt_stats_global(&s, &sent) != 0)
		return;
	out[0] = s.signals;
	out[1] = s.ticks;
	out[2] = s.ring_ticks;
	out[3] = s.preemptions;
	out[4] = s.deferrals;
	out[5] = s.honoured;
	out[6] = s.stale;
	out[7] = s.refused_gocb;
	out[8] = sent;
#endif
}

/* The same busy loop as a call from Go (Exec.GoInt): an
 * intptr_t (*)(void *) taking its iteration count as the argument,
 * declared preemptible where the runtime asks for declarations
 * (xtc_preempt(3) SAFETY). The loop is written out here, not a call of
 * xb_spin, so the whole run lies in the declared function. */
#ifndef XTC_PREEMPTIBLE
#define XTC_PREEMPTIBLE
#endif
XTC_PREEMPTIBLE intptr_t xb_spin_call(void *arg)
{
	uint64_t iters = (uint64_t)(uintptr_t)arg;
	uint64_t x = iters | 1;

	for (uint64_t i = 0; i < iters; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		__asm__ volatile("" : "+r"(x));
	}
	return (intptr_t)(x & 0xffff);
}

/* The clock-checked variant: a yield point (xtc_yield_if_due) every chunk
 * iterations; arg packs iterations (low 40 bits) and chunk (high 24). */
XTC_PREEMPTIBLE intptr_t xb_spin_call_coop(void *arg)
{
	uint64_t a = (uint64_t)(uintptr_t)arg;
	uint64_t iters = a & ((1ULL << 40) - 1), chunk = a >> 40;
	uint64_t x = iters | 1;

	if (chunk == 0)
		chunk = iters + 1;
	for (uint64_t i = 0; i < iters; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		__asm__ volatile("" : "+r"(x));
		if ((i + 1) % chunk == 0)
			xtc_yield_if_due();
	}
	return (intptr_t)(x & 0xffff);
}

void *xb_spin_call_fn(void) { return (void *)xb_spin_call; }
void *xb_spin_call_coop_fn(void) { return (void *)xb_spin_call_coop; }

int xb_floor(xb_floor_t *out, char *why)
{
	const char *err = xb_floor_measure(out, XB_FLOOR_N);
	if (err != NULL) {
		snprintf(why, XB_WHY, "floor: %s", err);
		return XB_FAIL;
	}
	return XB_OK;
}
