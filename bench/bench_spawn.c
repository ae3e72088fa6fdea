/*
 * bench_spawn.c - spawn + run + exit of xtc_async coroutines with pooled
 * stacks (task structs from the loop's free list, stacks from the fiber
 * layer's per-thread cache).
 *
 * Prints `name value unit` lines (medians of RUNS runs):
 *   spawn          ns per coroutine: a driver coroutine spawns a batch of
 *                  BATCH, yields until they all ran to completion, repeats
 *   spawn_burst    batches of 1024 live at once (above the per-thread
 *                  stack cache; served by the loop's overflow stack pool)
 *   spawn_one      one at a time: spawn, yield until it finished, repeat
 *                  (the shape of Go's `go f()` + wait)
 *   spawn_task     batches of stackless tasks (xtc_task_spawn)
 *   spawn_cpu      `spawn` measured in thread CPU time
 * XTC_BENCH_QUICK=1 shrinks the counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "xtc.h"

#include "bench_util.h"

#define RUNS 7
static int batch = 32;

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

static long done;
static xtc_loop_t *loop;
static long total;

static intptr_t leaf(void *a)
{
	(void)a;
	done++;
	return 0;
}

static int leaf_task(xtc_task_t *self, void *u)
{
	(void)self;
	(void)u;
	done++;
	return XTC_TASK_DONE;
}

static intptr_t driver(void *a)
{
	int stackless = (int)(intptr_t)a;

	for (long i = 0; i < total; i += batch) {
		for (int k = 0; k < batch; k++) {
			if (stackless)
				xtc_task_spawn(loop, leaf_task, NULL, NULL);
			else
				xtc_async(loop, leaf, NULL, NULL);
		}
		while (done < i + batch)
			xtc_yield();
	}
	return 0;
}

static double run_once(long n, int stackless)
{
	double t0, t1;

	if (xtc_loop_init(&loop) != 0) {
		fprintf(stderr, "loop init failed\n");
		exit(1);
	}
	done = 0;
	total = n;
	xtc_async(loop, driver, (void *)(intptr_t)stackless, NULL);
	t0 = now_ns();
	xtc_loop_run(loop);
	t1 = now_ns();
	xtc_loop_fini(loop);
	return (t1 - t0) / (double)n;
}

static double bench(long n, int stackless)
{
	double v[RUNS];

	run_once(n / 10, stackless);
	for (int r = 0; r < RUNS; r++)
		v[r] = run_once(n, stackless);
	return bench_median(v, RUNS);
}

int main(void)
{
	long n = getenv("XTC_BENCH_QUICK") ? 10000 : 1000000;

	printf("spawn %.2f ns\n", bench(n, 0));
	batch = 1024;
	printf("spawn_burst %.2f ns\n", bench(n / 1024 * 1024, 0));
	batch = 1;
	printf("spawn_one %.2f ns\n", bench(n, 0));
	batch = 32;
	printf("spawn_task %.2f ns\n", bench(n, 1));
	use_cpu_clock = 1;
	printf("spawn_cpu %.2f ns\n", bench(n, 0));
	return 0;
}
