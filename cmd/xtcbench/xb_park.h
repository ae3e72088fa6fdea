/*
 * xb_park.h - n procs parked in a receive, then woken: the one
 * implementation behind xtcbench's memory section (xb_mem.c),
 * bench/bench_park and the tests test_stack_scale and test_park_stress
 * (meson adds this folder to their include path). Header-only, public API
 * and libc only, so each of them compiles it with its own flags and Go's
 * build cache sees it in the package that includes it.
 *
 * Model: the procs are spread over ceil(n / per_loop) standalone loops
 * (XB_PARK_PER_LOOP by default), one thread each (a loop holds at most 65535 live procs: the pid's
 * local id is 16 bits). On each loop a driver proc spawns its share, each
 * blocked in xtc_recv(-1), yielding every 1024 spawns so they park as they
 * go. When every loop reports its share parked, the resident set
 * (/proc/self/statm) and the VMA count (/proc/self/maps) are read; then the
 * calling thread sends each pid one byte and waits until every proc took it
 * and returned. The waits are for events (a flag per loop, a counter);
 * times are recorded for benchmarks, never asserted.
 */
#ifndef XB_PARK_H
#define XB_PARK_H

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xtc.h"

#define XB_PARK_PER_LOOP 62500

typedef struct xb_park {
	long parked;      /* procs that parked (fewer than n when a spawn failed) */
	long exited;      /* procs that took their byte and returned */
	long vmas;        /* VMAs of the process while they were parked */
	int spawn_rc;     /* the first spawn error, 0 if none */
	long fail_at;     /* the index of that spawn, -1 if none */
	long rss_bytes;   /* resident growth from before the spawns to all parked */
	double rss_each;  /* rss_bytes / parked */
	int64_t spawn_ns; /* first spawn to all parked */
	int64_t wake_ns;  /* first send to all exited */
} xb_park_t;

/* Called twice: with 0 on the first proc's own stack just before it
 * parks, with 1 on the calling thread once every proc is parked
 * (bench_park reads the depth of a parked stack that way); NULL for none. */
typedef void (*xb_park_probe_fn)(int all_parked);

struct xb_park_shard {
	pthread_t thr;
	xtc_loop_t *loop;
	xtc_pid_t *pids;
	long n, spawned;
	int spawn_rc;
	xtc_proc_opts_t opts;
	xb_park_probe_fn probe;
	atomic_int *probed;
	atomic_long exited;
	atomic_int parked;
};

