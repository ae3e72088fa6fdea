/*
 * bench_sched.c - the cost of a lane policy on the pick.
 *
 * One loop, `lanes` ready lanes (the default lane and lanes - 1 classes),
 * one fiber per lane yielding n times: every yield is one selection
 * opportunity. Variants, run interleaved (variant order rotates each
 * round, RUNS rounds, medians):
 *   none      classes only: the ordinary (vruntime) picker
 *   default   a C policy whose select always returns XTC_SCHED_DEFAULT
 *   lane0     a C policy that always chooses class lane 0 (the others
 *             are served by the bypass override)
 *   cont      the built-in continuous policy with no batch group
 *             (returns XTC_SCHED_DEFAULT after scanning the snapshot)
 * Prints `sched_<variant>_L<lanes> <ns per yield> ns` and the overhead of
 * each policy against `none` measured in the same round, as
 * `sched_<variant>_L<lanes>_over <ns> ns` (median of the per-round
 * differences). max_bypass is 4. Times are the loop thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID): on a shared machine they leave out the time
 * other processes held the core.
 * XTC_BENCH_QUICK=1 shrinks the counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "xtc.h"
#include "xtc_sched.h"

#include "bench_util.h"

#define RUNS 7
#define NVAR 4

static const char *names[NVAR] = { "none", "default", "lane0", "cont" };

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void yielder(void *a)
{
	long n = (long)(intptr_t)a;

	for (long i = 0; i < n; i++)
		xtc_yield();
}

static int sel_default(const xtc_sched_lane_t *v, size_t n, void *u)
{
	(void)v;
	(void)n;
	(void)u;
	return XTC_SCHED_DEFAULT;
}

static int sel_lane0(const xtc_sched_lane_t *v, size_t n, void *u)
{
	(void)v;
	(void)n;
	(void)u;
	return 0;
}

static double run_once(int var, int lanes, long n)
{
	xtc_loop_t *l;
	xtc_exec_class_t c[XTC_LOOP_MAX_CLASSES];
	xtc_proc_opts_t o = { 0 };
	xtc_sched_policy_t p = { .size = sizeof(p),
	    .version = XTC_SCHED_VERSION, .max_bypass = 4 };
	double t0, t1;
	int rc = 0;

	if (xtc_loop_init(&l) != 0) {
		fprintf(stderr, "loop init failed\n");
		exit(1);
	}
	for (int i = 0; i < lanes - 1; i++)
		rc |= xtc_exec_class_create(l, 100, 0, &c[i]);
	if (var == 1 || var == 2) {
		p.select = var == 1 ? sel_default : sel_lane0;
		rc |= xtc_sched_policy_set(l, &p);
	} else if (var == 3) {
		rc |= xtc_sched_continuous_set(l, 4);
	}
	if (rc != 0) {
		fprintf(stderr, "setup failed: %s\n", xtc_strerror(rc));
		exit(1);
	}
	for (int i = 0; i < lanes; i++) {
		o.sched_class = i == 0 ? NULL : c[i - 1];
		xtc_proc_spawn(l, yielder, (void *)(intptr_t)n, &o, NULL);
	}
	t0 = now_ns();
	xtc_loop_run(l);
	t1 = now_ns();
	xtc_loop_fini(l);
	return (t1 - t0) / ((double)n * lanes);
}

static void bench(int lanes, long n)
{
	double v[NVAR][RUNS], d[NVAR][RUNS];

	for (int k = 0; k < NVAR; k++)
		run_once(k, lanes, n / 10); /* warm stacks and caches */
	for (int r = 0; r < RUNS; r++) {
		double t[NVAR];
		for (int j = 0; j < NVAR; j++) {
			int k = (j + r) % NVAR; /* rotate the order */
			t[k] = run_once(k, lanes, n / lanes);
		}
		for (int k = 0; k < NVAR; k++) {
			v[k][r] = t[k];
			d[k][r] = t[k] - t[0];
		}
	}
	for (int k = 0; k < NVAR; k++) {
		double lo, hi, med;

		qsort(v[k], RUNS, sizeof(double), cmp_double);
		lo = v[k][0];
		hi = v[k][RUNS - 1];
		med = bench_median(v[k], RUNS);
		printf("sched_%s_L%d %.2f ns\n", names[k], lanes, med);
		fprintf(stderr, "  %-8s L=%-2d median %.2f ns  [%.2f .. %.2f]\n",
		    names[k], lanes, med, lo, hi);
		if (k > 0)
			printf("sched_%s_L%d_over %.2f ns\n", names[k], lanes,
			    bench_median(d[k], RUNS));
	}
}

int main(void)
{
	long n = getenv("XTC_BENCH_QUICK") ? 20000 : 1000000;
	xtc_sched_policy_t p = { .size = sizeof(p),
	    .version = XTC_SCHED_VERSION, .max_bypass = 4,
	    .select = sel_default };
	xtc_loop_t *l;

	/* a build without the feature has nothing to measure */
	if (xtc_loop_init(&l) != 0)
		return 1;
	if (xtc_sched_policy_set(l, &p) == XTC_E_NOSYS) {
		xtc_loop_fini(l);
		fprintf(stderr, "lane policies not built\n");
		return 0;
	}
	xtc_loop_fini(l);
	bench(2, n);
	bench(5, n);
	bench(17, n);
	return 0;
}
