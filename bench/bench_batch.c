/*
 * bench_batch.c - continuous batching groups (xtc_batch.h).
 *
 * Prints `name value unit` lines (medians of REPS interleaved runs, spread
 * as min..max on stderr):
 *   batch_iter_1          ns per iteration, empty CONTINUE step, 1 member
 *   batch_iter_256        ns per iteration, empty CONTINUE step, 256 members
 *   batch_per_member      (iter_256 - iter_1) / 255, ns
 *   batch_admit_complete  ns per request: submit + admission + one DONE
 *                         round + completion, callbacks empty (64 active)
 *   batch_allocs          allocations per request in that run (after create)
 *   skew_cont_rps / skew_static_rps  skewed mix (90% 1-8 rounds, 10%
 *                         64-256; step cost 20 us + 1 us per member;
 *                         max_active 32): requests per second
 *   skew_ratio            continuous / static throughput
 *   skew_short_p99_cont / _static  p99 completion latency of the short
 *                         requests (all arrive at t0), us; skew_p99_ratio
 *   equal_ratio           equal-length cohort (16 rounds each): continuous /
 *                         static throughput
 * Everything is timed in thread CPU time (see cpu_ns): one thread runs it.
 * Static batching is a plain loop (admit a cohort of max_active, run it
 * until its last member finishes, then the next): no engine, the same
 * step cost. XTC_BENCH_QUICK=1 shrinks the counts.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xtc.h"
#include "xtc_batch.h"

#include "bench_util.h"
#define BATCH_FIXTURE_COUNT_ALLOCS /* the whole (static) program */
#include "../test/batch_fixture.h"

#define REPS 5

/* Everything runs on one thread and is timed in its CPU time (bf_cpu_ns):
 * the step cost is CPU the step burns, and time the machine gave to other
 * processes (others compile here) counts for neither variant. */
#define cpu_ns bf_cpu_ns

static void spin_ns(double ns)
{
	double end = cpu_ns() + ns;

	while (cpu_ns() < end)
		;
}

static void die(const char *what)
{
	fprintf(stderr, "bench_batch: %s failed\n", what);
	exit(1);
}

/* ---- engine overhead ----------------------------------------------------- */

static long iter_left;

static int empty_step(const xtc_batch_item_t *it, xtc_batch_result_t *res,
                      size_t n, void *user)
{
	(void)it;
	(void)user;
	if (--iter_left == 0)
		for (size_t k = 0; k < n; k++)
			res[k].state = XTC_BATCH_DONE;
	return XTC_OK;
}

static double iter_ns(size_t members, long iters)
{
	xtc_batch_opts_t o = bf_opts(members, members, members, empty_step,
	                            bf_nop_complete, NULL);
	xtc_batch_t *g;
	xtc_loop_t *l;
	uint64_t h;
	double t0, t1;

	if (xtc_loop_init(&l) != XTC_OK || xtc_batch_create(l, &o, &g))
		die("create");
	for (size_t i = 0; i < members; i++)
		if (xtc_batch_submit(g, NULL, 1, &h) != XTC_OK)
			die("submit");
	xtc_batch_close(g, XTC_BATCH_DRAIN);
	iter_left = iters;
	t0 = cpu_ns();
	xtc_loop_run(l);
	t1 = cpu_ns();
	xtc_batch_destroy(g);
	xtc_loop_fini(l);
	return (t1 - t0) / (double)iters;
}

/* ---- admission + completion ---------------------------------------------- */

struct feed {
	xtc_batch_t *g;
	long total;
	long allocs0, allocs1;
	double t0, t1;
	long done;
};

static void count_complete(uint64_t h, void *r, int outcome, void *user)
{
	struct feed *f = user;

	(void)h;
	(void)r;
	(void)outcome;
	if (++f->done == f->total) {
		f->t1 = cpu_ns();
		f->allocs1 = atomic_load(&bf_allocs);
	}
}

static void feeder(void *arg)
{
	struct feed *f = arg;
	uint64_t h;

	f->allocs0 = atomic_load(&bf_allocs);
	f->t0 = cpu_ns();
	for (long i = 0; i < f->total;) {
		if (xtc_batch_submit(f->g, NULL, 1, &h) == XTC_OK)
			i++;
		else
			xtc_yield(); /* full: let the driver complete some */
	}
	xtc_batch_close(f->g, XTC_BATCH_DRAIN);
}

