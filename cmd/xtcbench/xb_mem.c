/*
 * xb_mem.c - the xtc half of the memory section: n procs parked in a
 * receive, the resident bytes each, the time to spawn and park them and
 * the time to wake them and let them exit (bench/bench_park is the same
 * shape as a C benchmark). Run in a child process of its own (mem.go), so
 * that what one side leaves resident does not count against the other.
 *
 * Procs are spread over ceil(n / XB_MEM_PER_LOOP) loops, one thread each:
 * a loop holds at most 65535 live procs (the pid's local id is 16 bits).
 * On each loop a driver proc spawns its share, yielding every 1024 spawns
 * so they park as they go. When every share is parked the resident set
 * (/proc/self/statm) is read; then this thread sends each pid one byte
 * and waits until every proc has taken it and returned.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xb.h"
#include "xb_api.h"

#define XB_MEM_PER_LOOP 62500

struct mem_shard {
	pthread_t thr;
	xtc_loop_t *loop;
	xtc_pid_t *pids;
	int64_t n, spawned;
	int fail_rc;
	xtc_proc_opts_t opts;
	atomic_long exited;
	atomic_int parked;
};

int64_t xb_rss_bytes(void)
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
	return (int64_t)res * sysconf(_SC_PAGESIZE);
}

static void mem_parked(void *arg)
{
	struct mem_shard *s = arg;
	void *m = NULL;
	size_t sz = 0;

	if (xtc_recv(&m, &sz, -1) == 0)
		xtc_free(m);
	atomic_fetch_add_explicit(&s->exited, 1, memory_order_relaxed);
}

static void mem_driver(void *arg)
{
	struct mem_shard *s = arg;

	for (int64_t i = 0; i < s->n; i++) {
		int rc = xtc_proc_spawn(s->loop, mem_parked, s, &s->opts,
		                        &s->pids[i]);
		if (rc != 0) {
			s->fail_rc = rc;
			break;
		}
		s->spawned++;
		if ((i & 1023) == 1023)
			xtc_yield();
	}
	xtc_yield();
	atomic_store_explicit(&s->parked, 1, memory_order_release);
}

static void *mem_shard_main(void *arg)
{
	struct mem_shard *s = arg;

	if (xtc_proc_spawn(s->loop, mem_driver, s, NULL, NULL) != 0) {
		atomic_store(&s->parked, 1);
		return NULL;
	}
	(void)xtc_loop_run(s->loop);
	return NULL;
}

int xb_mem_park(int64_t n, int64_t stack_size, xb_mem_t *out, char *why)
{
	int64_t nshards = (n + XB_MEM_PER_LOOP - 1) / XB_MEM_PER_LOOP;
	struct mem_shard *sh;
	xtc_pid_t *pids;
	int64_t rss0, rss1, parked = 0, exited, t0, t1, t2, t3;
	int rc = XB_OK;

	memset(out, 0, sizeof *out);
	if (n < 1 || nshards < 1)
		return XB_FAIL;
	sh = calloc((size_t)nshards, sizeof *sh);
	pids = calloc((size_t)n, sizeof *pids);
	if (sh == NULL || pids == NULL) {
		snprintf(why, XB_WHY, "calloc failed");
		free(sh);
		free(pids);
		return XB_FAIL;
	}
	memset(pids, 0, (size_t)n * sizeof *pids); /* resident before t0 */
	for (int64_t i = 0; i < nshards; i++) {
		sh[i].pids = pids + i * XB_MEM_PER_LOOP;
		sh[i].n = i + 1 < nshards ? XB_MEM_PER_LOOP : n - i * XB_MEM_PER_LOOP;
		sh[i].opts.stack_size = (size_t)stack_size;
		int lrc = xtc_loop_init(&sh[i].loop);
		if (lrc != 0) {
			snprintf(why, XB_WHY, "xtc_loop_init: %s", xb_strerror(lrc));
			return XB_FAIL; /* a child process: exits next */
		}
	}
	rss0 = xb_rss_bytes();
	t0 = xb_now();
	for (int64_t i = 0; i < nshards; i++)
		pthread_create(&sh[i].thr, NULL, mem_shard_main, &sh[i]);
	for (int64_t i = 0; i < nshards; i++)
		while (!atomic_load_explicit(&sh[i].parked, memory_order_acquire))
			usleep(500);
	t1 = xb_now();
	rss1 = xb_rss_bytes();
	for (int64_t i = 0; i < nshards; i++) {
		parked += sh[i].spawned;
		if (sh[i].fail_rc != 0 && rc == XB_OK) {
			const char *lim = xtc_stack_nomem_reason();
			snprintf(why, XB_WHY, "spawn %lld: %s%s%s",
			         (long long)(i * XB_MEM_PER_LOOP + sh[i].spawned),
			         xb_strerror(sh[i].fail_rc), lim ? ": " : "",
			         lim ? lim : "");
			rc = XB_FAIL;
		}
	}
	t2 = xb_now();
	for (int64_t i = 0; i < nshards; i++) {
		char b = 1;
		for (int64_t j = 0; j < sh[i].spawned; j++)
			(void)xtc_send(sh[i].pids[j], &b, 1);
	}
	do {
		exited = 0;
		for (int64_t i = 0; i < nshards; i++)
			exited += atomic_load_explicit(&sh[i].exited,
			                               memory_order_relaxed);
		if (exited < parked)
			usleep(200);
	} while (exited < parked);
	t3 = xb_now();
	for (int64_t i = 0; i < nshards; i++) {
		pthread_join(sh[i].thr, NULL);
		xtc_loop_fini(sh[i].loop);
	}
	out->parked = parked;
	out->rss_bytes = rss1 - rss0;
	out->spawn_ns = t1 - t0;
	out->wake_ns = t3 - t2;
	out->stack_bytes = stack_size > 0 ? stack_size : (int64_t)xtc_stack_size();
	free(pids);
	free(sh);
	return rc;
}
