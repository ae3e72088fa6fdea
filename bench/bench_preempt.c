/*
 * bench_preempt.c - cost of preemption.
 *
 * Prints `name value unit` lines (medians):
 *   floor_syscall_ns              getppid(2), the kernel entry/exit floor
 *   floor_self_signal_us          tgkill(2) to the calling thread, handler
 *        and sigreturn included
 *   floor_timer_late_p50_us / _p99_us
 *        a POSIX timer (CLOCK_MONOTONIC, SIGEV_THREAD_ID) owned by a
 *        spinning thread, armed 50 us ahead: its handler's clock read
 *        minus the expiry
 *   floor_timer_stall_p50_us      the largest gap between two clock reads
 *        of that spinning thread around one expiry: what the interrupt,
 *        the signal delivery and the return take from the thread
 *   floor_arm_near_us             timer_settime(2) to an expiry that
 *        becomes the CPU's earliest (reprograms the timer device), as a
 *        slice timer is on every dispatch
 *   floor_arm_far_us              timer_settime(2) to an expiry behind the
 *        tick (a queue insert only)
 *   floor_cross_signal_p50_us     tgkill(2) from another CPU to a spinning
 *        thread: send to the handler's clock read (two CPUs only)
 *   floor_cross_stall_p50_us      that thread's largest clock-read gap
 *        around one such signal
 *        These are the machine's preemption floor: no slice can cost less
 *        than a timer expiry plus a near re-arm.
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
 *          coop_pair: the pair again, each loop passing a
 *                xtc_yield_if_due point every 1024 iterations (~1 us), on
 *                an executor with clock-checked slices
 *                (xtc_exec_set_preempt_coop): no interrupt; its
 *                "preemptions" are the slice ends taken at the points.
 *   preempt_loss_wall_<case>_<slice>_pct  the same in wall time (noisy when
 *        the machine is shared; includes the monitor competing for a CPU)
 *   preempt_rate_<case>_<slice>   preemptions per second at that slice
 *   preempt_cost_per_preemption_<case>_<slice>  extra carrier CPU per
 *        preemption (pair only: the lone loss is too small to divide)
 *   monitor_cpu_<case>_<slice>_pct  the monitor thread's CPU use
 *   timer_arms_per_preemption_<case>_<slice>  carrier slice-timer
 *        (re)arms per preemption (the trigger: preempt_monitor.c)
 *   timer_early_per_preemption_<case>_<slice>  expiries that found no run
 *        due, per preemption
 *   budget_stretch_max_<case>_<slice>  largest slice multiplier the
 *        overhead budget applied (0: none; xtc_preempt_set_budget)
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
 *   capacity_<svc>_<mode>_ns / _overhead_pct
 *        what preemption being on costs a carrier that serves short
 *        requests back to back: a generator thread (CPU 0) submits
 *        requests of svc ns of work (0 and 5 us) to a one-carrier
 *        executor (CPU 1) as fast as its ring takes them; each spawns a
 *        proc. ns per request at saturation, and the extra over `none` in
 *        the same round (median of interleaved rounds). Modes: none,
 *        invol (involuntary, 50 us slice), adaptive (the quantum
 *        controller, 100 us initial), coop (clock-checked 50 us slices).
 *        No request overruns: the cost is the trigger's bookkeeping and
 *        whatever wakes up next to the carrier.
 *   slice_expiry_to_next_p50_us / _p99_us
 *        from a run's deadline to the next fiber of the loop running
 *        (200 us slice, two spinners)
 *
 * XTC_BENCH_QUICK=1 shrinks the counts; the argument `loss` runs only the
 * throughput-loss cases, `floor` only the floor (which a full run prints
 * first), `capacity` only the capacity cases, `yield` only the yield
 * dispatch pair.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "loop_int.h"
#include "preempt_int.h"
#include "xtc.h"

#include "bench_util.h"
#include "xb_floor.h" /* cmd/xtcbench: the floor probe */
#include "xtc_exec.h"
#include "xtc_fn.h"
#include "xtc_preempt.h"
#include "xtc_proc.h"

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
XTC_PREEMPTIBLE __attribute__((noinline)) static uint64_t kernel(uint64_t n, uint64_t x)
{
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

/* the same loop with a preemption point every 1024 iterations (about a
 * microsecond): what code that can carry points runs under clock-checked
 * slices (xtc_exec_set_preempt_coop) */
XTC_PREEMPTIBLE __attribute__((noinline)) static uint64_t kernel_points(uint64_t n,
                                                        uint64_t x)
{
	for (uint64_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		if ((i & 1023) == 1023)
			(void)xtc_yield_if_due();
	}
	return x;
}

static volatile uint64_t sink;
static int use_points; /* the workers run kernel_points */

/* Both workers run on the one carrier thread: its CPU clock read by the
 * first to start and the last to end is the carrier's CPU time for the
 * work, signal delivery included, other processes' noise excluded. */
static intptr_t worker(void *arg)
{
	int64_t t0 = now_ns(), c0 = thread_cpu_ns();
	int64_t expect = 0;
	if (atomic_compare_exchange_strong(&first_start, &expect, t0))
		atomic_store(&cpu_first, c0);
	sink += use_points ? kernel_points(work_iters, (uint64_t)(uintptr_t)arg)
	                   : kernel(work_iters, (uint64_t)(uintptr_t)arg);
	int64_t t1 = now_ns(), c1 = thread_cpu_ns();
	atomic_store(&last_end, t1);
	atomic_store(&cpu_last, c1);
	return 0;
}

struct pair_res {
	double wall, cpu, rate, monitor_pct, arms_per, cost, early_per, stretch;
};

static struct pair_res run_pair(int64_t slice, int nworkers)
{
	struct pair_res r = { -1, -1, 0, 0, 0, 0, 0, 0 };
	xtc_exec_t *e = NULL;
	if (xtc_exec_init(&e, 1) != XTC_OK)
		return r;
	if (use_points)
		xtc_exec_set_preempt_coop(e, 1); /* slices end at the points */
	if (slice > 0)
		xtc_exec_set_preempt(e, slice);
	xtc_preempt_set_involuntary(slice > 0 && !use_points);
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
	xtc_loop_stats_t ls;
	if (use_points && xtc_exec_loop_stats(e, 0, &ls) == XTC_OK) {
		/* no involuntary preemption: count the slice ends taken at
		 * the points (each one a demotion) */
		a.preemptions = 0;
		b.preemptions = ls.demotions;
	}
	xtc_exec_fini(e);
	xtc_preempt_set_involuntary(0);
	r.wall = (double)(atomic_load(&last_end) - atomic_load(&first_start));
	r.cpu = (double)(atomic_load(&cpu_last) - atomic_load(&cpu_first));
	r.rate = (double)(b.preemptions - a.preemptions) / (r.wall / 1e9);
	r.monitor_pct = (double)(m1 - m0) / r.wall * 100;
	if (b.preemptions > a.preemptions)
		r.early_per = (double)(b.timer_early - a.timer_early) /
		              (double)(b.preemptions - a.preemptions);
	r.stretch = (double)b.stretch_max;
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
	double arms[3][16], cost[3][16], early[3][16], str[3][16];
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
			early[s][i] = p.early_per;
			str[s][i] = p.stretch;
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
			printf("timer_early_per_preemption_%s_%s %.2f count\n",
			       name, names[s], median(early[s], runs));
			printf("budget_stretch_max_%s_%s %.0f x\n", name,
			       names[s], median(str[s], runs));
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
	/* the same pair with a point every ~1 us, clock-checked slices: the
	 * baseline runs the same points with preemption off */
	use_points = 1;
	bench_loss_case("coop_pair", 2);
	use_points = 0;
}

/* ---- capacity ------------------------------------------------------------ */

enum { CAP_NONE, CAP_INVOL, CAP_ADAPTIVE, CAP_COOP, CAP_MODES };
static const char *cap_names[CAP_MODES] = { "none", "invol", "adaptive",
                                            "coop" };
static struct {
	xtc_exec_t *ex;
	int64_t n, svc_ns, t0, t1;
	_Atomic int pinned;
	int rc;
	/* the carrier bumps it per request: on the line the generator reads
	 * per submission it added a miss on each side to every request */
	_Alignas(64) _Atomic int64_t done;
	_Alignas(64) char pad;
} cap;

static void cap_pin(int cpu)
{
	cpu_set_t m;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&m);
	CPU_SET(cpu, &m);
	(void)sched_setaffinity(0, sizeof m, &m);
}

