/*
 * bench_preempt.c - cost of preemption.
 *
 * Prints `name value unit` lines (medians):
 *   preempt_loss_<case>_1ms_pct / _200us_pct / _100us_pct
 *        throughput loss of a call-free C loop (never-yielding fibers on
 *        one executor loop, involuntary path on) against the same work
 *        with preemption off, in the carrier's CPU time (signal delivery
 *        included; robust to other load on the machine). Two cases:
 *          lone: one spinner alone on its loop. Nothing else could run, so
 *                the run is not sliced (only the XTC__PREEMPT_ALONE_NS
 *                safety net signals it): the cost of preemption being on.
 *          pair: two spinners on one loop. Every slice really switches, so
 *                loss = cost per preemption x preemption rate.
 *   preempt_loss_wall_<case>_<slice>_pct  the same in wall time (noisy when
 *        the machine is shared; includes the monitor competing for a CPU)
 *   preempt_rate_<case>_<slice>   preemptions per second at that slice
 *   preempt_cost_per_preemption_<case>_<slice>  extra carrier CPU per
 *        preemption (pair only: the lone loss is too small to divide)
 *   monitor_cpu_<case>_<slice>_pct  the monitor thread's CPU use
 *   timer_arms_per_preemption_<case>_<slice>  carrier slice-timer
 *        (re)arms per preemption (the trigger: monitor.c)
 *   preempt_measured_cost_<case>_<slice>  the runtime's own estimate
 *        (lateness + handler-to-next-dispatch, EWMA) that floors the
 *        adaptive quantum
 *   due_check_flag_ns            xtc__preempt_due() on the signal-flag path
 *   due_check_ring_ns            the same with an io_uring tick ring armed
 *   due_check_none_ns            the loop without any check (baseline)
 *   yield_dispatch_preempt_off_ns / _on_ns
 *        per xtc_yield of two fibers that always yield in time (executor
 *        loop; the run clock read, deadline publication and fence with
 *        preemption on; no signal is ever sent)
 *   slice_expiry_to_next_p50_us / _p99_us
 *        from a run's deadline to the next fiber of the loop running
 *        (200 us slice, two spinners)
 *
 * XTC_BENCH_QUICK=1 shrinks the counts; the argument `loss` runs only the
 * throughput-loss cases.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loop_int.h"
#include "preempt_int.h"
#include "xtc.h"

#include "bench_util.h"
#include "xtc_exec.h"
#include "xtc_preempt.h"

static int quick;

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return v[n / 2];
}

/* ---- throughput loss ---------------------------------------------------- */

