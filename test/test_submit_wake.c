/*
 * test_submit_wake.c - no submission is ever stranded in the ring while its
 * carrier sleeps (the Dekker between xtc_exec_submit and the carrier's
 * park: ring push then "sleeping" load on one side, "sleeping" store then
 * ring re-check on the other).
 *
 * A foreign pthread submits to an executor in service mode, without
 * preemption (so no monitor signal can hide a lost wake), at random
 * intervals: back to back, a few microseconds (the carrier is spinning),
 * tens to hundreds of microseconds (it is parking or parked on its futex),
 * and sometimes after the previous callback ran and the carrier had time to
 * park for good. Each submission's callback spawns a proc (the xtcbench
 * tail path), and the proc stamps the time it ran. Every submission must
 * run within 1 s of being submitted (far above any scheduling noise: a lost
 * wake leaves the carrier asleep forever, as nothing else wakes a one-loop
 * executor with no timers); a watchdog turns a hang into a failure. Run on
 * one carrier and on two (the second parks on the steal poll timeout).
 * Latency figures are printed, not checked.
 *
 * Admission pacing: a producer that floods the ring (each callback spawns a
 * proc) must not make the carrier admit submissions faster than it runs
 * them; live procs stay bounded (a few drain batches), where draining a
 * full batch before every one-task step let them grow to tens of thousands
 * and the spawns ran out of stacks.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "test_util.h"

#if defined(__SANITIZE_THREAD__)
#define SCALE 8
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SCALE 8
#endif
#endif
#ifndef SCALE
#define SCALE 1
#endif

#define NSUB   (8000 / SCALE)
#define BOUND  (1 * SEC)

static int64_t sub_at[NSUB];
static _Atomic int64_t ran_at[NSUB];
static atomic_long ran;
static xtc_exec_t *ex;
static atomic_int gen_done;

static void req(void *a)
{
	intptr_t i = (intptr_t)a;

	atomic_store(&ran_at[i], xtc_clock_mono());
	atomic_fetch_add(&ran, 1);
}

static void on_submit(void *a)
{
	xtc_loop_t *l = xtc_exec_loop(ex, xtc_exec_loop_id());

	if (xtc_proc_spawn(l, req, a, NULL, NULL) != XTC_OK)
		req(a); /* counted as run; the spawn is not what is tested */
}

static void nap(long ns)
{
	struct timespec ts = { 0, ns };
	nanosleep(&ts, NULL);
}

static void spin_for(int64_t ns)
{
	int64_t end = xtc_clock_mono() + ns;
	while (xtc_clock_mono() < end)
		;
}

static void *gen(void *a)
{
	int nloops = (int)(intptr_t)a;
	unsigned seed = 12345;

	for (int i = 0; i < NSUB; i++) {
		int r = rand_r(&seed) % 100, rc;

		if (r < 20)
			; /* back to back */
		else if (r < 50)
			spin_for(rand_r(&seed) % 20000);      /* carrier spins */
		else if (r < 85)
			nap(10000 + rand_r(&seed) % 300000);  /* parking/parked */
		else {
			/* wait for the previous one, then let the carrier park */
			int64_t end = xtc_clock_mono() + BOUND;
			while (atomic_load(&ran) < i && xtc_clock_mono() < end)
				nap(20000);
			nap(50000 + rand_r(&seed) % 2000000);
		}
		sub_at[i] = xtc_clock_mono();
		do {
			rc = xtc_exec_submit(ex, i % nloops, on_submit,
			    (void *)(intptr_t)i);
		} while (rc == XTC_E_AGAIN);
		CHECK_EQ(rc, XTC_OK);
	}
	atomic_store(&gen_done, 1);
	return NULL;
}

/* Stops the run when everything ran, or BOUND after the last submission
 * (or after 60 s in all): a stranded submission fails the checks below. */