static void cap_req(void *arg)
{
	(void)arg;
	int64_t end = now_ns() + cap.svc_ns;
	while (cap.svc_ns > 0 && now_ns() < end)
		;
	if (atomic_fetch_add(&cap.done, 1) + 1 == cap.n)
		cap.t1 = now_ns();
}

static void cap_spawn(void *arg)
{
	(void)arg;
	/* a load first: an exchange per request would write the line the
	 * generator reads per submission */
	if (!atomic_load_explicit(&cap.pinned, memory_order_relaxed) &&
	    !atomic_exchange(&cap.pinned, 1))
		cap_pin(1); /* the carrier */
	if (xtc_proc_spawn(xtc_exec_loop(cap.ex, 0), cap_req, NULL, NULL,
	                   NULL) != XTC_OK)
		atomic_fetch_add(&cap.done, 1); /* counted, never hangs */
}

static void *cap_gen(void *arg)
{
	(void)arg;
	cap_pin(0);
	cap.t0 = now_ns();
	for (int64_t i = 0; i < cap.n; i++) {
		int rc;
		while ((rc = xtc_exec_submit(cap.ex, 0, cap_spawn, NULL)) ==
		       XTC_E_AGAIN)
			;
		if (rc != XTC_OK) {
			cap.rc = rc;
			atomic_store(&cap.done, cap.n);
			break;
		}
	}
	while (atomic_load(&cap.done) < cap.n) {
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	xtc_exec_stop(cap.ex);
	return NULL;
}

/* ns per request at saturation, or < 0 if the run failed */
static double cap_run(int mode, int64_t n, int64_t svc_ns)
{
	xtc_fn_quantum_t *q = NULL;
	memset(&cap, 0, sizeof cap);
	cap.n = n;
	cap.svc_ns = svc_ns;
	if (xtc_exec_init(&cap.ex, 1) != XTC_OK)
		return -1;
	xtc_exec_set_service_mode(cap.ex, 1);
	if (mode == CAP_INVOL || mode == CAP_ADAPTIVE)
		xtc_preempt_set_involuntary(1);
	if (mode == CAP_COOP)
		(void)xtc_exec_set_preempt_coop(cap.ex, 1);
	if (mode != CAP_NONE)
		(void)xtc_exec_set_preempt(cap.ex, 50000);
	if (mode == CAP_ADAPTIVE) {
		xtc_fn_quantum_opts_t qo;
		memset(&qo, 0, sizeof qo);
		qo.initial_ns = 100000;
		qo.period_ns = 20000000;
		qo.workers = 1;
		if (xtc_fn_quantum_create(&qo, &q) == XTC_OK)
			(void)xtc_exec_set_preempt_adaptive(cap.ex, q);
	}
	pthread_t g;
	int rc = pthread_create(&g, NULL, cap_gen, NULL) == 0 ? XTC_OK : -1;
	if (rc == XTC_OK) {
		rc = xtc_exec_run(cap.ex);
		pthread_join(g, NULL);
	}
	xtc_preempt_set_involuntary(0);
	if (q != NULL)
		(void)xtc_exec_set_preempt_adaptive(cap.ex, NULL);
	xtc_exec_fini(cap.ex);
	if (q != NULL)
		xtc_fn_quantum_destroy(q);
	if (rc != XTC_OK || cap.rc != XTC_OK || cap.t1 <= cap.t0)
		return -1;
	return (double)(cap.t1 - cap.t0) / (double)n;
}

static void bench_capacity(void)
{
	static const int64_t svcs[] = { 0, 5000 };
	int rounds = quick ? 3 : 5;
	(void)xtc_stack_reserve(4096);
	for (size_t k = 0; k < sizeof svcs / sizeof svcs[0]; k++) {
		int64_t svc = svcs[k];
		/* runs of 0.4 s (quick) or 1 s: shorter ones measured the
		 * carrier's start (timers, first stacks) more than its rate */
		int64_t n = (quick ? 400 : 1000) * 1000000LL / (svc + 600);
		double ns[CAP_MODES][5], ovh[CAP_MODES][5];
		(void)cap_run(CAP_NONE, n / 4, svc); /* warm-up */
		for (int r = 0; r < rounds; r++)
			for (int m = 0; m < CAP_MODES; m++)
				ns[m][r] = cap_run(m, n, svc);
		for (int m = 0; m < CAP_MODES; m++) {
			for (int r = 0; r < rounds; r++)
				ovh[m][r] = 100.0 * (ns[m][r] / ns[CAP_NONE][r] - 1);
			double med = median(ns[m], rounds);
			if (med < 0) {
				printf("capacity_%lldus_%s_ns failed\n",
				       (long long)svc / 1000, cap_names[m]);
				continue;
			}
			printf("capacity_%lldus_%s_ns %.1f ns\n",
			       (long long)svc / 1000, cap_names[m], med);
			if (m != CAP_NONE)
				printf("capacity_%lldus_%s_overhead_pct %.1f %%\n",
				       (long long)svc / 1000, cap_names[m],
				       median(ovh[m], rounds));
		}
	}
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
XTC_PREEMPTIBLE static int64_t tsc_ns(void)
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

XTC_PREEMPTIBLE static intptr_t lat_spinner(void *arg)
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
	if (use_points)
		xtc_exec_set_preempt_coop(e, 1); /* slices end at the points */
	if (slice > 0)
		xtc_exec_set_preempt(e, slice);
	xtc_preempt_set_involuntary(slice > 0 && !use_points);
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

/* ---- the machine's preemption floor -------------------------------------- */

/* What an involuntary preemption costs on this machine before xtc does any
 * work of its own (the kernel's timer interrupt, signal delivery and
 * sigreturn, re-arming the timer; in a guest each is a VM exit): a slice
 * cannot be cheaper, so the other results are read against it. The probe
 * is cmd/xtcbench/xb_floor.c, compiled into this program by meson. */
static void bench_floor(void)
{
	xb_floor_t r;
	const char *err = xb_floor_measure(&r, quick ? 200 : XB_FLOOR_NMAX);
	if (err) {
		fprintf(stderr, "bench_preempt: floor: %s\n", err);
		return;
	}
	printf("floor_syscall_ns %.0f ns\n", r.syscall_ns);
	printf("floor_self_signal_us %.2f us\n", r.self_signal_us);
	printf("floor_timer_late_p50_us %.1f us\n", r.timer_late_p50_us);
	printf("floor_timer_late_p99_us %.1f us\n", r.timer_late_p99_us);
	printf("floor_timer_stall_p50_us %.1f us\n", r.timer_stall_p50_us);
	printf("floor_arm_near_us %.2f us\n", r.arm_near_us);
	printf("floor_arm_far_us %.2f us\n", r.arm_far_us);
	if (!r.cross) {
		fprintf(stderr, "bench_preempt: floor: one CPU, no cross-CPU probe\n");
		return;
	}
	printf("floor_cross_signal_p50_us %.1f us\n", r.cross_signal_p50_us);
	printf("floor_cross_stall_p50_us %.1f us\n", r.cross_stall_p50_us);
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
	if (only && !strcmp(only, "floor")) {
		bench_floor();
		return 0;
	}
	if (only && !strcmp(only, "capacity")) {
		bench_capacity();
		return 0;
	}
	if (only && !strcmp(only, "yield")) {
		bench_yield();
		return 0;
	}
	bench_floor();
	if (!xtc_preempt_involuntary_supported()) {
		fprintf(stderr, "bench_preempt: no involuntary path here\n");
		bench_due();
		return 0;
	}
	bench_due();
	bench_yield();
	bench_latency();
	bench_loss();
	bench_capacity();
	return 0;
}
