/* test_churn.c - stress (suite `stress`): long spawn/exit churn of
 * coroutines, stackless tasks, cross-thread spawns and anonymous timers with
 * resident memory checked flat after a warm-up, and a cross-thread wake
 * storm with exact counts (a lost wake hangs the test into its timeout). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "xtc.h"
#include "loop_int.h"

#include "test_util.h"

#if defined(__SANITIZE_THREAD__)
#define SCALE 50L
#else
#define SCALE 1L
#endif

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;

	if (f == NULL)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &res) != 2)
		res = -1;
	fclose(f);
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static _Atomic long done;
static _Atomic long agains;

static long local_done; /* loop thread only */

/* arg: bit 0 = spawned by the local driver, bit 1 = yield once first. */
static intptr_t leaf(void *a)
{
	if ((uintptr_t)a & 2)
		xtc_yield();
	atomic_fetch_add_explicit(&done, 1, memory_order_relaxed);
	if ((uintptr_t)a & 1)
		local_done++;
	return 0;
}

static int leaf_task(xtc_task_t *self, void *u)
{
	(void)self;
	atomic_fetch_add_explicit(&done, 1, memory_order_relaxed);
	if (u != NULL)
		local_done++;
	return XTC_TASK_DONE;
}

static void tick(void *u)
{
	(void)u;
	atomic_fetch_add_explicit(&done, 1, memory_order_relaxed);
	local_done++;
}

struct drv { xtc_loop_t *l; long n; };

/* Mixed local churn from a driver coroutine: coroutines (half of them
 * yield once), stackless tasks and zero-delay anonymous timers. */
static intptr_t driver(void *a)
{
	struct drv *d = a;
	long base = local_done;

	for (long i = 0; i < d->n; i += 48) {
		for (int k = 0; k < 16; k++) {
			CHECK(xtc_async(d->l, leaf, (void *)(intptr_t)(1 | ((k & 1) << 1)),
			                NULL) == 0);
			CHECK(xtc_task_spawn(d->l, leaf_task, d, NULL) == 0);
			CHECK(xtc_timer_set(d->l, 0, tick, NULL, NULL) == 0);
		}
		/* Wait for our own batch (remote spawns finish meanwhile). */
		while (local_done < base + i + 48)
			xtc_yield();
	}
	return 0;
}

/* Foreign threads spawn into the running loop. */
struct rem { xtc_loop_t *l; long n; };
static void *remote_spawner(void *a)
{
	struct rem *r = a;

	for (long i = 0; i < r->n; i++) {
		int rc;
		/* XTC_E_AGAIN is the inbox's backpressure: retry later. */
		while ((rc = (i & 1) ? xtc_task_spawn(r->l, leaf_task, NULL, NULL)
		                     : xtc_async(r->l, leaf, NULL, NULL)) ==
		       XTC_E_AGAIN) {
			atomic_fetch_add(&agains, 1);
			sched_yield();
		}
		CHECK(rc == 0);
		CHECK(atomic_load_explicit(&r->l->remote_pending,
		                           memory_order_relaxed) <=
		      XTC__REMOTE_SPAWN_MAX + 2);
		if ((i & 1023) == 0)
			sched_yield();
	}
	return NULL;
}

static _Atomic int remote_done;
static void keeper(void *a)
{
	(void)a;
	while (!atomic_load(&remote_done))
		xtc__task_park();
}

struct joiner { pthread_t th[2]; xtc_task_t *k; };
/* Joins the spawners, then lets the keeper finish so the run can end. */
static void *join_spawners(void *a)
{
	struct joiner *j = a;

	for (int i = 0; i < 2; i++)
		pthread_join(j->th[i], NULL);
	atomic_store(&remote_done, 1);
	CHECK(xtc__task_wake(j->k) == 0);
	return NULL;
}

