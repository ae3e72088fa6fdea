/*
 * bench_exec_gocall.c - the Go front door's C half (csrc/exec_gocall.c) driven from a
 * plain thread, next to the C path it is budgeted against. One executor of
 * one carrier, an empty C function, 5 interleaved repetitions of 20000
 * round trips each (after a warm-up); prints the median of the
 * per-repetition p50/p99 and the spread as `name value unit` lines:
 *   gocall_spin_p50/_p99     submit + poll the record (the idle path of a
 *                            goroutine's call: no ring, no doorbell)
 *   gocall_ring_p50/_p99     submit + the completion ring (a consumer
 *                            thread that arms the eventfd and sleeps in
 *                            poll, as the Go server does in the netpoller)
 *   exec_submit_rt_p50/_p99  the C reference: xtc_exec_submit of a
 *                            callback that stores a flag the submitter
 *                            polls (a ring push, the carrier's drain, no
 *                            proc)
 *   gocall_mops              calls/s (M) from 4 submitter threads, each
 *                            keeping 16 calls in flight through the ring
 * Figures that cross threads are the guest's wake-up costs as much as
 * ours: compare the rows of one run, not runs of different days.
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "exec_gocall_int.h"
#include "bench_util.h"

#define REPS 5

static int n_calls = 20000;

static intptr_t f_ident(void *a) { return (intptr_t)a; }

static xtc__gocall_done_t *done_of(xtc__gocalls_t *t, uint32_t i)
{
	void *base = NULL;

	/* the record's chunk, made if no submission made it yet */
	if (xtc__gocalls_chunk(t, i / XTC__GOCALLS_CHUNK, &base) != XTC_OK)
		abort();
	return (xtc__gocall_done_t *)((char *)base +
	    (size_t)(i % XTC__GOCALLS_CHUNK) * xtc__gocalls_stride());
}

static void *run_main(void *a)
{
	(void)xtc_exec_run(a);
	return NULL;
}

/* ---- the consumer of the completion ring --------------------------------- */

static _Atomic uint32_t *seen; /* per record: settled and popped */
static _Atomic int cons_stop;

static void *consumer(void *a)
{
	xtc__gocalls_t *t = a;
	uint32_t buf[256];
	struct pollfd p = { .fd = xtc__gocalls_fd(t), .events = POLLIN };

	while (!atomic_load(&cons_stop)) {
		int n = xtc__gocalls_pop(t, buf, 256);
		if (n > 0) {
			for (int i = 0; i < n; i++)
				atomic_store_explicit(&seen[buf[i]], 1,
				                      memory_order_release);
			continue;
		}
		if (xtc__gocalls_arm(t))
			continue;
		(void)poll(&p, 1, 50);
		uint64_t v;
		(void)!read(p.fd, &v, sizeof v);
	}
	return NULL;
}

/* ---- variants ------------------------------------------------------------ */

static xtc_exec_t *ex;
static xtc__gocalls_t *tab;

static int64_t rt_spin(void)
{
	int64_t t0 = xtc_clock_mono();
	int rc = xtc__gocall_submit(tab, 0, 0, (void *)f_ident, 1, NULL, NULL, 1);

	if (rc == 1) {
		while (__atomic_load_n(&done_of(tab, 0)->waiter, __ATOMIC_ACQUIRE) !=
		       XTC__GW_DONE)
			;
	} else {
		while (!atomic_load_explicit(&seen[0], memory_order_acquire))
			;
		atomic_store(&seen[0], 0);
	}
	return xtc_clock_mono() - t0;
}

static int64_t rt_ring(void)
{
	int64_t t0 = xtc_clock_mono();

	(void)xtc__gocall_submit(tab, 1, 0, (void *)f_ident, 1, NULL, NULL, 0);
	while (!atomic_load_explicit(&seen[1], memory_order_acquire))
		;
	atomic_store(&seen[1], 0);
	return xtc_clock_mono() - t0;
}

static _Atomic int flag;
static void set_flag(void *a)
{
	(void)a;
	atomic_store_explicit(&flag, 1, memory_order_release);
}

static int64_t rt_submit(void)
{
	int64_t t0 = xtc_clock_mono();

	atomic_store(&flag, 0);
	(void)xtc_exec_submit(ex, 0, set_flag, NULL);
	while (!atomic_load_explicit(&flag, memory_order_acquire))
		;
	return xtc_clock_mono() - t0;
}

