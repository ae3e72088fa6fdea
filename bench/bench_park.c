/*
 * bench_park.c - how many procs one process holds parked in a receive, the
 * resident memory each costs, and the time to spawn, park, wake and exit
 * them (the scale issue's figures; cmd/xtcbench's memory section runs the
 * same shape next to parked goroutines).
 *
 *   bench_park [N [STACK_BYTES]]     N procs (default 100000), each with
 *                                    a stack of STACK_BYTES (default
 *                                    xtc_stack_size(); 1 KiB..16 KiB is a
 *                                    small stack, xtc_proc_opts_t)
 *
 * Procs are spread over ceil(N / PER_LOOP) standalone loops, one thread
 * each (a loop holds at most 65535 live procs: the pid's local id is 16
 * bits). On each loop a driver proc spawns its share, each blocked in
 * xtc_recv(-1), yielding every 1024 spawns so they park as they go. When
 * every loop reports its share parked, the main thread reads
 * /proc/self/statm (resident pages) and /proc/self/maps (VMAs), then
 * sends each pid one byte from this thread; each proc takes it, frees it
 * and returns. Prints `name value unit` lines:
 *   park_procs        procs that parked (less than N when a spawn failed)
 *   park_spawn_fail   the spawn error (0 = none) and at which proc
 *   park_rss          resident bytes per parked proc (RSS growth / procs)
 *   park_vmas         VMAs of the process while they are parked
 *   park_spawn        ns per proc from the first spawn to all parked
 *   park_wake         ns per proc from the first send to all exited
 * Memory-hungry: 10^6 procs need ~5 GB with 64 KiB stacks; keep runs
 * short on a shared machine.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xtc.h"
#include "fiber_int.h" /* the parked stack depth (internal) */

#define PER_LOOP 62500

/* the first proc of each shard records its fiber: its saved stack
 * pointer, read once all are parked, gives the stack bytes a parked proc
 * uses (what a copying design would have to keep) */
struct shard;
static xtc__fiber_t *probe_fiber;

struct shard {
	pthread_t thr;
	xtc_loop_t *loop;
	xtc_pid_t *pids;
	long n;          /* procs to spawn */
	long spawned;    /* procs spawned (driver) */
	int fail_rc;     /* first spawn error */
	atomic_long exited;
	atomic_int parked; /* 1 once the driver finished spawning */
};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static long read_statm_resident(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	long size = 0, res = 0;
	ssize_t r;

	if (fd < 0)
		return -1;
	r = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	if (sscanf(buf, "%ld %ld", &size, &res) != 2)
		return -1;
	return res * sysconf(_SC_PAGESIZE);
}

static long count_vmas(void)
{
	char buf[65536];
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	long lines = 0;
	ssize_t r;

	if (fd < 0)
		return -1;
	while ((r = read(fd, buf, sizeof buf)) > 0)
		for (ssize_t i = 0; i < r; i++)
			lines += buf[i] == '\n';
	close(fd);
	return lines;
}

static xtc_proc_opts_t popts; /* stack_size from the command line */

static void parked_proc(void *arg)
{
	struct shard *s = arg;
	void *m = NULL;
	size_t sz = 0;

	if (probe_fiber == NULL)
		probe_fiber = xtc__fiber_current();
	if (xtc_recv(&m, &sz, -1) == 0)
		xtc_free(m);
	atomic_fetch_add_explicit(&s->exited, 1, memory_order_relaxed);
}

static void driver(void *arg)
{
	struct shard *s = arg;

	for (long i = 0; i < s->n; i++) {
		int rc = xtc_proc_spawn(s->loop, parked_proc, s, &popts,
		                        &s->pids[i]);
		if (rc != 0) {
			s->fail_rc = rc;
			break;
		}
		s->spawned++;
		if ((i & 1023) == 1023)
			xtc_yield();
	}
	xtc_yield(); /* the last ones park */
	atomic_store_explicit(&s->parked, 1, memory_order_release);
}

