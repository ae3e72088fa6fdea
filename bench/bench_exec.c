/*
 * bench_exec.c - executor and scheduling-class benchmarks.
 *
 * Prints `name value unit` lines:
 *   exec_share_600/300/100   CPU fraction of three always-runnable classes
 *                            (600:300:100 shares, equal-cost workers) over
 *                            1 s, measured by work done (chunks finished)
 *   exec_share_err_max       worst relative error of those fractions (%)
 *   exec_share_window_err    worst relative error over any 100 ms window (%)
 *   exec_spawn_p50/_p99      cross-thread spawn -> first run, to a parked
 *                            carrier (ns); bimodal on a VM: a few us when
 *                            the carrier is queued on a busy CPU, 15-25 us
 *                            when its wake has to start a halted vCPU
 *   exec_submit_p50/_p99     same through xtc_exec_submit (ns)
 *   exec_submit_mops         sustained cross-thread submissions from one
 *                            producer thread (M/s, bounded ring, blocking
 *                            xtc_exec_submit_wait on a full ring)
 *   exec_fanout_ops          fan-out/fan-in of 10^6 small procs on 2 loops
 *                            (procs per second, spawn to last exit)
 *   exec_fanout_ns           the same as ns per proc
 *   yield_noclass/_class     ns per xtc_yield between two procs on one loop
 *                            without / with a scheduling class
 *   yield_exec2_pinned/_migratable  the same two procs on loop 0 of a
 *                            2-loop executor (pinned: never stolen;
 *                            migratable: both are, the other carrier takes
 *                            one, so each yields to itself)
 * An argument runs one group: yield, shares, latency, submit, fanout.
 * XTC_BENCH_QUICK=1 shrinks the counts.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xtc.h"

#include "bench_util.h"
#include "xtc_exec.h"

static int quick;

static int64_t now(void)
{
	return xtc_clock_mono();
}

static void spin_ns(int64_t ns)
{
	int64_t end = now() + ns;
	while (now() < end)
		;
}

/* ---- CPU split ------------------------------------------------------------ */

#define NCLS 3
#define WINDOWS 10

static atomic_long chunks[NCLS];
static atomic_int share_stop;

static void share_worker(void *a)
{
	atomic_long *ctr = a;

	while (!atomic_load_explicit(&share_stop, memory_order_relaxed)) {
		spin_ns(50000); /* one equal-cost chunk of work */
		atomic_fetch_add_explicit(ctr, 1, memory_order_relaxed);
		xtc_yield();
	}
}

struct runner {
	xtc_exec_t *e;
	int rc;
};

static void *run_thread(void *a)
{
	struct runner *r = a;
	r->rc = xtc_exec_run(r->e);
	return NULL;
}

static void bench_shares(void)
{
	const int shares[NCLS] = { 600, 300, 100 };
	xtc_exec_t *e;
	xtc_exec_class_t c[NCLS];
	xtc_proc_opts_t o;
	struct runner r;
	pthread_t th;
	long prev[NCLS] = { 0 }, tot[NCLS] = { 0 };
	double worst_win = 0, worst = 0, want[NCLS];

	xtc_exec_init(&e, 1);
	memset(&o, 0, sizeof(o));
	for (int i = 0; i < NCLS; i++) {
		xtc_exec_class_create(xtc_exec_loop(e, 0), shares[i], 0, &c[i]);
		o.sched_class = c[i];
		for (int k = 0; k < 2; k++)
			xtc_proc_spawn(xtc_exec_loop(e, 0), share_worker, &chunks[i],
			    &o, NULL);
		want[i] = shares[i] / 1000.0;
	}
	r.e = e;
	pthread_create(&th, NULL, run_thread, &r);
	usleep(100000); /* warm-up */
	for (int i = 0; i < NCLS; i++)
		prev[i] = atomic_load(&chunks[i]);
	for (int w = 0; w < WINDOWS; w++) {
		long d[NCLS], sum = 0;
		usleep(100000);
		for (int i = 0; i < NCLS; i++) {
			long v = atomic_load(&chunks[i]);
			d[i] = v - prev[i];
			prev[i] = v;
			tot[i] += d[i];
			sum += d[i];
		}
		for (int i = 0; i < NCLS && sum > 0; i++) {
			double err = 100.0 * (d[i] / (double)sum - want[i]) / want[i];
			if (err < 0)
				err = -err;
			if (err > worst_win)
				worst_win = err;
		}
	}
	atomic_store(&share_stop, 1);
	pthread_join(th, NULL);
	{
		long sum = tot[0] + tot[1] + tot[2];
		for (int i = 0; i < NCLS; i++) {
			double f = sum ? tot[i] / (double)sum : 0;
			double err = 100.0 * (f - want[i]) / want[i];
			if (err < 0)
				err = -err;
			if (err > worst)
				worst = err;
			printf("exec_share_%d %.4f frac\n", shares[i], f);
		}
	}
	printf("exec_share_err_max %.2f %%\n", worst);
	printf("exec_share_window_err %.2f %%\n", worst_win);
	xtc_exec_fini(e);
}

