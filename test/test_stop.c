/*
 * test_stop.c - a stop at any moment ends the run it races.
 *
 * xtc_exec_stop (and xtc_loop_stop) may be called before the thread that
 * calls run has entered it, while the carriers start, while they run, or
 * while they leave: every one of those stops ends the run (the flag is
 * consumed when the run returns, never cleared when it starts). Each case
 * runs many times against an executor in service mode (only a stop can end
 * its run) with a job that keeps it busy; a lost stop is a run that never
 * returns, caught by a watchdog that fails the test instead of hanging.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "test_util.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define ROUNDS 150
#else
#define ROUNDS 1000
#endif

struct runner {
	xtc_exec_t *e;
	xtc_loop_t *l;
	atomic_int done;
	int rc;
};

static void *exec_runner(void *a)
{
	struct runner *r = a;

	r->rc = xtc_exec_run(r->e);
	atomic_store(&r->done, 1);
	return NULL;
}

static void *loop_runner(void *a)
{
	struct runner *r = a;

	r->rc = xtc_loop_run(r->l);
	atomic_store(&r->done, 1);
	return NULL;
}

/* Wait for the run to return; a lost stop is reported, not hung on. */
static int joined(pthread_t th, struct runner *r)
{
	for (int i = 0; i < 10000 && !atomic_load(&r->done); i++)
		usleep(1000);
	if (!atomic_load(&r->done))
		return 0;
	pthread_join(th, NULL);
	return 1;
}

static void spin_ns(long ns)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

/* A proc that never ends on its own: yields forever (until killed at fini). */
static void forever(void *a)
{
	(void)a;
	for (;;)
		if (xtc_proc_sleep(1 * MS) != XTC_OK)
			return;
}

static void test_exec_stop_races_start(void)
{
	xtc_exec_t *e;
	int lost = 0;

	CHECK_EQ(xtc_exec_init(&e, 2), XTC_OK);
	xtc_exec_set_service_mode(e, 1);
	CHECK_EQ(xtc_proc_spawn(xtc_exec_loop(e, 0), forever, NULL, NULL, NULL),
	    XTC_OK);
	for (int i = 0; i < ROUNDS && !lost; i++) {
		struct runner r = { .e = e };
		pthread_t th;
		int where = i % 5;

		if (where == 0) /* before the run thread exists */
			CHECK_EQ(xtc_exec_stop(e), XTC_OK);
		CHECK_EQ(pthread_create(&th, NULL, exec_runner, &r), 0);
		if (where == 1) /* right after: before carriers exist */
			CHECK_EQ(xtc_exec_stop(e), XTC_OK);
		else if (where == 2) {
			sched_yield();
			CHECK_EQ(xtc_exec_stop(e), XTC_OK);
		} else if (where == 3) {
			spin_ns((i * 7919L) % 200000); /* somewhere in start-up */
			CHECK_EQ(xtc_exec_stop(e), XTC_OK);
		} else if (where == 4) {
			/* through one of its loops */
			CHECK_EQ(xtc_loop_stop(xtc_exec_loop(e, i & 1)), XTC_OK);
		}
		if (!joined(th, &r)) {
			fprintf(stderr, "round %d (case %d): stop lost\n", i, where);
			lost = 1;
			break;
		}
		CHECK_EQ(r.rc, XTC_OK);
	}
	CHECK_EQ(lost, 0);
	if (lost)
		_exit(1); /* the run thread is stuck: cannot fini */
	/* consumed: the next run is not ended by an old stop */
	{
		struct runner r = { .e = e };
		pthread_t th;

		CHECK_EQ(pthread_create(&th, NULL, exec_runner, &r), 0);
		usleep(20000);
		CHECK_EQ(atomic_load(&r.done), 0);
		CHECK_EQ(xtc_exec_stop(e), XTC_OK);
		CHECK(joined(th, &r));
	}
	CHECK_EQ(xtc_exec_fini(e), XTC_OK);
}

/* The plain loop keeps its documented latch: a stop before run ends it. */
static void test_loop_stop_races_start(void)
{
	xtc_loop_t *l = new_loop();
	int lost = 0;

	/* a proc that sleeps forever keeps the loop from finishing */
	CHECK_EQ(xtc_proc_spawn(l, forever, NULL, NULL, NULL), XTC_OK);

	for (int i = 0; i < ROUNDS / 4 && !lost; i++) {
		struct runner r = { .l = l };
		pthread_t th;
		CHECK_EQ(pthread_create(&th, NULL, loop_runner, &r), 0);
		if (i & 1)
			sched_yield();
		CHECK_EQ(xtc_loop_stop(l), XTC_OK);
		if (!joined(th, &r)) {
			lost = 1;
			break;
		}
		CHECK_EQ(r.rc, XTC_OK);
	}
	CHECK_EQ(lost, 0);
	if (lost)
		_exit(1);
	CHECK_EQ(xtc_loop_fini(l), XTC_OK);
}

int main(void)
{
	RUN(test_exec_stop_races_start);
	RUN(test_loop_stop_races_start);
	return failures ? 1 : 0;
}