static void admit_ns(long total, double *ns, double *allocs)
{
	struct feed f;
	xtc_batch_opts_t o = bf_opts(256, 64, 64, bf_done_step, count_complete, &f);
	xtc_loop_t *l;

	memset(&f, 0, sizeof f);
	f.total = total;
	if (xtc_loop_init(&l) != XTC_OK || xtc_batch_create(l, &o, &f.g))
		die("create");
	if (xtc_proc_spawn(l, feeder, &f, NULL, NULL) != XTC_OK)
		die("spawn");
	xtc_loop_run(l);
	xtc_batch_destroy(f.g);
	xtc_loop_fini(l);
	*ns = (f.t1 - f.t0) / (double)total;
	*allocs = (double)(f.allocs1 - f.allocs0) / (double)total;
}

/* ---- skewed mix: continuous vs static ------------------------------------ */

#define C0_NS 20000.0
#define C1_NS 1000.0
#define MAXACT 32

struct mix {
	int n;
	int *len, *rounds, *is_short;
	double *done_at;
	double t0;
};

static struct mix mix;

static void mix_make(int n, int equal, unsigned seed)
{
	srand(seed);
	mix.n = n;
	mix.len = calloc((size_t)n, sizeof(int));
	mix.rounds = calloc((size_t)n, sizeof(int));
	mix.is_short = calloc((size_t)n, sizeof(int));
	mix.done_at = calloc((size_t)n, sizeof(double));
	for (int i = 0; i < n; i++) {
		if (equal) {
			mix.len[i] = 16;
			mix.is_short[i] = 1;
		} else if (rand() % 10 != 0) {
			mix.len[i] = 1 + rand() % 8;
			mix.is_short[i] = 1;
		} else {
			mix.len[i] = 64 + rand() % 193;
		}
	}
}

static void mix_free(void)
{
	free(mix.len);
	free(mix.rounds);
	free(mix.is_short);
	free(mix.done_at);
}

static int mix_step(const xtc_batch_item_t *it, xtc_batch_result_t *res,
                    size_t n, void *user)
{
	(void)user;
	spin_ns(C0_NS + C1_NS * (double)n);
	for (size_t k = 0; k < n; k++) {
		int i = (int)(intptr_t)it[k].request;
		if (++mix.rounds[i] == mix.len[i])
			res[k].state = XTC_BATCH_DONE;
	}
	return XTC_OK;
}

static void mix_complete(uint64_t h, void *r, int outcome, void *user)
{
	(void)h;
	(void)outcome;
	(void)user;
	mix.done_at[(intptr_t)r] = cpu_ns() - mix.t0;
}

static double mix_continuous(void)
{
	xtc_batch_opts_t o = bf_opts((size_t)mix.n, MAXACT, MAXACT, mix_step,
	                            mix_complete, NULL);
	xtc_batch_t *g;
	xtc_loop_t *l;
	uint64_t h;
	double t1;

	memset(mix.rounds, 0, sizeof(int) * (size_t)mix.n);
	if (xtc_loop_init(&l) != XTC_OK || xtc_batch_create(l, &o, &g))
		die("create");
	for (int i = 0; i < mix.n; i++)
		if (xtc_batch_submit(g, (void *)(intptr_t)i, 1, &h) != XTC_OK)
			die("submit");
	xtc_batch_close(g, XTC_BATCH_DRAIN);
	mix.t0 = cpu_ns();
	xtc_loop_run(l);
	t1 = cpu_ns() - mix.t0;
	xtc_batch_destroy(g);
	xtc_loop_fini(l);
	return t1;
}

/* admit a cohort, run it until its last member finishes, repeat */
static double mix_static(void)
{
	int act[MAXACT];
	double t1;

	memset(mix.rounds, 0, sizeof(int) * (size_t)mix.n);
	mix.t0 = cpu_ns();
	for (int base = 0; base < mix.n; base += MAXACT) {
		int na = 0;
		for (int i = base; i < mix.n && i < base + MAXACT; i++)
			act[na++] = i;
		while (na > 0) {
			int keep = 0;
			spin_ns(C0_NS + C1_NS * (double)na);
			for (int k = 0; k < na; k++) {
				int i = act[k];
				if (++mix.rounds[i] == mix.len[i])
					mix.done_at[i] = cpu_ns() - mix.t0;
				else
					act[keep++] = i;
			}
			na = keep;
		}
	}
	t1 = cpu_ns() - mix.t0;
	return t1;
}