/* ---- cross-thread spawn latency to a parked carrier ------------------------ */

static _Atomic int64_t lat_t0, lat_seen;

static int lat_task(xtc_task_t *t, void *u)
{
	(void)t;
	(void)u;
	atomic_store(&lat_seen, now() - atomic_load(&lat_t0));
	return XTC_TASK_DONE;
}

static void lat_fn(void *u)
{
	(void)u;
	atomic_store(&lat_seen, now() - atomic_load(&lat_t0));
}

static void bench_latency(int use_submit)
{
	int n = quick ? 200 : 2000;
	int64_t *v = calloc((size_t)n, sizeof(*v));
	xtc_exec_t *e;
	struct runner r;
	pthread_t th;

	xtc_exec_init(&e, 1);
	xtc_exec_set_service_mode(e, 1);
	r.e = e;
	pthread_create(&th, NULL, run_thread, &r);
	usleep(20000);
	for (int i = 0; i < n; i++) {
		usleep(500); /* the carrier spins out and parks */
		atomic_store(&lat_seen, -1);
		atomic_store(&lat_t0, now());
		if (use_submit)
			xtc_exec_submit(e, 0, lat_fn, NULL);
		else
			xtc_exec_spawn(e, lat_task, NULL, NULL);
		while (atomic_load(&lat_seen) < 0)
			;
		v[i] = atomic_load(&lat_seen);
	}
	xtc_exec_stop(e);
	pthread_join(th, NULL);
	xtc_exec_fini(e);
	qsort(v, (size_t)n, sizeof(*v), cmp_i64);
	printf("exec_%s_p50 %lld ns\n", use_submit ? "submit" : "spawn",
	    (long long)v[n / 2]);
	printf("exec_%s_p99 %lld ns\n", use_submit ? "submit" : "spawn",
	    (long long)v[n * 99 / 100]);
	free(v);
}

/* ---- submissions from one producer ------------------------------------------ */

static atomic_long sub_done;

static void sub_fn(void *u)
{
	(void)u;
	atomic_fetch_add_explicit(&sub_done, 1, memory_order_relaxed);
}

static void bench_submit(void)
{
	long n = quick ? 500000 : 5000000;
	xtc_exec_t *e;
	struct runner r;
	pthread_t th;
	int64_t t0, t1;

	xtc_exec_init(&e, 1);
	xtc_exec_set_service_mode(e, 1);
	r.e = e;
	pthread_create(&th, NULL, run_thread, &r);
	usleep(20000);
	atomic_store(&sub_done, 0);
	t0 = now();
	for (long i = 0; i < n; i++)
		xtc_exec_submit_wait(e, 0, sub_fn, NULL, -1);
	while (atomic_load(&sub_done) < n)
		;
	t1 = now();
	xtc_exec_stop(e);
	pthread_join(th, NULL);
	xtc_exec_fini(e);
	printf("exec_submit_mops %.2f M/s\n", n / ((t1 - t0) / 1e9) / 1e6);
}

/* ---- fan-out / fan-in of 10^6 small procs on 2 loops ---------------------- */

static atomic_long fan_done;

static void fan_child(void *a)
{
	(void)a;
	atomic_fetch_add_explicit(&fan_done, 1, memory_order_relaxed);
}

struct fan_arg {
	xtc_loop_t *loop;
	long n;
};

static void fan_spawner(void *a)
{
	struct fan_arg *f = a;

	for (long i = 0; i < f->n; i++) {
		xtc_proc_spawn(f->loop, fan_child, NULL, NULL, NULL);
		if ((i & 63) == 63)
			xtc_yield(); /* let the children run: stacks recycle */
	}
}