static inline int64_t xb_park_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Resident bytes of this process, -1 if unknown. */
static inline long xb_park_rss(void)
{
	char buf[128];
	long size = 0, res = 0;
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
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

static inline long xb_park_vmas(void)
{
	char buf[65536];
	long lines = 0;
	ssize_t r;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while ((r = read(fd, buf, sizeof buf)) > 0)
		for (ssize_t i = 0; i < r; i++)
			lines += buf[i] == '\n';
	close(fd);
	return lines;
}

static void xb_park_proc(void *arg)
{
	struct xb_park_shard *s = arg;
	void *m = NULL;
	size_t sz = 0;

	if (s->probe != NULL && atomic_exchange(s->probed, 1) == 0)
		s->probe(0);
	if (xtc_recv(&m, &sz, -1) == 0)
		xtc_free(m);
	atomic_fetch_add_explicit(&s->exited, 1, memory_order_relaxed);
}

static void xb_park_driver(void *arg)
{
	struct xb_park_shard *s = arg;

	for (long i = 0; i < s->n; i++) {
		int rc = xtc_proc_spawn(s->loop, xb_park_proc, s, &s->opts,
		                        &s->pids[i]);
		if (rc != 0) {
			s->spawn_rc = rc;
			break;
		}
		s->spawned++;
		if ((i & 1023) == 1023)
			xtc_yield();
	}
	xtc_yield(); /* the last ones park */
	atomic_store_explicit(&s->parked, 1, memory_order_release);
}

static void *xb_park_shard_main(void *arg)
{
	struct xb_park_shard *s = arg;
	int rc = xtc_proc_spawn(s->loop, xb_park_driver, s, NULL, NULL);

	if (rc != 0) {
		s->spawn_rc = rc;
		atomic_store(&s->parked, 1);
		return NULL;
	}
	(void)xtc_loop_run(s->loop);
	return NULL;
}

/* n procs (>= 1) with stacks of stack_size bytes (0: xtc_stack_size()),
 * per_loop of them (1..XB_PARK_PER_LOOP) on each loop. 0, or -1 when the
 * fixture itself could not be set up (memory, a loop, a thread); a failed
 * proc spawn is a result (r->spawn_rc), not a failure. */
static inline int xb_park_run_per(long n, long per_loop, size_t stack_size,
                                  xb_park_probe_fn probe, xb_park_t *r)
{
	long nshards;
	struct xb_park_shard *sh;
	xtc_pid_t *pids;
	atomic_int probed = 0;
	long rss0, rss1;
	int64_t t0, t1, t2;

	memset(r, 0, sizeof *r);
	r->fail_at = -1;
	if (n < 1 || per_loop < 1 || per_loop > XB_PARK_PER_LOOP)
		return -1;
	nshards = (n + per_loop - 1) / per_loop;
	sh = calloc((size_t)nshards, sizeof *sh);
	pids = calloc((size_t)n, sizeof *pids);
	if (sh == NULL || pids == NULL) {
		free(sh);
		free(pids);
		return -1;
	}
	memset(pids, 0, (size_t)n * sizeof *pids); /* resident before rss0 */
	for (long i = 0; i < nshards; i++) {
		sh[i].pids = pids + i * per_loop;
		sh[i].n = i + 1 < nshards ? per_loop : n - i * per_loop;
		sh[i].opts.stack_size = stack_size;
		sh[i].probe = probe;
		sh[i].probed = &probed;
		if (xtc_loop_init(&sh[i].loop) != 0)
			return -1; /* a benchmark or test: it exits next */
	}
	rss0 = xb_park_rss();
	t0 = xb_park_now();
	for (long i = 0; i < nshards; i++)
		if (pthread_create(&sh[i].thr, NULL, xb_park_shard_main,
		                   &sh[i]) != 0)
			return -1;
	for (long i = 0; i < nshards; i++)
		while (!atomic_load_explicit(&sh[i].parked, memory_order_acquire))
			usleep(500);
	t1 = xb_park_now();
	rss1 = xb_park_rss();
	r->vmas = xb_park_vmas();
	if (probe != NULL)
		probe(1);
	for (long i = 0; i < nshards; i++) {
		r->parked += sh[i].spawned;
		if (sh[i].spawn_rc != 0 && r->spawn_rc == 0) {
			r->spawn_rc = sh[i].spawn_rc;
			r->fail_at = i * per_loop + sh[i].spawned;
		}
	}
	r->rss_bytes = rss1 - rss0;
	r->rss_each = r->parked > 0 ? (double)r->rss_bytes / (double)r->parked : 0;
	r->spawn_ns = t1 - t0;
	t2 = xb_park_now();
	for (long i = 0; i < nshards; i++) {
		char b = 1;
		for (long j = 0; j < sh[i].spawned; j++)
			(void)xtc_send(sh[i].pids[j], &b, 1);
	}
	for (;;) {
		long ex = 0;
		for (long i = 0; i < nshards; i++)
			ex += atomic_load_explicit(&sh[i].exited, memory_order_relaxed);
		r->exited = ex;
		if (ex >= r->parked)
			break;
		usleep(200);
	}
	r->wake_ns = xb_park_now() - t2;
	for (long i = 0; i < nshards; i++) {
		pthread_join(sh[i].thr, NULL);
		xtc_loop_fini(sh[i].loop);
	}
	free(pids);
	free(sh);
	return 0;
}

/* The same, as many procs to a loop as a loop holds (the fewest loops). */
static inline int xb_park_run(long n, size_t stack_size, xb_park_probe_fn probe,
                              xb_park_t *r)
{
	return xb_park_run_per(n, XB_PARK_PER_LOOP, stack_size, probe, r);
}

#endif
