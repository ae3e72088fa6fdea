/*
 * bench_proc.c - process benchmarks. One line per figure, `name value unit`
 * (medians of RUNS runs; tools/benchtable pairs them with Go):
 *
 *   spawn_proc             spawn + run + exit of one proc, waited for one at
 *                          a time from a driver proc (pooled stacks), the
 *                          analogue of `go f(); wg.Wait()`
 *   proc_pingpong          mailbox round trip between two procs on one loop
 *                          (8-byte messages, each buffer freed), vs an
 *                          unbuffered channel ping-pong at GOMAXPROCS=1
 *   proc_pingpong_cpu      proc_pingpong in the thread's CPU time (what a
 *                          loaded machine's wall clock hides)
 *   proc_pingpong_free     proc_pingpong_cpu with each buffer released by
 *                          plain free(), as libxtc programs do
 *   proc_pingpong_xthread  the same between two loops on two threads
 *   proc_parked_bytes      resident memory per proc parked in xtc_recv, for
 *                          100k procs (cmd/xtcbench/xb_park.h: one loop
 *                          thread per 62 500; slab stacks, so default
 *                          sysctls hold them)
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
#include "xb_park.h" /* cmd/xtcbench: the park fixture */

#define RUNS 5

static xtc_loop_t *new_loop(void)
{
	xtc_loop_t *l = NULL;
	if (xtc_loop_init(&l) != XTC_OK) {
		fprintf(stderr, "bench_proc: xtc_loop_init failed\n");
		exit(1);
	}
	return l;
}

/* ---- spawn + run + exit ------------------------------------------------- */

struct spawn_ctx {
	xtc_loop_t *loop;
	long n, warm, done;
	double ns;
};

static void spawn_child(void *arg)
{
	((struct spawn_ctx *)arg)->done++;
}

static void spawn_driver(void *arg)
{
	struct spawn_ctx *c = arg;
	int64_t t0 = 0;

	for (long i = 0; i < c->warm + c->n; i++) {
		if (i == c->warm)
			t0 = xtc_clock_mono();
		if (xtc_proc_spawn(c->loop, spawn_child, c, NULL, NULL) != XTC_OK)
			abort();
		while (c->done <= i) /* FIFO: one yield runs the child */
			xtc_yield();
	}
	c->ns = (double)(xtc_clock_mono() - t0) / (double)c->n;
}

static double bench_spawn(long n)
{
	struct spawn_ctx c = { .n = n, .warm = 1000 };
	c.loop = new_loop();
	if (xtc_proc_spawn(c.loop, spawn_driver, &c, NULL, NULL) != XTC_OK ||
	    xtc_loop_run(c.loop) != XTC_OK)
		abort();
	xtc_loop_fini(c.loop);
	return c.ns;
}

/* ---- ping-pong ---------------------------------------------------------- */

struct pp_ctx {
	xtc_pid_t ping, pong;
	atomic_int ready;
	long n;
	double ns, cpu_ns;
	int use_free; /* release buffers with free(), not xtc_free */
};

static int64_t cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pp_release(struct pp_ctx *c, void *m)
{
	if (c->use_free)
		free(m);
	else
		xtc_free(m);
}

static void pp_pong(void *arg)
{
	struct pp_ctx *c = arg;
	for (;;) {
		void *m;
		size_t sz;
		int64_t v;
		if (xtc_recv(&m, &sz, -1) != XTC_OK)
			abort();
		memcpy(&v, m, sizeof v);
		pp_release(c, m);
		while (xtc_send(c->ping, &v, sizeof v) == XTC_E_AGAIN)
			xtc_yield();
		if (v < 0)
			return;
	}
}

static void pp_ping(void *arg)
{
	struct pp_ctx *c = arg;
	int64_t t0 = 0, c0 = 0, warm = 1000;

	c->ping = xtc_self();
	atomic_store(&c->ready, 1);
	while (xtc_pid_is_none(c->pong))
		xtc_proc_sleep(100000); /* cross-thread setup only */
	for (int64_t i = 0; i <= warm + c->n; i++) {
		int64_t v = i == warm + c->n ? -1 : i, r;
		void *m;
		if (i == warm) {
			t0 = xtc_clock_mono();
			c0 = cpu_now();
		}
		if (xtc_send(c->pong, &v, sizeof v) != XTC_OK ||
		    xtc_recv(&m, NULL, -1) != XTC_OK)
			abort();
		memcpy(&r, m, sizeof r);
		pp_release(c, m);
		if (r != v)
			abort();
	}
	c->ns = (double)(xtc_clock_mono() - t0) / (double)(c->n + 1);
	c->cpu_ns = (double)(cpu_now() - c0) / (double)(c->n + 1);
}