static double fanout_once(long n)
{
	xtc_exec_t *e;
	struct fan_arg fa[2];
	int64_t t0, t1;

	xtc_exec_init(&e, 2);
	atomic_store(&fan_done, 0);
	for (int i = 0; i < 2; i++) {
		fa[i].loop = xtc_exec_loop(e, i);
		fa[i].n = n / 2;
		xtc_proc_spawn(fa[i].loop, fan_spawner, &fa[i], NULL, NULL);
	}
	t0 = now();
	xtc_exec_run(e);
	t1 = now();
	if (atomic_load(&fan_done) != n)
		fprintf(stderr, "fanout: %ld of %ld\n", atomic_load(&fan_done), n);
	xtc_exec_fini(e);
	return (double)(t1 - t0);
}

static void bench_fanout(void)
{
	long n = quick ? 100000 : 1000000;
	int64_t v[5];
	int reps = quick ? 1 : 5;

	fanout_once(n / 10);
	for (int i = 0; i < reps; i++)
		v[i] = (int64_t)fanout_once(n);
	qsort(v, (size_t)reps, sizeof(*v), cmp_i64);
	printf("exec_fanout_ops %.0f ops/s\n", n / (v[reps / 2] / 1e9));
	printf("exec_fanout_ns %.1f ns\n", v[reps / 2] / (double)n);
}

/* ---- yield with and without classes ------------------------------------------ */

static void yielder(void *a)
{
	long n = (long)(intptr_t)a;
	for (long i = 0; i < n; i++)
		xtc_yield();
}

static double yield_once(int with_class, long n)
{
	xtc_loop_t *l;
	xtc_exec_class_t c = NULL;
	xtc_proc_opts_t o;
	int64_t t0, t1;

	xtc_loop_init(&l);
	memset(&o, 0, sizeof(o));
	if (with_class) {
		xtc_exec_class_create(l, 100, 0, &c);
		o.sched_class = c;
	}
	for (int i = 0; i < 2; i++)
		xtc_proc_spawn(l, yielder, (void *)(intptr_t)n, &o, NULL);
	t0 = now();
	xtc_loop_run(l);
	t1 = now();
	xtc_loop_fini(l);
	return (t1 - t0) / (2.0 * n);
}

static double yield_exec2(int migratable, long n)
{
	xtc_exec_t *e;
	xtc_proc_opts_t o;
	int64_t t0, t1;

	xtc_exec_init(&e, 2);
	memset(&o, 0, sizeof(o));
	o.migratable = migratable;
	for (int i = 0; i < 2; i++)
		xtc_proc_spawn(xtc_exec_loop(e, 0), yielder, (void *)(intptr_t)n,
		    &o, NULL);
	t0 = now();
	xtc_exec_run(e);
	t1 = now();
	xtc_exec_fini(e);
	return (t1 - t0) / (2.0 * n);
}

static void bench_yield(void)
{
	long n = quick ? 200000 : 2000000;

	for (int mig = 0; mig < 2; mig++) {
		int64_t v[5];
		yield_exec2(mig, n / 10);
		for (int i = 0; i < 5; i++)
			v[i] = (int64_t)(yield_exec2(mig, n) * 1000);
		qsort(v, 5, sizeof(*v), cmp_i64);
		printf("yield_exec2_%s %.1f ns\n", mig ? "migratable" : "pinned",
		    v[2] / 1000.0);
	}

	for (int with = 0; with < 2; with++) {
		int64_t v[5];
		yield_once(with, n / 10);
		for (int i = 0; i < 5; i++)
			v[i] = (int64_t)(yield_once(with, n) * 1000);
		qsort(v, 5, sizeof(*v), cmp_i64);
		printf("yield_%s %.1f ns\n", with ? "class" : "noclass",
		    v[2] / 1000.0);
	}
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;

	quick = getenv("XTC_BENCH_QUICK") != NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!only || !strcmp(only, "yield"))
		bench_yield();
	if (!only || !strcmp(only, "shares"))
		bench_shares();
	if (!only || !strcmp(only, "latency")) {
		bench_latency(0);
		bench_latency(1);
	}
	if (!only || !strcmp(only, "submit"))
		bench_submit();
	if (!only || !strcmp(only, "fanout"))
		bench_fanout();
	return 0;
}