static void churn_round(xtc_loop_t *l, long local, long remote_per_thread)
{
	struct drv d = { l, local };
	struct rem r = { l, remote_per_thread };
	xtc__spawn_opts_t keep = { .retain = 1 };
	struct joiner j;
	pthread_t jt;

	atomic_store(&remote_done, 0);
	CHECK(xtc__task_spawn_fiber(l, keeper, NULL, &keep, &j.k) == 0);
	CHECK(xtc_async(l, driver, &d, NULL) == 0);
	for (int i = 0; i < 2; i++)
		pthread_create(&j.th[i], NULL, remote_spawner, &r);
	pthread_create(&jt, NULL, join_spawners, &j);
	CHECK(xtc_loop_run(l) == 0); /* concurrent with the spawners */
	pthread_join(jt, NULL);
	CHECK(xtc_loop_run(l) == 0); /* spawns posted after the keeper left */
	CHECK(l->live_tasks == 0);
}

static void test_churn(void)
{
	xtc_loop_t *l;
	long local = 3000000 / SCALE, remote = 250000 / SCALE;
	long rss0, rss1, rss2, expect;

	REQUIRE(xtc_loop_init(&l) == 0);
	churn_round(l, local / 10 / 48 * 48, 0); /* warm-up */
	local = local / 48 * 48;

	/* Phase 1, local churn only: resident memory stays flat. */
	rss0 = rss_kib();
	atomic_store(&done, 0);
	churn_round(l, local, 0);
	rss1 = rss_kib();
	CHECK(atomic_load(&done) == local);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
	CHECK(rss1 - rss0 < 4096);
#endif

	/* Phase 2, with two foreign spawners: exact counts; memory bounded by
	 * the inbox backpressure (at most XTC__REMOTE_SPAWN_MAX pending task
	 * structs), not by the number of spawns. */
	atomic_store(&done, 0);
	churn_round(l, local, remote);
	rss2 = rss_kib();
	expect = local + 2 * remote;
	CHECK(atomic_load(&done) == expect);
	if (atomic_load(&done) != expect)
		fprintf(stderr, "done %ld, expected %ld\n", atomic_load(&done),
		        expect);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
	CHECK(rss2 - rss1 < 96 * 1024);
#endif
	printf("test_churn: %ld local spawns, rss %ld -> %ld KiB; then %ld "
	       "local + %ld remote (%ld AGAIN), rss -> %ld KiB\n", local, rss0,
	       rss1, local, 2 * remote, atomic_load(&agains), rss2);
	CHECK(xtc_loop_fini(l) == 0);
}

/* ---- wake storm ------------------------------------------------------ */

enum { STORM_THREADS = 4 };
static _Atomic long produced;
static long consumed;
static long storm_total;
static xtc_task_t *_Atomic storm_task;

static void storm_consumer(void *a)
{
	(void)a;
	atomic_store(&storm_task, xtc__task_current());
	while (consumed < storm_total) {
		long p = atomic_load(&produced);
		if (p > consumed)
			consumed = p;
		else
			xtc__task_park();
	}
}

static void *storm_producer(void *a)
{
	long n = (long)(intptr_t)a;
	xtc_task_t *t;

	while ((t = atomic_load(&storm_task)) == NULL)
		sched_yield();
	for (long i = 0; i < n; i++) {
		atomic_fetch_add(&produced, 1);
		CHECK(xtc__task_wake(t) == 0);
	}
	return NULL;
}

static void test_wake_storm(void)
{
	xtc_loop_t *l;
	pthread_t th[STORM_THREADS];
	long per = 250000 / SCALE;
	xtc__spawn_opts_t keep = { .retain = 1 };

	storm_total = per * STORM_THREADS;
	REQUIRE(xtc_loop_init(&l) == 0);
	CHECK(xtc__task_spawn_fiber(l, storm_consumer, NULL, &keep, NULL) == 0);
	for (int i = 0; i < STORM_THREADS; i++)
		pthread_create(&th[i], NULL, storm_producer, (void *)(intptr_t)per);
	CHECK(xtc_loop_run(l) == 0);
	for (int i = 0; i < STORM_THREADS; i++)
		pthread_join(th[i], NULL);
	CHECK(consumed == storm_total);
	CHECK(xtc_loop_fini(l) == 0);
}

int main(void)
{
	test_churn();
	test_wake_storm();
	if (failures) {
		fprintf(stderr, "test_churn: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_churn: ok\n");
	return 0;
}
