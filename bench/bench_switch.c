/*
 * bench_switch.c - cost of the context-switch layer.
 *
 * Prints `name value unit` lines (medians of several runs):
 *   switch_fiber_oneway      xtc__fiber_switch, the path xtc_yield takes
 *                            (substrate as built: asm unless coro=ucontext)
 *   switch_asm_oneway        the raw assembly swap (no TLS update)
 *   switch_ucontext_oneway   the ucontext substrate (swapcontext)
 *   switch_ucontext_vs_asm   ratio of the two
 *   fiber_spawn_exit_pooled  init + run to exit + release, stacks cached
 * One-way = half of a root -> fiber -> root round trip.
 *
 * XTC_BENCH_QUICK=1 shrinks the counts (for emulators and CI smoke runs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fiber_int.h"
#include "xtc.h"

#include "bench_util.h"

#define RUNS 7

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- xtc__fiber_switch ------------------------------------------- */

static xtc__fiber_t pp_fiber;

static void pp_entry(void *arg)
{
	(void)arg;
	for (;;)
		xtc__fiber_switch(xtc__fiber_root());
}

static double bench_fiber_switch(long rounds)
{
	xtc__fiber_t *root = xtc__fiber_root();
	xtc__fiber_switch(&pp_fiber); /* warm */
	double t0 = now_ns();
	for (long i = 0; i < rounds; i++)
		xtc__fiber_switch(&pp_fiber);
	double t1 = now_ns();
	(void)root;
	return (t1 - t0) / (2.0 * (double)rounds);
}

/* ---- raw assembly swap ------------------------------------------- */

#ifdef XTC__HAVE_ASM_SWITCH
static xtc__fiber_t raw_root, raw_fiber;

static void raw_start(xtc__fiber_t *f)
{
	(void)f;
	for (;;)
		xtc__ctx_swap(&raw_fiber, &raw_root);
}

static double bench_asm(long rounds)
{
	xtc__ctx_swap(&raw_root, &raw_fiber);
	double t0 = now_ns();
	for (long i = 0; i < rounds; i++)
		xtc__ctx_swap(&raw_root, &raw_fiber);
	double t1 = now_ns();
	return (t1 - t0) / (2.0 * (double)rounds);
}
#endif

/* ---- ucontext substrate ------------------------------------------ */

#if defined(XTC__HAVE_UCONTEXT) && !defined(XTC__FIBER_ASAN)
static xtc__fiber_t uc_root, uc_fiber;

static void uc_start(xtc__fiber_t *f)
{
	(void)f;
	for (;;)
		xtc__uctx_swap(&uc_fiber, &uc_root);
}

static double bench_ucontext(long rounds)
{
	xtc__uctx_swap(&uc_root, &uc_fiber);
	double t0 = now_ns();
	for (long i = 0; i < rounds; i++)
		xtc__uctx_swap(&uc_root, &uc_fiber);
	double t1 = now_ns();
	return (t1 - t0) / (2.0 * (double)rounds);
}
#endif

/* ---- spawn + exit with the stack cache ---------------------------- */

static void exit_entry(void *arg)
{
	(void)arg;
	xtc__fiber_exit_to(xtc__fiber_root());
}

static double bench_spawn(long n)
{
	xtc__fiber_t f;
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		if (xtc__fiber_init(&f, 0, exit_entry, NULL) != XTC_OK)
			abort();
		xtc__fiber_switch(&f);
		xtc__fiber_release(&f);
	}
	double t1 = now_ns();
	return (t1 - t0) / (double)n;
}

int main(void)
{
	const char *q = getenv("XTC_BENCH_QUICK");
	long scale = (q != NULL && strcmp(q, "1") == 0) ? 100 : 1;
	double v[RUNS];

	if (xtc__fiber_thread_init() != XTC_OK)
		return 1;
	if (xtc__fiber_init(&pp_fiber, 0, pp_entry, NULL) != XTC_OK)
		return 1;
	for (int r = 0; r < RUNS; r++)
		v[r] = bench_fiber_switch(2000000 / scale);
	double fiber_ns = bench_median(v, RUNS);
	printf("switch_fiber_oneway %.2f ns\n", fiber_ns);
	fprintf(stderr, "bench_switch: substrate %s\n", xtc__fiber_substrate());

	double asm_ns = 0;
#ifdef XTC__HAVE_ASM_SWITCH
	xtc__stack_t st;
	if (xtc__stack_alloc(0, &st) != XTC_OK)
		return 1;
	raw_fiber.sp = xtc__ctx_make(st.hi, raw_start, &raw_fiber);
	for (int r = 0; r < RUNS; r++)
		v[r] = bench_asm(2000000 / scale);
	asm_ns = bench_median(v, RUNS);
	printf("switch_asm_oneway %.2f ns\n", asm_ns);
#endif

#if defined(XTC__HAVE_UCONTEXT) && !defined(XTC__FIBER_ASAN)
	void *root_uc = calloc(1, xtc__uctx_size());
	if (root_uc == NULL || xtc__stack_alloc(0, &uc_fiber.stack) != XTC_OK)
		return 1;
	uc_root.impl = root_uc;
	if (xtc__uctx_make(&uc_fiber, uc_start) != XTC_OK)
		return 1;
	for (int r = 0; r < 5; r++)
		v[r] = bench_ucontext(50000 / scale);
	double uc_ns = bench_median(v, 5);
	printf("switch_ucontext_oneway %.2f ns\n", uc_ns);
	if (asm_ns > 0)
		printf("switch_ucontext_vs_asm %.1f x\n", uc_ns / asm_ns);
#endif

	for (int r = 0; r < RUNS; r++)
		v[r] = bench_spawn(200000 / scale);
	printf("fiber_spawn_exit_pooled %.2f ns\n", bench_median(v, RUNS));
	return 0;
}
