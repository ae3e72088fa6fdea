/*
 * 10_sched_shares.c - proportional-share scheduling on one loop (the
 * "Scheduling and CPU shares" snippet): two classes with shares 3:1, three
 * workers each, all drawing rounds from one shared budget, and the stall
 * watchdog armed at 50 ms. Prints the observed run ratio and the measured
 * CPU each class was charged.
 *
 * The run ratio printed here is an observation, not a guarantee: on real
 * hardware a yield-only round costs mostly scheduling jitter, and the
 * favoured class drains the shared budget sooner and then stops running.
 * The exact 3:1 ratio is a property of the simulator (every run costs the
 * 1 us floor there; see test/test_sim.c), and the CPU split of equal-cost,
 * always-runnable workers is measured by bench/bench_exec.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "xtc.h"
#include "xtc_loop.h"
#include "xtc_exec.h"
#include "xtc_proc.h"

#define BUDGET 900

static atomic_int g_total; /* rounds taken so far, by both classes */

/* Each round goes to whichever class the scheduler picks next, so the
 * classes compete for the same scarce budget. */
static void worker(void *arg)
{
	(void)arg;
	while (atomic_fetch_add_explicit(&g_total, 1, memory_order_relaxed) <
	       BUDGET)
		xtc_yield();
}

struct ctx {
	xtc_loop_t *loop;
	xtc_exec_class_t a;
	xtc_exec_class_t b;
};

static void spawner(void *arg)
{
	struct ctx *c = arg;
	xtc_proc_opts_t oa, ob;

	memset(&oa, 0, sizeof oa);
	memset(&ob, 0, sizeof ob);
	oa.sched_class = c->a;
	ob.sched_class = c->b;
	for (int i = 0; i < 3; i++) {
		(void)xtc_proc_spawn(c->loop, worker, NULL, &oa, NULL);
		(void)xtc_proc_spawn(c->loop, worker, NULL, &ob, NULL);
	}
}

int main(void)
{
	xtc_loop_t *loop;
	xtc_exec_class_t a = NULL, b = NULL;
	struct ctx c;
	unsigned long long ra, rb, stalls;

	if (xtc_loop_init(&loop) != XTC_OK)
		return 1;
	/* A: 3 shares, B: 1 share, no latency bound. Without any class the
	 * loop stays a plain FIFO. */
	if (xtc_exec_class_create(loop, 3, 0, &a) != XTC_OK ||
	    xtc_exec_class_create(loop, 1, 0, &b) != XTC_OK)
		return 1;
	/* Report any single run longer than 50 ms (NULL callback: a line and
	 * a backtrace on stderr). */
	xtc_loop_set_stall_budget(loop, 50 * 1000 * 1000LL);

	c.loop = loop;
	c.a = a;
	c.b = b;
	if (xtc_proc_spawn(loop, spawner, &c, NULL, NULL) != XTC_OK)
		return 1;
	(void)xtc_loop_run(loop);

	ra = (unsigned long long)xtc_exec_class_runs(a);
	rb = (unsigned long long)xtc_exec_class_runs(b);
	stalls = (unsigned long long)xtc_loop_stall_count(loop);
	printf("class A runs=%llu, class B runs=%llu, ratio=%.2f:1 (shares 3:1), "
	    "stalls=%llu\n", ra, rb, rb ? (double)ra / (double)rb : 0.0, stalls);
	printf("measured CPU charged: A %.3f ms, B %.3f ms\n",
	    xtc_exec_class_cpu_ns(a) / 1e6, xtc_exec_class_cpu_ns(b) / 1e6);
	(void)xtc_loop_fini(loop);
	/* Well-behaved workers never trip the watchdog. */
	return stalls == 0 ? 0 : 1;
}
