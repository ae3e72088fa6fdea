/*
 * park_fixture.h - n procs parked in a receive over as many loops as they
 * need (a loop holds at most 65535 procs), one thread per loop, then woken
 * by one message each from the calling thread; shared by test_stack_scale
 * (unit sizes) and test_park_stress (10^6).
 *
 * park_run(n, stack_size, &r): every loop's driver proc spawns its share
 * (yielding every 1024 spawns, so they park as they go) and reports; when
 * all have reported, the VMA count of the process is read (r.vmas) and the
 * resident set (r.rss_each, bytes per parked proc, for the log only); then
 * each pid gets one byte and the call waits until every proc took it and
 * returned. r.parked counts the procs that parked, r.exited those that
 * ran to their end, r.spawn_rc the first spawn error (0 if none). No time
 * is measured or asserted: the waits are for events.
 */
#ifndef PARK_FIXTURE_H
#define PARK_FIXTURE_H

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xtc.h"

#define PARK_PER_LOOP 62500

struct park_shard {
	pthread_t thr;
	xtc_loop_t *loop;
	xtc_pid_t *pids;
	long n, spawned;
	int spawn_rc;
	xtc_proc_opts_t opts;
	atomic_long exited;
	atomic_int parked;
};

struct park_result {
	long parked, exited, vmas;
	double rss_each;
	int spawn_rc;
};

static long park_statm_resident(void)
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

static long park_count_vmas(void)
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

static void park_proc(void *arg)
{
	struct park_shard *s = arg;
	void *m = NULL;
	size_t sz = 0;

	if (xtc_recv(&m, &sz, -1) == 0)
		xtc_free(m);
	atomic_fetch_add_explicit(&s->exited, 1, memory_order_relaxed);
}

static void park_driver(void *arg)
{
	struct park_shard *s = arg;

	for (long i = 0; i < s->n; i++) {
		int rc = xtc_proc_spawn(s->loop, park_proc, s, &s->opts,
		                        &s->pids[i]);
		if (rc != 0) {
			s->spawn_rc = rc;
			break;
		}
		s->spawned++;
		if ((i & 1023) == 1023)
			xtc_yield();
	}
	xtc_yield();
	atomic_store_explicit(&s->parked, 1, memory_order_release);
}

static void *park_shard_main(void *arg)
{
	struct park_shard *s = arg;

	if (xtc_proc_spawn(s->loop, park_driver, s, NULL, NULL) != 0) {
		s->spawn_rc = -1;
		atomic_store(&s->parked, 1);
		return NULL;
	}
	(void)xtc_loop_run(s->loop);
	return NULL;
}

/* 0, or -1 when the fixture itself could not be set up. */
static int park_run(long n, size_t stack_size, struct park_result *r)
{
	long nshards = (n + PARK_PER_LOOP - 1) / PARK_PER_LOOP;
	struct park_shard *sh = calloc((size_t)nshards, sizeof *sh);
	xtc_pid_t *pids = calloc((size_t)n, sizeof *pids);
	long rss0, rss1;

	memset(r, 0, sizeof *r);
	if (sh == NULL || pids == NULL)
		return -1;
	memset(pids, 0, (size_t)n * sizeof *pids);
	for (long i = 0; i < nshards; i++) {
		sh[i].pids = pids + i * PARK_PER_LOOP;
		sh[i].n = i + 1 < nshards ? PARK_PER_LOOP : n - i * PARK_PER_LOOP;
		sh[i].opts.stack_size = stack_size;
		if (xtc_loop_init(&sh[i].loop) != 0)
			return -1;
	}
	rss0 = park_statm_resident();
	for (long i = 0; i < nshards; i++)
		if (pthread_create(&sh[i].thr, NULL, park_shard_main, &sh[i]) != 0)
			return -1;
	for (long i = 0; i < nshards; i++)
		while (!atomic_load_explicit(&sh[i].parked, memory_order_acquire))
			usleep(1000);
	rss1 = park_statm_resident();
	r->vmas = park_count_vmas();
	for (long i = 0; i < nshards; i++) {
		r->parked += sh[i].spawned;
		if (sh[i].spawn_rc != 0 && r->spawn_rc == 0)
			r->spawn_rc = sh[i].spawn_rc;
	}
	r->rss_each = r->parked > 0 ? (double)(rss1 - rss0) / (double)r->parked : 0;
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
		usleep(1000);
	}
	for (long i = 0; i < nshards; i++) {
		pthread_join(sh[i].thr, NULL);
		xtc_loop_fini(sh[i].loop);
	}
	free(pids);
	free(sh);
	return 0;
}

#endif
