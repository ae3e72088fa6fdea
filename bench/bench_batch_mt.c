/*
 * bench_batch_mt.c - cross-thread admission into a batch group
 * (xtc_batch_submit_mt).
 *
 * Prints `name value unit` lines (medians of REPS interleaved runs, spread
 * as min..max on stderr):
 *   batch_mt_rate_1 / _4 / _8  hand-ins per second (millions), wall clock,
 *                      from 1, 4, 8 producer OS threads into one group
 *                      (capacity 4096, pool 4096, step: every member DONE);
 *                      a producer retries an XTC_E_AGAIN at once, so the
 *                      figure is the sustained accept rate of the whole
 *                      pipe (hand-in, drain, admission, step, complete,
 *                      record recycled)
 *   batch_mt_backoff_1 / _4 / _8  the same with a producer that backs off
 *                      (sched_yield for its first 8 retries of one hand-in,
 *                      then 50 us sleeps): the retry policy the README
 *                      recommends when producers outnumber the CPUs
 *   batch_mt_call_ns   one submit_mt call with no consumer running (65536
 *                      hand-ins into a group whose loop has not started,
 *                      one thread): the producer-side cost alone
 *   batch_mt_idle_p50 / _p99   submit_mt -> the member's first step, ns,
 *                      one hand-in at a time into an idle group (the
 *                      driver is parked: includes the cross-thread wake)
 * Wall time: the producers and the loop thread are separate threads; on a
 * shared machine the figures move with the load average printed first.
 * XTC_BENCH_QUICK=1 shrinks the counts.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xtc.h"
#include "xtc_batch.h"

#include "bench_util.h"
#include "../test/batch_fixture.h"

#define REPS 3

#define now_ns bf_mono_ns

static void die(const char *what)
{
	fprintf(stderr, "bench_batch_mt: %s\n", what);
	exit(1);
}

/* ---- throughput ---------------------------------------------------------- */

static xtc_batch_t *rg;
static long per_thread;
static atomic_long completed, producers_left;
static atomic_int go;
static int backoff; /* producers sleep after 8 retries of one hand-in */

static void count_complete(uint64_t h, void *r, int outcome, void *user)
{
	(void)h;
	(void)r;
	(void)outcome;
	(void)user;
	atomic_fetch_add_explicit(&completed, 1, memory_order_relaxed);
}

static void *producer(void *arg)
{
	uint64_t h;

	(void)arg;
	while (!atomic_load(&go))
		sched_yield();
	for (long i = 0; i < per_thread; i++) {
		int rc;
		int tries = 0;
		while ((rc = xtc_batch_submit_mt(rg, NULL, 1, &h)) ==
		       XTC_E_AGAIN) {
			if (backoff && ++tries > 8) {
				struct timespec ts = {0, 50000};
				nanosleep(&ts, NULL);
			} else {
				sched_yield();
			}
		}
		if (rc != XTC_OK)
			die("submit_mt");
	}
	atomic_fetch_sub(&producers_left, 1);
	return NULL;
}

static void closer(void *arg)
{
	(void)arg;
	while (atomic_load(&producers_left) > 0)
		xtc_proc_sleep(100000);
	if (xtc_batch_close(rg, XTC_BATCH_DRAIN) != XTC_OK)
		die("close");
}

static double rate(int threads, long total, int with_backoff)
{
	xtc_batch_opts_t o = bf_opts(4096, 4096, 4096, bf_done_step,
	                             count_complete, NULL);
	xtc_loop_t *l;
	pthread_t th[8];
	double t0, t1;

	if (xtc_loop_init(&l) != XTC_OK)
		die("loop");
	if (xtc_batch_create(l, &o, &rg) != XTC_OK)
		die("create");
	if (xtc_proc_spawn(l, closer, NULL, NULL, NULL) != XTC_OK)
		die("spawn");
	per_thread = total / threads;
	backoff = with_backoff;
	atomic_store(&completed, 0);
	atomic_store(&producers_left, threads);
	atomic_store(&go, 0);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, producer, NULL) != 0)
			die("pthread_create");
	t0 = now_ns();
	atomic_store(&go, 1);
	if (xtc_loop_run(l) != XTC_OK)
		die("run");
	t1 = now_ns();
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	if (atomic_load(&completed) != per_thread * threads)
		die("lost completions");
	if (xtc_batch_destroy(rg) != XTC_OK || xtc_loop_fini(l) != XTC_OK)
		die("teardown");
	return per_thread * threads / ((t1 - t0) / 1e9) / 1e6;
}

/* ---- idle latency --------------------------------------------------------- */

static double lat_t0;
static double *lat;
static atomic_long lat_n;
static long lat_total;

static int lat_step(const xtc_batch_item_t *it, xtc_batch_result_t *res,
                    size_t n, void *user)
{
	(void)user;
	for (size_t i = 0; i < n; i++) {
		if (it[i].rounds == 0) {
			long k = atomic_load(&lat_n);
			lat[k] = now_ns() - lat_t0;
		}
		res[i].state = XTC_BATCH_DONE;
	}
	return XTC_OK;
}

static void lat_complete(uint64_t h, void *r, int outcome, void *user)
{
	(void)h;
	(void)r;
	(void)outcome;
	(void)user;
	atomic_fetch_add(&lat_n, 1);
}