static void *watch(void *a)
{
	(void)a;
	int64_t deadline = 0, hard = xtc_clock_mono() + 60 * SEC;

	for (;;) {
		int64_t now = xtc_clock_mono();
		if (atomic_load(&ran) == NSUB)
			break;
		if (deadline == 0 && atomic_load(&gen_done))
			deadline = now + BOUND;
		if ((deadline != 0 && now > deadline) || now > hard)
			break;
		nap(1000000);
	}
	xtc_exec_stop(ex);
	return NULL;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void run_case(int nloops)
{
	pthread_t g, w;
	static int64_t lat[NSUB];
	int late = 0, missing = 0;

	memset(ran_at, 0, sizeof(ran_at));
	atomic_store(&ran, 0);
	atomic_store(&gen_done, 0);
	CHECK_EQ(xtc_exec_init(&ex, nloops), XTC_OK);
	xtc_exec_set_service_mode(ex, 1);
	CHECK_EQ(pthread_create(&g, NULL, gen, (void *)(intptr_t)nloops), 0);
	CHECK_EQ(pthread_create(&w, NULL, watch, NULL), 0);
	CHECK_EQ(xtc_exec_run(ex), XTC_OK);
	pthread_join(g, NULL);
	pthread_join(w, NULL);
	for (int i = 0; i < NSUB; i++) {
		int64_t t = atomic_load(&ran_at[i]);
		if (t == 0) {
			missing++;
			lat[i] = BOUND;
			continue;
		}
		lat[i] = t - sub_at[i];
		if (lat[i] > BOUND)
			late++;
	}
	CHECK_EQ(missing, 0);
	CHECK_EQ(late, 0);
	qsort(lat, NSUB, sizeof(lat[0]), cmp64);
	fprintf(stderr, "  %d loop(s): %d submissions, submit->run p50 %.1f us "
	    "p99 %.1f us max %.1f us\n", nloops, NSUB, lat[NSUB / 2] / 1e3,
	    lat[NSUB * 99 / 100] / 1e3, lat[NSUB - 1] / 1e3);
	CHECK_EQ(xtc_exec_fini(ex), XTC_OK);
	ex = NULL;
}

static void test_submit_wake_one(void)
{
	run_case(1);
}

static void test_submit_wake_two(void)
{
	run_case(2);
}

#define NFLOOD   (40000 / SCALE)
#define LIVE_MAX 1024 /* 4 drain batches: far above the paced bound */

static atomic_long live, live_peak, flood_done;
static atomic_int flood_bad;

static void flood_req(void *a)
{
	(void)a;
	atomic_fetch_sub(&live, 1);
	atomic_fetch_add(&flood_done, 1);
}

static void flood_cb(void *a)
{
	xtc_loop_t *l = xtc_exec_loop(ex, xtc_exec_loop_id());
	long n = atomic_fetch_add(&live, 1) + 1;

	if (n > atomic_load(&live_peak))
		atomic_store(&live_peak, n); /* only the carrier writes it */
	if (xtc_proc_spawn(l, flood_req, a, NULL, NULL) != XTC_OK) {
		atomic_store(&flood_bad, 1);
		flood_req(a);
	}
}

static void *flood_gen(void *a)
{
	(void)a;
	for (long i = 0; i < NFLOOD; i++) {
		int rc;
		while ((rc = xtc_exec_submit(ex, 0, flood_cb, NULL)) ==
		    XTC_E_AGAIN)
			;
		CHECK_EQ(rc, XTC_OK);
	}
	for (int i = 0; i < 60000 && atomic_load(&flood_done) < NFLOOD; i++)
		nap(1000000);
	xtc_exec_stop(ex);
	return NULL;
}

static void test_submit_paced(void)
{
	pthread_t g;

	CHECK_EQ(xtc_exec_init(&ex, 1), XTC_OK);
	xtc_exec_set_service_mode(ex, 1);
	CHECK_EQ(pthread_create(&g, NULL, flood_gen, NULL), 0);
	CHECK_EQ(xtc_exec_run(ex), XTC_OK);
	pthread_join(g, NULL);
	CHECK_EQ(atomic_load(&flood_done), NFLOOD);
	CHECK_EQ(atomic_load(&flood_bad), 0);
	CHECK(atomic_load(&live_peak) <= LIVE_MAX);
	fprintf(stderr, "  flood of %d submit->spawn: peak live procs %ld\n",
	    NFLOOD, atomic_load(&live_peak));
	CHECK_EQ(xtc_exec_fini(ex), XTC_OK);
	ex = NULL;
}

int main(void)
{
	RUN(test_submit_wake_one);
	RUN(test_submit_wake_two);
	RUN(test_submit_paced);
	return failures ? 1 : 0;
}
