/*
 * bench_yield.c - xtc_yield between fibers on one loop.
 *
 * Prints `name value unit` lines (medians of RUNS runs):
 *   yield            ns per xtc_yield with two coroutines ping-ponging on
 *                    one loop (each yield hands the CPU to the other one)
 *   yield_self       ns per xtc_yield when the yielding fiber is alone
 *   yield_budget     ns per xtc_yield with a yield budget set (timed path:
 *                    every yield returns to the scheduler stack)
 *   yield_cpu        `yield` measured in thread CPU time (robust to other
 *                    processes sharing the core)
 * XTC_BENCH_QUICK=1 shrinks the counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "xtc.h"

#include "bench_util.h"

#define RUNS 7

/* Wall time, or this thread's CPU time: on a shared machine the CPU-time
 * figure leaves out the time other processes held the core. */
static int use_cpu_clock;

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(use_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC,
	              &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static intptr_t yielder(void *a)
{
	long n = (long)(intptr_t)a;

	for (long i = 0; i < n; i++)
		xtc_yield();
	return 0;
}

/* ns per yield for `fibers` coroutines each yielding n times. */
static double run_once(int fibers, long n, int64_t budget)
{
	xtc_loop_t *l;
	double t0, t1;

	if (xtc_loop_init(&l) != 0) {
		fprintf(stderr, "loop init failed\n");
		exit(1);
	}
	xtc_yield_set_budget(l, budget);
	for (int i = 0; i < fibers; i++)
		xtc_async(l, yielder, (void *)(intptr_t)n, NULL);
	t0 = now_ns();
	xtc_loop_run(l);
	t1 = now_ns();
	xtc_loop_fini(l);
	return (t1 - t0) / ((double)n * fibers);
}

static double bench(int fibers, long n, int64_t budget)
{
	double v[RUNS];

	run_once(fibers, n / 10, budget); /* warm stacks and caches */
	for (int r = 0; r < RUNS; r++)
		v[r] = run_once(fibers, n, budget);
	return bench_median(v, RUNS);
}

int main(void)
{
	long n = getenv("XTC_BENCH_QUICK") ? 20000 : 2000000;

	printf("yield %.2f ns\n", bench(2, n, 0));
	printf("yield_self %.2f ns\n", bench(1, n, 0));
	printf("yield_budget %.2f ns\n", bench(2, n / 4, 1000000000));
	use_cpu_clock = 1;
	printf("yield_cpu %.2f ns\n", bench(2, n, 0));
	return 0;
}