static void *lat_producer(void *arg)
{
	uint64_t h;

	(void)arg;
	for (long i = 0; i < lat_total; i++) {
		/* let the driver park between hand-ins */
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
		lat_t0 = now_ns();
		if (xtc_batch_submit_mt(rg, NULL, 1, &h) != XTC_OK)
			die("lat submit");
		while (atomic_load(&lat_n) <= i)
			sched_yield();
	}
	atomic_store(&producers_left, 0);
	return NULL;
}

static void latency(long total, double *p50, double *p99)
{
	xtc_batch_opts_t o = bf_opts(64, 64, 64, lat_step, lat_complete, NULL);
	xtc_loop_t *l;
	pthread_t th;

	lat = calloc((size_t)total, sizeof *lat);
	lat_total = total;
	atomic_store(&lat_n, 0);
	atomic_store(&producers_left, 1);
	if (lat == NULL || xtc_loop_init(&l) != XTC_OK ||
	    xtc_batch_create(l, &o, &rg) != XTC_OK ||
	    xtc_proc_spawn(l, closer, NULL, NULL, NULL) != XTC_OK)
		die("lat setup");
	if (pthread_create(&th, NULL, lat_producer, NULL) != 0)
		die("pthread_create");
	if (xtc_loop_run(l) != XTC_OK)
		die("run");
	pthread_join(th, NULL);
	if (xtc_batch_destroy(rg) != XTC_OK || xtc_loop_fini(l) != XTC_OK)
		die("teardown");
	qsort(lat, (size_t)total, sizeof *lat, cmp_double);
	*p50 = lat[total / 2];
	*p99 = lat[total * 99 / 100];
	free(lat);
}

static double call_ns(void)
{
	xtc_batch_opts_t o = bf_opts(65536, 4096, 4096, bf_done_step,
	                             count_complete, NULL);
	xtc_loop_t *l;
	uint64_t h;
	double t0, t1;
	long n = 0;

	if (xtc_loop_init(&l) != XTC_OK || xtc_batch_create(l, &o, &rg) !=
	                                            XTC_OK)
		die("call setup");
	atomic_store(&completed, 0);
	t0 = now_ns();
	while (xtc_batch_submit_mt(rg, NULL, 1, &h) == XTC_OK)
		n++;
	t1 = now_ns();
	if (n != xtc_batch_mt_capacity(rg) ||
	    xtc_batch_close(rg, XTC_BATCH_DRAIN) != XTC_OK ||
	    xtc_loop_run(l) != XTC_OK || atomic_load(&completed) != n ||
	    xtc_batch_destroy(rg) != XTC_OK || xtc_loop_fini(l) != XTC_OK)
		die("call teardown");
	return (t1 - t0) / (double)n;
}

int main(void)
{
	int quick = getenv("XTC_BENCH_QUICK") != NULL;
	long total = quick ? 400000 : 4000000, nl = quick ? 2000 : 10000;
	static const int tc[3] = {1, 4, 8};
	double r[3][REPS], rb[3][REPS], p50[REPS], p99[REPS], cn[REPS];
	double loadavg[3] = {0};

	if (getloadavg(loadavg, 3) > 0)
		fprintf(stderr, "load average %.2f %.2f %.2f\n", loadavg[0],
		        loadavg[1], loadavg[2]);
	(void)rate(4, total / 10, 0); /* warm-up */
	for (int k = 0; k < REPS; k++) {
		for (int j = 0; j < 6; j++) {
			int t = (j + k) % 6; /* rotate the order */
			if (t < 3)
				r[t][k] = rate(tc[t], total, 0);
			else
				rb[t - 3][k] = rate(tc[t - 3], total, 1);
		}
		latency(nl, &p50[k], &p99[k]);
		cn[k] = call_ns();
	}
	bf_spread("batch_mt_rate_1", r[0], REPS);
	bf_spread("batch_mt_rate_4", r[1], REPS);
	bf_spread("batch_mt_rate_8", r[2], REPS);
	bf_spread("batch_mt_backoff_1", rb[0], REPS);
	bf_spread("batch_mt_backoff_4", rb[1], REPS);
	bf_spread("batch_mt_backoff_8", rb[2], REPS);
	bf_spread("batch_mt_call_ns", cn, REPS);
	bf_spread("batch_mt_idle_p50", p50, REPS);
	bf_spread("batch_mt_idle_p99", p99, REPS);
	printf("batch_mt_rate_1 %.2f M/s\n", bench_median(r[0], REPS));
	printf("batch_mt_rate_4 %.2f M/s\n", bench_median(r[1], REPS));
	printf("batch_mt_rate_8 %.2f M/s\n", bench_median(r[2], REPS));
	printf("batch_mt_backoff_1 %.2f M/s\n", bench_median(rb[0], REPS));
	printf("batch_mt_backoff_4 %.2f M/s\n", bench_median(rb[1], REPS));
	printf("batch_mt_backoff_8 %.2f M/s\n", bench_median(rb[2], REPS));
	printf("batch_mt_call_ns %.1f ns\n", bench_median(cn, REPS));
	printf("batch_mt_idle_p50 %.0f ns\n", bench_median(p50, REPS));
	printf("batch_mt_idle_p99 %.0f ns\n", bench_median(p99, REPS));
	return 0;
}