static double bench_pingpong(long n, int use_free, double *cpu_ns)
{
	struct pp_ctx c;
	xtc_loop_t *l = new_loop();

	memset(&c, 0, sizeof c);
	c.n = n;
	c.use_free = use_free;
	if (xtc_proc_spawn(l, pp_ping, &c, NULL, &c.ping) != XTC_OK ||
	    xtc_proc_spawn(l, pp_pong, &c, NULL, &c.pong) != XTC_OK ||
	    xtc_loop_run(l) != XTC_OK)
		abort();
	xtc_loop_fini(l);
	if (cpu_ns != NULL)
		*cpu_ns = c.cpu_ns;
	return c.ns;
}

static void *run_loop_thread(void *arg)
{
	xtc_loop_t *l = arg;
	if (xtc_loop_run(l) != XTC_OK)
		abort();
	return NULL;
}

static double bench_pingpong_xthread(long n)
{
	struct pp_ctx c;
	xtc_loop_t *a = new_loop(), *b = new_loop();
	pthread_t th;
	xtc_pid_t pong;

	memset(&c, 0, sizeof c);
	c.n = n;
	if (xtc_proc_spawn(a, pp_ping, &c, NULL, NULL) != XTC_OK ||
	    xtc_proc_spawn(b, pp_pong, &c, NULL, &pong) != XTC_OK)
		abort();
	c.pong = pong; /* written before either thread runs */
	if (pthread_create(&th, NULL, run_loop_thread, b) != 0)
		abort();
	run_loop_thread(a);
	pthread_join(th, NULL);
	xtc_loop_fini(a);
	xtc_loop_fini(b);
	return c.ns;
}

/* ---- parked procs ------------------------------------------------------- */

/* cmd/xtcbench/xb_park.h: procs parked in xtc_recv over standalone loops,
 * then woken (the fixture bench_park, xtcbench and the scale tests share) */
static double bench_parked(long total)
{
	xb_park_t r;

	if (xb_park_run(total, 0, NULL, &r) != 0 || r.spawn_rc != 0) {
		fprintf(stderr, "bench_proc: parking %ld procs failed (%s)\n",
		        total, r.spawn_rc ? xtc_strerror(r.spawn_rc) : "setup");
		return -1;
	}
	fprintf(stderr, "bench_proc: %ld parked procs, rss %+ld KiB, %ld VMAs\n",
	        r.parked, r.rss_bytes / 1024, r.vmas);
	return r.rss_each;
}

int main(int argc, char **argv)
{
	double v[RUNS];
	long parked_n = 100000;

	const char *only = argc > 2 ? argv[2] : "";
	long iters = argc > 3 ? atol(argv[3]) : 0;

	/* usage: bench_proc [parked_count [spawn|pingpong|xthread [iters]]]
	 * (iters: for instruction counts, e.g. callgrind at two sizes) */
	if (argc > 1)
		parked_n = atol(argv[1]);
	/* first: the parked figure wants a clean heap */
	if (parked_n > 0) {
		double pb = bench_parked(parked_n);
		if (pb > 0)
			printf("proc_parked_bytes %.0f B\n", pb);
	}
	if (!*only || !strcmp(only, "spawn")) {
		for (int i = 0; i < RUNS; i++)
			v[i] = bench_spawn(200000);
		printf("spawn_proc %.1f ns\n", bench_median(v, RUNS));
	}
	if (!*only || !strcmp(only, "pingpong")) {
		double cpu[RUNS], fr[RUNS];
		for (int i = 0; i < RUNS; i++) {
			v[i] = bench_pingpong(iters > 0 ? iters : 200000, 0,
			                      &cpu[i]);
			(void)bench_pingpong(iters > 0 ? iters : 200000, 1,
			                     &fr[i]);
		}
		printf("proc_pingpong %.1f ns\n", bench_median(v, RUNS));
		printf("proc_pingpong_cpu %.1f ns\n", bench_median(cpu, RUNS));
		printf("proc_pingpong_free %.1f ns\n", bench_median(fr, RUNS));
	}
	if (!*only || !strcmp(only, "xthread")) {
		for (int i = 0; i < RUNS; i++)
			v[i] = bench_pingpong_xthread(20000);
		printf("proc_pingpong_xthread %.1f ns\n", bench_median(v, RUNS));
	}
	return 0;
}