static uint64_t work_iters;
static _Atomic int64_t first_start, last_end, cpu_first, cpu_last;

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* call-free dependent loop: no yield point, no library call */
__attribute__((noinline)) static uint64_t kernel(uint64_t n, uint64_t x)
{
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

static volatile uint64_t sink;

/* Both workers run on the one carrier thread: its CPU clock read by the
 * first to start and the last to end is the carrier's CPU time for the
 * work, signal delivery included, other processes' noise excluded. */
static intptr_t worker(void *arg)
{
	int64_t t0 = now_ns(), c0 = thread_cpu_ns();
	int64_t expect = 0;
	if (atomic_compare_exchange_strong(&first_start, &expect, t0))
		atomic_store(&cpu_first, c0);
	sink += kernel(work_iters, (uint64_t)(uintptr_t)arg);
	int64_t t1 = now_ns(), c1 = thread_cpu_ns();
	atomic_store(&last_end, t1);
	atomic_store(&cpu_last, c1);
	return 0;
}

struct pair_res {
	double wall, cpu, rate, monitor_pct, arms_per, cost;
};

static struct pair_res run_pair(int64_t slice, int nworkers)
{
	struct pair_res r = { -1, -1, 0, 0, 0, 0 };
	xtc_exec_t *e = NULL;
	if (xtc_exec_init(&e, 1) != XTC_OK)
		return r;
	if (slice > 0)
		xtc_exec_set_preempt(e, slice);
	xtc_preempt_set_involuntary(slice > 0);
	atomic_store(&first_start, 0);
	atomic_store(&last_end, 0);
	for (int i = 0; i < nworkers; i++)
		xtc_exec_async_on(e, 0, worker, (void *)(intptr_t)(i + 1), NULL);
	xtc_preempt_stats_t a, b;
	xtc_preempt_stats_global(&a, NULL);
	int64_t m0 = xtc__monitor_cpu_ns();
	xtc_exec_run(e);
	int64_t m1 = xtc__monitor_cpu_ns();
	xtc_preempt_stats_global(&b, NULL);
	xtc_exec_fini(e);
	xtc_preempt_set_involuntary(0);
	r.wall = (double)(atomic_load(&last_end) - atomic_load(&first_start));
	r.cpu = (double)(atomic_load(&cpu_last) - atomic_load(&cpu_first));
	r.rate = (double)(b.preemptions - a.preemptions) / (r.wall / 1e9);
	r.monitor_pct = (double)(m1 - m0) / r.wall * 100;
	if (b.preemptions > a.preemptions)
		r.arms_per = (double)(b.timer_arms - a.timer_arms) /
		             (double)(b.preemptions - a.preemptions);
	r.cost = (double)b.cost_ns;
	return r;
}

static void bench_loss_case(const char *name, int nworkers)
{
	const int runs = quick ? 3 : 7;
	const int64_t slices[] = { 1000000, 200000, 100000 };
	const char *names[] = { "1ms", "200us", "100us" };
	double bw[16], bc[16], w[3][16], c[3][16], rate[3][16], mon[3][16];
	double arms[3][16], cost[3][16];
	/* interleave configurations so machine noise hits them alike */
	for (int i = 0; i < runs; i++) {
		struct pair_res b = run_pair(0, nworkers);
		bw[i] = b.wall;
		bc[i] = b.cpu;
		for (int s = 0; s < 3; s++) {
			struct pair_res p = run_pair(slices[s], nworkers);
			w[s][i] = p.wall;
			c[s][i] = p.cpu;
			rate[s][i] = p.rate;
			mon[s][i] = p.monitor_pct;
			arms[s][i] = p.arms_per;
			cost[s][i] = p.cost;
		}
	}
	double bwm = median(bw, runs), bcm = median(bc, runs);
	printf("preempt_base_wall_%s %.1f ms\n", name, bwm / 1e6);
	printf("preempt_base_cpu_%s %.1f ms\n", name, bcm / 1e6);
	for (int s = 0; s < 3; s++) {
		double wm = median(w[s], runs), cm = median(c[s], runs);
		double rm = median(rate[s], runs);
		printf("preempt_loss_%s_%s_pct %.2f %%\n", name, names[s],
		       (cm - bcm) / bcm * 100);
		printf("preempt_loss_wall_%s_%s_pct %.2f %%\n", name, names[s],
		       (wm - bwm) / bwm * 100);
		printf("preempt_rate_%s_%s %.0f /s\n", name, names[s], rm);
		if (nworkers > 1 && rm > 0)
			printf("preempt_cost_per_preemption_%s_%s %.2f us\n", name,
			       names[s], (cm - bcm) / 1e3 / (rm * cm / 1e9));
		printf("monitor_cpu_%s_%s_pct %.2f %%\n", name, names[s],
		       median(mon[s], runs));
		if (nworkers > 1) {
			printf("timer_arms_per_preemption_%s_%s %.2f count\n",
			       name, names[s], median(arms[s], runs));
			printf("preempt_measured_cost_%s_%s %.2f us\n", name,
			       names[s], median(cost[s], runs) / 1e3);
		}
	}
}

static void bench_loss(void)
{
	/* the same total work in both cases */
	work_iters = quick ? 100000000 : 400000000;
	bench_loss_case("lone", 1);
	work_iters /= 2;
	bench_loss_case("pair", 2);
}

/* ---- due-check cost ----------------------------------------------------- */

__attribute__((noinline)) static uint64_t loop_none(uint64_t n)
{
	uint64_t x = 1, due = 0;
	for (uint64_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" ::: "memory");
	}
	return x + due;
}

__attribute__((noinline)) static uint64_t loop_check(uint64_t n)
{
	uint64_t x = 1, due = 0;
	for (uint64_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		due += (uint64_t)xtc__preempt_due();
	}
	return x + due;
}

static double per_iter(uint64_t (*fn)(uint64_t), uint64_t n)
{
	double v[9];
	int runs = quick ? 3 : 9;
	for (int r = 0; r < runs; r++) {
		int64_t t0 = now_ns();
		sink += fn(n);
		v[r] = (double)(now_ns() - t0) / (double)n;
	}
	return median(v, runs);
}

static void bench_due(void)
{
	uint64_t n = quick ? 20000000 : 200000000;
	double none = per_iter(loop_none, n);
	printf("due_check_none_ns %.3f ns\n", none);
	/* flag path: a slot armed, no tick pending most of the time */
	xtc_preempt_arm(1000000000); /* 1 s: effectively no tick */
	double flag = per_iter(loop_check, n);
	xtc_preempt_disarm();
	printf("due_check_flag_ns %.3f ns\n", flag - none);
	if (xtc_preempt_arm_ring(1000000) == XTC_OK) {
		double ring = per_iter(loop_check, n);
		xtc_preempt_disarm_ring();
		printf("due_check_ring_ns %.3f ns\n", ring - none);
	} else {
		fprintf(stderr, "bench_preempt: no io_uring tick ring\n");
	}
}

/* ---- slice expiry -> next fiber running ---------------------------------- */

#define MAX_SAMPLES 200000
static int64_t lat[MAX_SAMPLES];
static _Atomic int n_lat;
static volatile int cur_owner = -1;
static volatile int64_t run_start_of[2];
static volatile int lat_stop;
static int64_t lat_slice;

/* TSC -> ns, calibrated once: the spinner must not call the vDSO clock
 * (the handler never preempts inside the vDSO, so a loop that lives there
 * is preempted late, which is not what this measures). */
static double tsc_ns_per_tick;
static int64_t tsc_ns(void)
{
#if defined(__x86_64__)
	unsigned lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (int64_t)((double)(((uint64_t)hi << 32) | lo) * tsc_ns_per_tick);
#else
	return now_ns();
#endif
}

static void tsc_calibrate(void)
{
#if defined(__x86_64__)
	unsigned lo, hi;
	int64_t t0 = now_ns();
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	uint64_t c0 = ((uint64_t)hi << 32) | lo;
	struct timespec ts = { 0, 50000000 };
	nanosleep(&ts, NULL);
	int64_t t1 = now_ns();
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	uint64_t c1 = ((uint64_t)hi << 32) | lo;
	tsc_ns_per_tick = (double)(t1 - t0) / (double)(c1 - c0);
#endif
}

static intptr_t lat_spinner(void *arg)
{
	int me = (int)(intptr_t)arg;
	while (!lat_stop) {
		int64_t t = tsc_ns();
		int prev = cur_owner;
		if (prev != me) {
			if (prev >= 0) {
				int64_t dl = run_start_of[prev] + lat_slice;
				int k = atomic_fetch_add(&n_lat, 1);
				if (k < MAX_SAMPLES)
					lat[k] = t - dl;
			}
			run_start_of[me] = t; /* within ~ns of the dispatch */
			cur_owner = me;
		}
	}
	return 0;
}

static void *lat_timer(void *arg)
{
	xtc_exec_t *e = arg;
	struct timespec ts = { quick ? 0 : 2, quick ? 500000000 : 0 };
	nanosleep(&ts, NULL);
	lat_stop = 1;
	(void)e;
	return NULL;
}

static void bench_latency(void)
{
	lat_slice = 200000;
	tsc_calibrate();
	xtc_exec_t *e = NULL;
	if (xtc_exec_init(&e, 1) != XTC_OK)
		return;
	xtc_exec_set_preempt(e, lat_slice);
	xtc_preempt_set_involuntary(1);
	xtc_exec_async_on(e, 0, lat_spinner, (void *)0, NULL);
	xtc_exec_async_on(e, 0, lat_spinner, (void *)1, NULL);
	pthread_t th;
	pthread_create(&th, NULL, lat_timer, e);
	xtc_exec_run(e);
	pthread_join(th, NULL);
	xtc_exec_fini(e);
	xtc_preempt_set_involuntary(0);
	int n = atomic_load(&n_lat);
	if (n > MAX_SAMPLES)
		n = MAX_SAMPLES;
	if (n < 10) {
		fprintf(stderr, "bench_preempt: too few slice samples (%d)\n", n);
		return;
	}
	qsort(lat, (size_t)n, sizeof *lat, cmp_i64);
	printf("slice_expiry_to_next_p50_us %.1f us\n", (double)lat[n / 2] / 1e3);
	printf("slice_expiry_to_next_p99_us %.1f us\n",
	       (double)lat[(size_t)n * 99 / 100] / 1e3);
	printf("slice_expiry_samples %d count\n", n);
}

/* ---- dispatch cost of yielding fibers with preemption on ----------------- */

static volatile uint64_t yield_n;
static intptr_t yielder(void *arg)
{
	(void)arg;
	for (uint64_t i = 0; i < yield_n; i++)
		xtc_yield();
	return 0;
}

static double yield_ns(int64_t slice)
{
	xtc_exec_t *e = NULL;
	if (xtc_exec_init(&e, 1) != XTC_OK)
		return -1;
	if (slice > 0)
		xtc_exec_set_preempt(e, slice);
	xtc_preempt_set_involuntary(slice > 0);
	xtc_exec_async_on(e, 0, yielder, NULL, NULL);
	xtc_exec_async_on(e, 0, yielder, NULL, NULL);
	int64_t t0 = now_ns();
	xtc_exec_run(e);
	int64_t t1 = now_ns();
	xtc_exec_fini(e);
	xtc_preempt_set_involuntary(0);
	return (double)(t1 - t0) / (double)(2 * yield_n);
}

static void bench_yield(void)
{
	yield_n = quick ? 200000 : 2000000;
	double off[9], on[9];
	int runs = quick ? 3 : 7;
	for (int r = 0; r < runs; r++) {
		off[r] = yield_ns(0);
		on[r] = yield_ns(200000);
	}
	printf("yield_dispatch_preempt_off_ns %.1f ns\n", median(off, runs));
	printf("yield_dispatch_preempt_on_ns %.1f ns\n", median(on, runs));
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	quick = getenv("XTC_BENCH_QUICK") != NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (only && !strcmp(only, "loss")) {
		bench_loss();
		return 0;
	}
	if (!xtc_preempt_involuntary_supported()) {
		fprintf(stderr, "bench_preempt: no involuntary path here\n");
		bench_due();
		return 0;
	}
	bench_due();
	bench_yield();
	bench_latency();
	bench_loss();
	return 0;
}