/* ---- throughput ------------------------------------------------------------ */

#define TP_THREADS 4
#define TP_DEPTH 16
static int tp_calls = 200000;

static void *tp_main(void *a)
{
	uint32_t base = 64 + (uint32_t)(intptr_t)a * TP_DEPTH;
	int left = tp_calls / TP_THREADS;
	int inflight = 0;

	for (uint32_t k = 0; k < TP_DEPTH && left > 0; k++, left--, inflight++)
		(void)xtc__gocall_submit(tab, base + k, 0, (void *)f_ident, 1,
		                         NULL, NULL, 0);
	while (inflight > 0) {
		for (uint32_t k = 0; k < TP_DEPTH; k++) {
			if (!atomic_load_explicit(&seen[base + k],
			                          memory_order_acquire))
				continue;
			atomic_store(&seen[base + k], 0);
			inflight--;
			if (left > 0) {
				left--;
				inflight++;
				(void)xtc__gocall_submit(tab, base + k, 0,
				    (void *)f_ident, 1, NULL, NULL, 0);
			}
		}
		sched_yield();
	}
	return NULL;
}

int main(void)
{
	static const struct {
		const char *name;
		int64_t (*rt)(void);
	} v[] = {
		{ "gocall_spin", rt_spin },
		{ "gocall_ring", rt_ring },
		{ "exec_submit_rt", rt_submit },
	};
	enum { NV = sizeof v / sizeof v[0] };
	double p50[NV][REPS], p99[NV][REPS];
	int64_t *lat;
	pthread_t th, ct, tt[TP_THREADS];
	double mops[REPS];

	if (getenv("XTC_BENCH_QUICK")) {
		n_calls = 2000;
		tp_calls = 20000;
	}
	lat = malloc(sizeof(*lat) * (size_t)n_calls);
	if (lat == NULL || xtc_exec_init(&ex, 1) != XTC_OK ||
	    xtc__gocalls_create(ex, 1024, &tab) != XTC_OK)
		return 1;
	seen = calloc(1024, sizeof(*seen));
	xtc_exec_set_service_mode(ex, 1);
	if (pthread_create(&th, NULL, run_main, ex) != 0 ||
	    pthread_create(&ct, NULL, consumer, tab) != 0)
		return 1;
	for (int k = 0; k < NV; k++)
		for (int i = 0; i < 500; i++)
			(void)v[k].rt();
	for (int r = 0; r < REPS; r++) {
		for (int k = 0; k < NV; k++) {
			for (int i = 0; i < n_calls; i++)
				lat[i] = v[k].rt();
			qsort(lat, (size_t)n_calls, sizeof *lat, cmp_i64);
			p50[k][r] = (double)lat[n_calls / 2];
			p99[k][r] = (double)lat[n_calls * 99 / 100];
		}
		{
			int64_t t0 = xtc_clock_mono();
			for (intptr_t i = 0; i < TP_THREADS; i++)
				pthread_create(&tt[i], NULL, tp_main, (void *)i);
			for (int i = 0; i < TP_THREADS; i++)
				pthread_join(tt[i], NULL);
			mops[r] = (double)tp_calls / 1e6 /
			          ((double)(xtc_clock_mono() - t0) / 1e9);
		}
	}
	for (int k = 0; k < NV; k++) {
		double lo50, hi50, lo99, hi99, m50, m99;
		m50 = bench_median(p50[k], REPS);
		lo50 = p50[k][0];
		hi50 = p50[k][REPS - 1];
		m99 = bench_median(p99[k], REPS);
		lo99 = p99[k][0];
		hi99 = p99[k][REPS - 1];
		printf("%s_p50 %.0f ns  # spread %.0f..%.0f\n", v[k].name, m50, lo50, hi50);
		printf("%s_p99 %.0f ns  # spread %.0f..%.0f\n", v[k].name, m99, lo99, hi99);
	}
	{
		double m = bench_median(mops, REPS);
		printf("gocall_mops %.3f M/s  # spread %.3f..%.3f\n", m, mops[0], mops[REPS - 1]);
	}
	atomic_store(&cons_stop, 1);
	xtc__gocalls_bell(tab);
	pthread_join(ct, NULL);
	xtc_exec_stop(ex);
	pthread_join(th, NULL);
	xtc_exec_fini(ex);
	xtc__gocalls_settle(tab);
	xtc__gocalls_destroy(tab);
	free((void *)seen);
	free(lat);
	return 0;
}
