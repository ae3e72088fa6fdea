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
 *                          100k procs (50k on each of two loop threads)
 *
 * 100k guarded stacks need ~200k VMAs; vm.max_map_count defaults to 65530.
 * As root the bench raises it for the run (and restores it), otherwise it
 * scales the parked count down to fit; both are reported on stderr.
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

static long rss_bytes(void)
{
	long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &res) != 2)
		res = -1;
	fclose(f);
	return res < 0 ? -1 : res * sysconf(_SC_PAGESIZE);
}

static long read_long(const char *path)
{
	long v = -1;
	FILE *f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int write_long(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	int ok;
	if (!f)
		return 0;
	ok = fprintf(f, "%ld\n", v) > 0;
	return fclose(f) == 0 && ok;
}

static atomic_long parked;

static void parked_body(void *arg)
{
	void *m;
	(void)arg;
	atomic_fetch_add(&parked, 1);
	if (xtc_recv(&m, NULL, -1) == XTC_OK) /* until killed */
		xtc_free(m);
}

struct park_loop {
	xtc_loop_t *loop;
	xtc_pid_t *pids;
	long n;
	atomic_int spawned;
};

static void park_spawner(void *arg)
{
	struct park_loop *pl = arg;
	for (long i = 0; i < pl->n; i++)
		if (xtc_proc_spawn(pl->loop, parked_body, NULL, NULL,
		                   &pl->pids[i]) != XTC_OK) {
			fprintf(stderr, "bench_proc: spawn %ld failed\n", i);
			abort();
		}
	atomic_store(&pl->spawned, 1);
}

static double bench_parked(long total)
{
	const char *mmc = "/proc/sys/vm/max_map_count";
	long old = read_long(mmc), need = total * 2 + 20000;
	struct park_loop pl[2];
	pthread_t th[2];
	long rss0, rss1;
	int raised = 0;

	if (old > 0 && old < need) {
		if (geteuid() == 0 && write_long(mmc, need)) {
			raised = 1;
			fprintf(stderr, "bench_proc: raised vm.max_map_count "
			        "%ld -> %ld for the parked-proc run\n", old, need);
		} else {
			long fit = (old - 20000) / 2;
			fprintf(stderr, "bench_proc: vm.max_map_count=%ld fits "
			        "%ld stacks, not %ld: parking %ld procs\n", old,
			        fit, total, fit);
			total = fit;
		}
	}
	if (total < 1000)
		return -1;
	for (int i = 0; i < 2; i++) {
		pl[i].n = total / 2;
		pl[i].pids = calloc((size_t)pl[i].n, sizeof(xtc_pid_t));
		pl[i].loop = new_loop();
		atomic_store(&pl[i].spawned, 0);
		if (!pl[i].pids)
			abort();
	}
	atomic_store(&parked, 0);
	rss0 = rss_bytes();
	for (int i = 0; i < 2; i++) {
		if (xtc_proc_spawn(pl[i].loop, park_spawner, &pl[i], NULL,
		                   NULL) != XTC_OK ||
		    pthread_create(&th[i], NULL, run_loop_thread, pl[i].loop))
			abort();
	}
	while (atomic_load(&parked) < pl[0].n + pl[1].n ||
	       !atomic_load(&pl[0].spawned) || !atomic_load(&pl[1].spawned))
		usleep(1000);
	usleep(20000); /* the last ones reach their park */
	rss1 = rss_bytes();
	/* cross-thread kills end them; the loops return when empty */
	for (int i = 0; i < 2; i++)
		for (long j = 0; j < pl[i].n; j++)
			if (xtc_exit_pid(pl[i].pids[j], 0) != XTC_OK)
				abort();
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		xtc_loop_fini(pl[i].loop);
		free(pl[i].pids);
	}
	if (raised)
		write_long(mmc, old);
	fprintf(stderr, "bench_proc: %ld parked procs, rss %+ld KiB\n",
	        pl[0].n + pl[1].n, (rss1 - rss0) / 1024);
	return (double)(rss1 - rss0) / (double)(pl[0].n + pl[1].n);
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