static void *shard_main(void *arg)
{
	struct shard *s = arg;

	if (xtc_proc_spawn(s->loop, driver, s, NULL, NULL) != 0) {
		atomic_store(&s->parked, 1);
		return NULL;
	}
	(void)xtc_loop_run(s->loop);
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	long stack = argc > 2 ? atol(argv[2]) : 0;
	long nshards = (n + PER_LOOP - 1) / PER_LOOP;
	struct shard *sh;
	xtc_pid_t *pids;
	long rss0, rss1, vmas, parked = 0, exited;
	double t0, t1, t2;
	int fail_rc = 0;
	long fail_at = -1;

	if (n < 1)
		n = 1;
	if (nshards < 1)
		nshards = 1;
	popts.stack_size = stack > 0 ? (size_t)stack : 0;
	sh = calloc((size_t)nshards, sizeof *sh);
	pids = calloc((size_t)n, sizeof *pids);
	if (sh == NULL || pids == NULL)
		return 1;
	memset(pids, 0, (size_t)n * sizeof *pids); /* touched: not counted */
	for (long i = 0; i < nshards; i++) {
		sh[i].pids = pids + i * PER_LOOP;
		sh[i].n = i + 1 < nshards ? PER_LOOP : n - i * PER_LOOP;
		if (xtc_loop_init(&sh[i].loop) != 0)
			return 1;
	}
	rss0 = read_statm_resident();
	t0 = now_ns();
	for (long i = 0; i < nshards; i++)
		pthread_create(&sh[i].thr, NULL, shard_main, &sh[i]);
	for (long i = 0; i < nshards; i++)
		while (!atomic_load_explicit(&sh[i].parked,
		                             memory_order_acquire))
			usleep(1000);
	t1 = now_ns();
	rss1 = read_statm_resident();
	vmas = count_vmas();
	for (long i = 0; i < nshards; i++) {
		parked += sh[i].spawned;
		if (sh[i].fail_rc != 0 && fail_rc == 0) {
			fail_rc = sh[i].fail_rc;
			fail_at = i * PER_LOOP + sh[i].spawned;
		}
	}
	long used = probe_fiber != NULL ?
	            (long)((char *)probe_fiber->stack.hi - (char *)probe_fiber->sp) : -1;
	t2 = now_ns();
	for (long i = 0; i < nshards; i++) {
		char b = 1;
		for (long j = 0; j < sh[i].spawned; j++)
			(void)xtc_send(sh[i].pids[j], &b, 1);
	}
	do {
		exited = 0;
		for (long i = 0; i < nshards; i++)
			exited += atomic_load_explicit(&sh[i].exited,
			                               memory_order_relaxed);
		if (exited < parked)
			usleep(200);
	} while (exited < parked);
	double t3 = now_ns();
	for (long i = 0; i < nshards; i++) {
		pthread_join(sh[i].thr, NULL);
		xtc_loop_fini(sh[i].loop);
	}
	printf("park_procs %ld procs\n", parked);
	printf("park_spawn_fail %d rc_at_%ld\n", fail_rc, fail_at);
	if (fail_rc != 0)
		fprintf(stderr, "bench_park: spawn %ld failed: %s\n", fail_at,
		        xtc_strerror(fail_rc));
	printf("park_rss %.0f B\n",
	       parked > 0 ? (double)(rss1 - rss0) / (double)parked : 0.0);
	printf("park_vmas %ld vmas\n", vmas);
	printf("park_spawn %.1f ns\n",
	       parked > 0 ? (t1 - t0) / (double)parked : 0.0);
	printf("park_wake %.1f ns\n",
	       parked > 0 ? (t3 - t2) / (double)parked : 0.0);
	printf("park_stack %zu B\n", stack > 0 ? (size_t)stack : xtc_stack_size());
	printf("park_stack_used %ld B\n", used);
	free(pids);
	free(sh);
	return fail_rc != 0;
}
