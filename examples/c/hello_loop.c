/*
 * hello_loop.c - the loop on its own: stackless tasks, a task parked on a
 * timer, a task woken by a waker, plain timers and a cancelled timer.
 *
 * Everything here runs on the main thread, one callback at a time; the loop
 * returns from xtc_loop_run when no task and no armed timer is left.
 */
#include <stdio.h>
#include <stdlib.h>

#include <xtc.h>

#define MS (1000 * 1000LL)

static int64_t t0;

static double
elapsed_ms(void)
{
	return (double)(xtc_clock_mono() - t0) / MS;
}

/* A task that runs three times in a row, going to the back of the run queue
 * between runs. */
static int
counter(xtc_task_t *self, void *user)
{
	int *n = user;

	(void)self;
	printf("[%6.2f ms] counter: run %d\n", elapsed_ms(), ++*n);
	return *n < 3 ? XTC_TASK_RESCHED : XTC_TASK_DONE;
}

/* A task that sleeps 10 ms between runs by parking on a timer. */
static int
sleeper(xtc_task_t *self, void *user)
{
	int *n = user;
	int rc;

	printf("[%6.2f ms] sleeper: wake-up %d\n", elapsed_ms(), *n);
	if (++*n > 3)
		return XTC_TASK_DONE;
	rc = xtc_task_park_on_timer(self, 10 * MS);
	if (rc != XTC_OK) {
		fprintf(stderr, "park_on_timer: %s\n", xtc_strerror(rc));
		return XTC_TASK_DONE;
	}
	return XTC_TASK_PENDING;
}

/* A task that parks until someone fires its waker. */
struct waiter {
	xtc_waker_t waker;
	int ready;
	int runs;
};

static int
waiter(xtc_task_t *self, void *user)
{
	struct waiter *w = user;

	w->runs++;
	if (!w->ready) {
		printf("[%6.2f ms] waiter: not ready, parking\n", elapsed_ms());
		xtc_task_waker(self, &w->waker);
		return XTC_TASK_PENDING;
	}
	printf("[%6.2f ms] waiter: woken, done after %d runs\n",
	    elapsed_ms(), w->runs);
	return XTC_TASK_DONE;
}

/* Timer callback: make the waiter's condition true, then wake it. */
static void
release(void *user)
{
	struct waiter *w = user;

	printf("[%6.2f ms] timer: releasing the waiter\n", elapsed_ms());
	w->ready = 1;
	xtc_waker_wake(&w->waker);
}

static void
never(void *user)
{
	(void)user;
	printf("this timer was cancelled and must not fire\n");
	exit(1);
}

static void
check(int rc, const char *what)
{
	if (rc != XTC_OK) {
		fprintf(stderr, "%s: %s\n", what, xtc_strerror(rc));
		exit(1);
	}
}

int
main(void)
{
	xtc_loop_t *loop;
	xtc_timer_t *doomed;
	struct waiter w = {0};
	int count = 0, naps = 0;

	printf("xtc %s, I/O backend %s\n", xtc_version_string(),
	    xtc_io_backend_name());
	check(xtc_loop_init(&loop), "xtc_loop_init");
	t0 = xtc_clock_mono();

	check(xtc_task_spawn(loop, counter, &count, NULL), "spawn counter");
	check(xtc_task_spawn(loop, sleeper, &naps, NULL), "spawn sleeper");
	check(xtc_task_spawn(loop, waiter, &w, NULL), "spawn waiter");
	check(xtc_timer_set(loop, 15 * MS, release, &w, NULL), "timer_set");
	check(xtc_timer_set(loop, 5 * MS, never, NULL, &doomed), "timer_set");
	check(xtc_timer_cancel(doomed), "timer_cancel");

	check(xtc_loop_run(loop), "xtc_loop_run");
	printf("[%6.2f ms] loop returned: counter=%d sleeper=%d waiter=%d\n",
	    elapsed_ms(), count, naps - 1, w.runs);
	check(xtc_loop_fini(loop), "xtc_loop_fini");
	return count == 3 && naps == 4 && w.runs == 2 ? 0 : 1;
}