static double short_p99(void)
{
	double *v = malloc(sizeof(double) * (size_t)mix.n);
	int m = 0;
	double p;

	for (int i = 0; i < mix.n; i++)
		if (mix.is_short[i])
			v[m++] = mix.done_at[i];
	qsort(v, (size_t)m, sizeof *v, cmp_double);
	p = v[(size_t)((double)(m - 1) * 0.99)];
	free(v);
	return p;
}

int main(void)
{
	int quick = getenv("XTC_BENCH_QUICK") != NULL;
	long iters = quick ? 20000 : 200000, reqs = quick ? 100000 : 1000000;
	int nmix = quick ? 2000 : 10000, neq = quick ? 512 : 2048;
	double i1[REPS], i256[REPS], pm[REPS], adm[REPS], al[REPS];
	double cr[REPS], sr[REPS], ratio[REPS], cp[REPS], sp[REPS], pr[REPS];
	double er[REPS];
	double loadavg[3] = {0};

	if (getloadavg(loadavg, 3) > 0)
		fprintf(stderr, "load average %.2f %.2f %.2f\n", loadavg[0],
		        loadavg[1], loadavg[2]);
	/* warm-up */
	(void)iter_ns(256, iters / 10);
	(void)admit_ns(reqs / 10, &adm[0], &al[0]);

	for (int r = 0; r < REPS; r++) {
		i1[r] = iter_ns(1, iters);
		i256[r] = iter_ns(256, iters / 4);
		pm[r] = (i256[r] - i1[r]) / 255.0;
		admit_ns(reqs, &adm[r], &al[r]);
	}
	for (int r = 0; r < REPS; r++) {
		double tc, ts, pc, ps;
		mix_make(nmix, 0, 1234u + (unsigned)r);
		if (r % 2) {
			ts = mix_static();
			ps = short_p99();
			tc = mix_continuous();
			pc = short_p99();
		} else {
			tc = mix_continuous();
			pc = short_p99();
			ts = mix_static();
			ps = short_p99();
		}
		cr[r] = nmix / (tc / 1e9);
		sr[r] = nmix / (ts / 1e9);
		ratio[r] = cr[r] / sr[r];
		cp[r] = pc / 1e3;
		sp[r] = ps / 1e3;
		pr[r] = pc / ps;
		mix_free();
		mix_make(neq, 1, 99u + (unsigned)r);
		if (r % 2) {
			ts = mix_static();
			tc = mix_continuous();
		} else {
			tc = mix_continuous();
			ts = mix_static();
		}
		er[r] = ts / tc;
		mix_free();
	}
	bf_spread("batch_iter_1", i1, REPS);
	bf_spread("batch_iter_256", i256, REPS);
	bf_spread("batch_admit_complete", adm, REPS);
	bf_spread("skew_ratio", ratio, REPS);
	bf_spread("skew_p99_ratio", pr, REPS);
	bf_spread("equal_ratio", er, REPS);
	printf("batch_iter_1 %.1f ns\n", bench_median(i1, REPS));
	printf("batch_iter_256 %.1f ns\n", bench_median(i256, REPS));
	printf("batch_per_member %.2f ns\n", bench_median(pm, REPS));
	printf("batch_admit_complete %.1f ns\n", bench_median(adm, REPS));
	printf("batch_allocs %.4f allocs\n", bench_median(al, REPS));
	printf("skew_cont_rps %.0f req/s\n", bench_median(cr, REPS));
	printf("skew_static_rps %.0f req/s\n", bench_median(sr, REPS));
	printf("skew_ratio %.2f x\n", bench_median(ratio, REPS));
	printf("skew_short_p99_cont %.0f us\n", bench_median(cp, REPS));
	printf("skew_short_p99_static %.0f us\n", bench_median(sp, REPS));
	printf("skew_p99_ratio %.3f x\n", bench_median(pr, REPS));
	printf("equal_ratio %.3f x\n", bench_median(er, REPS));
	return 0;
}
