/*
 * 13_opencl_batching - continuous batching of Mandelbrot tiles of very
 * different depths over a real OpenCL device, through the async batch path
 * with a FENCE: each iteration, submit enqueues ONE kernel over the ready
 * members' tiles (one work-group per tile) that advances every pixel by at
 * most a fixed chunk of iterations; an OpenCL CL_COMPLETE callback writes
 * an eventfd; the driver proc is parked on that fd (the loop thread never
 * calls clFinish or clWaitForEvents) and collect marks each tile DONE once
 * all its pixels finished, CONTINUE otherwise. Deep tiles therefore
 * continue across many steps while shallow ones leave after one or two and
 * free their slot for the next tile at the following boundary - the point
 * of continuous batching. The static baseline runs the same kernel but
 * keeps a cohort until its deepest tile finished (no refill).
 *
 * Files: main.c (this: tiles, batch group, check, benchmark), mandel.h
 * (the shared arithmetic and the C reference), backend.h, backend_opencl.c
 * (the real device), backend_fake.c (the FAKE device: a thread computes the
 * step and writes the eventfd; same batch path).
 *
 * Usage: example_13_opencl_batching [--backend=auto|opencl|fake]
 *          [--grid=G] [--chunk=N] [--max-active=N] [--bench[=REPS]]
 *          [--fail-step=N]
 * XTC_EX13_BACKEND=fake selects the FAKE device too. Without --bench it
 * renders G*G tiles (G=8) continuous and static once, checks every pixel's
 * iteration count against the plain C reference and prints the backend it
 * used; exit 0 when identical, 1 on a mismatch or failure, 77 when
 * --backend=opencl was asked for and no OpenCL platform exists. --bench
 * (G=16) interleaves REPS (5) runs of each mode in ABBA order, at 16 and
 * at 128 iterations per step unless --chunk is given, and prints medians
 * with spread, the ratio of each back-to-back pair, process CPU time, the
 * fence latency (device callback -> eventfd -> collect on the resumed
 * driver) p50/p99 and the load average. --fail-step=N (FAKE only, no
 * --bench) makes the device report a failure for step N of a continuous
 * run: its members must end XTC_E_IO exactly once and every other tile
 * stay exact.
 *
 * Why the step size matters: a step costs a fixed launch (three enqueues,
 * the runtime's thread hand-offs, the callback and the wake) plus the
 * members' pixels. Static batching runs about four times as many steps
 * with a quarter of the tiles each, so it loses where the fixed part
 * weighs (small steps, like one decode step per token) or where the
 * device has width left idle by one or two tiles (a GPU, an idle
 * multi-core CPU); with large steps on a CPU device that is already
 * oversubscribed, both modes do the same arithmetic on the same cores.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_loop.h"
#include "xtc_batch.h"

#include "backend.h"

#define DEEP_MAXIT 4096

struct tile {
	mb_arg_t arg;              /* slot = index, depth, position */
	int32_t st[MB_TILE_PIX];   /* last state rows read back */
	int launched;              /* steps it took part in */
	int finished;              /* every pixel finished */
	int outcome;               /* complete's outcome (1: not yet) */
	int completions;           /* complete calls (must end 1) */
};

struct run {
	mb_backend_t *be;
	int is_static;
	int chunk;
	struct tile *tiles;
	size_t ntiles;
	mb_arg_t *largs;           /* the step being launched */
	size_t *lmap;              /* largs[k] is items[lmap[k]] */
	size_t nl;
	int64_t *lat;              /* fence latencies (ns) */
	size_t nlat, latcap;
	size_t completed;
	uint64_t launched;         /* member-steps actually launched */
	size_t failed;             /* members of failed device steps */
	double cpu_secs;           /* process CPU time of the last run */
};

/* User + system time of every thread of the process (the device's too). */
static double
cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void
drain_fence(int fd)
{
	uint64_t v;

	while (read(fd, &v, sizeof v) == sizeof v)
		;
}

/* One device step over the ready members that still have work. */
static int
submit(const xtc_batch_item_t *items, size_t count, xtc_batch_exec_t *exec,
    void *user)
{
	struct run *r = user;

	r->nl = 0;
	for (size_t i = 0; i < count; i++) {
		struct tile *t = items[i].request;

		if (t->finished)
			continue; /* static mode: waits for its cohort */
		r->largs[r->nl] = t->arg;
		r->largs[r->nl].first = t->launched == 0;
		r->lmap[r->nl++] = i;
		t->launched++;
		r->launched++;
	}
	if (r->nl == 0)
		return XTC_OK; /* SYNC: nothing to launch (not reached) */
	if (r->be->launch(r->be, r->largs, r->nl, r->chunk) != 0)
		return XTC_E_IO; /* every member completes with it */
	exec->kind = XTC_BATCH_EXEC_FENCE;
	exec->fd = r->be->fence_fd;
	return XTC_OK;
}

/* The step's results are in host memory: DONE or CONTINUE per member. */
static int
collect(const xtc_batch_item_t *items, xtc_batch_result_t *results,
    size_t count, int status, void *user)
{
	struct run *r = user;
	const int32_t *rows;
	int64_t sig, now;
	int all = 1;

	(void)status; /* FENCE: 0 */
	if (r->nl > 0) {
		now = mb_now_ns();
		drain_fence(r->be->fence_fd);
		if (r->be->result(r->be, &rows, &sig) != 0) {
			/* The device failed the step: its members end ERROR
			 * (never resubmitted over buffers it may have left
			 * half written). */
			r->failed += count;
			for (size_t i = 0; i < count; i++) {
				results[i].state = XTC_BATCH_ERROR;
				results[i].error = XTC_E_IO;
			}
			return XTC_OK;
		}
		if (r->nlat < r->latcap)
			r->lat[r->nlat++] = now - sig;
		for (size_t k = 0; k < r->nl; k++) {
			struct tile *t = items[r->lmap[k]].request;
			const int32_t *row = rows + k * MB_TILE_PIX;
			int fin = 1;

			memcpy(t->st, row, sizeof t->st);
			for (int p = 0; p < MB_TILE_PIX && fin; p++)
				fin = row[p] < 0;
			t->finished = fin;
		}
	}
	for (size_t i = 0; i < count; i++)
		all &= ((struct tile *)items[i].request)->finished;
	for (size_t i = 0; i < count; i++) {
		struct tile *t = items[i].request;
		int done = r->is_static ? all : t->finished;

		results[i].state = done ? XTC_BATCH_DONE : XTC_BATCH_CONTINUE;
	}
	return XTC_OK;
}

static void
complete(uint64_t handle, void *request, int outcome, void *user)
{
	struct run *r = user;
	struct tile *t = request;

	(void)handle;
	t->outcome = outcome;
	t->completions++;
	r->completed++;
}

/* Render every tile once through a fresh loop and group. */
static int
run_once(struct run *r, size_t max_active, double *secs,
    xtc_batch_stats_t *st)
{
	xtc_batch_opts_t o;
	xtc_batch_async_opts_t ao;
	xtc_batch_t *g;
	xtc_loop_t *loop;
	int64_t t0, t1;
	uint64_t h;
	int rc;

	for (size_t i = 0; i < r->ntiles; i++) {
		r->tiles[i].launched = 0;
		r->tiles[i].finished = 0;
		r->tiles[i].outcome = 1;
		r->tiles[i].completions = 0;
	}
	r->completed = 0;
	r->launched = 0;
	r->failed = 0;
	drain_fence(r->be->fence_fd);
	o = (xtc_batch_opts_t){ .size = sizeof o,
	    .version = XTC_BATCH_VERSION,
	    .capacity = r->ntiles, .max_active = max_active,
	    .resource_capacity = max_active,
	    .complete = complete, .user = r, .name = "mandel" };
	ao = (xtc_batch_async_opts_t){ .size = sizeof ao,
	    .version = XTC_BATCH_ASYNC_VERSION,
	    .submit = submit, .collect = collect,
	    /* A hung device ends its members XTC_E_AGAIN, not the program. */
	    .exec_timeout_ns = 30LL * 1000 * 1000 * 1000 };
	if ((rc = xtc_loop_init(&loop)) != XTC_OK)
		return rc;
	rc = xtc_batch_create_async(loop, &o, &ao, &g);
	if (rc != XTC_OK) {
		(void)xtc_loop_fini(loop);
		return rc;
	}
	for (size_t i = 0; i < r->ntiles && rc == XTC_OK; i++)
		rc = xtc_batch_submit(g, &r->tiles[i], 1, &h);
	if (rc == XTC_OK)
		rc = xtc_batch_close(g, XTC_BATCH_DRAIN);
	r->cpu_secs = -cpu_now();
	t0 = mb_now_ns();
	if (rc == XTC_OK)
		rc = xtc_loop_run(loop);
	t1 = mb_now_ns();
	r->cpu_secs += cpu_now();
	if (rc == XTC_OK)
		rc = xtc_batch_get_stats(g, st);
	if (rc == XTC_OK)
		rc = xtc_batch_destroy(g);
	if (rc == XTC_OK)
		rc = xtc_loop_fini(loop);
	*secs = (double)(t1 - t0) / 1e9;
	if (rc == XTC_OK && r->completed != r->ntiles)
		rc = XTC_E_INTERNAL;
	return rc;
}

/* Pixels whose iteration count differs from the reference, plus a whole
 * tile for one that did not complete exactly once, or failed other than
 * by an injected device fault (those must number r->failed). */
static size_t
mismatches(const struct run *r, int32_t *const *ref)
{
	size_t bad = 0, failed = 0;

	for (size_t i = 0; i < r->ntiles; i++) {
		const struct tile *t = &r->tiles[i];

		if (t->completions != 1) {
			bad += MB_TILE_PIX;
			continue;
		}
		if (t->outcome == XTC_E_IO && r->failed > 0) {
			failed++;
			continue;
		}
		if (t->outcome != XTC_OK) {
			bad += MB_TILE_PIX;
			continue;
		}
		for (int p = 0; p < MB_TILE_PIX; p++)
			bad += t->st[p] >= 0 || ~t->st[p] != ref[i][p];
	}
	if (failed != r->failed)
		bad += MB_TILE_PIX;
	return bad;
}

/* A skewed mix: about one tile in eight is DEEP_MAXIT deep, the rest 32
 * to 256 iterations, over the view [-2.0, 0.6] x [-1.3, 1.3]. */
static void
make_tiles(struct tile *tiles, int grid)
{
	float dx = 2.6f / (float)(grid * MB_TILE_W);

	for (int i = 0; i < grid * grid; i++) {
		uint32_t h = (uint32_t)i * 2654435761u;
		mb_arg_t *a = &tiles[i].arg;

		memset(a, 0, sizeof *a);
		a->slot = i;
		a->maxit = (h >> 29) == 0 ? DEEP_MAXIT : 32 << ((h >> 24) & 3);
		a->x0 = -2.0f + (float)((i % grid) * MB_TILE_W) * dx;
		a->y0 = -1.3f + (float)((i / grid) * MB_TILE_W) * dx;
		a->dx = dx;
	}
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
loadavg(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");

	buf[0] = '\0';
	if (f != NULL) {
		if (fgets(buf, (int)len, f) != NULL)
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
}

/* Before any loop runs: one step on the calling thread's behalf, so that a
 * runtime that compiles on first launch (pocl builds the work-group
 * function then) does it here, not on the driver's small fiber stack. It
 * waits with poll on the fence fd, never inside the device API. */
static int
warm_up(mb_backend_t *be, const struct tile *tiles, size_t n, int chunk)
{
	mb_arg_t args[64];
	struct pollfd pfd = { .fd = be->fence_fd, .events = POLLIN };
	const int32_t *rows;
	int64_t sig;

	if (n > 64)
		n = 64;
	for (size_t k = 0; k < n; k++) {
		args[k] = tiles[k].arg;
		args[k].first = 1;
		args[k].maxit = 1;
	}
	if (be->launch(be, args, n, chunk) != 0 ||
	    poll(&pfd, 1, 60 * 1000) != 1)
		return -1;
	drain_fence(be->fence_fd);
	return be->result(be, &rows, &sig);
}

/* Interleaved reps (ABBA order) of both modes at r->chunk: medians with
 * spread, per-pair ratios, CPU time, fence latency. */
static int
bench(struct run *r, int32_t *const *ref, int reps, size_t max_active,
    size_t *bad)
{
	double *t[2], *ratio, *cpu[2];
	int rc = 0;
	int64_t *lat[2];
	size_t nlat[2] = { 0, 0 };
	uint64_t steps[2] = { 0, 0 }, members[2] = { 0, 0 };

	t[0] = calloc((size_t)reps, sizeof(double));
	t[1] = calloc((size_t)reps, sizeof(double));
	ratio = calloc((size_t)reps, sizeof(double));
	cpu[0] = calloc((size_t)reps, sizeof(double));
	cpu[1] = calloc((size_t)reps, sizeof(double));
	lat[0] = malloc(r->latcap * sizeof(int64_t));
	lat[1] = malloc(r->latcap * sizeof(int64_t));
	if (t[0] == NULL || t[1] == NULL || ratio == NULL ||
	    cpu[0] == NULL || cpu[1] == NULL ||
	    lat[0] == NULL || lat[1] == NULL)
		rc = XTC_E_NOMEM;
	for (int k = 0; k < reps && rc == 0; k++) {
		for (int j = 0; j < 2 && rc == 0; j++) {
			int mode = (k & 1) ? 1 - j : j;
			xtc_batch_stats_t st;

			r->is_static = mode;
			r->nlat = 0;
			rc = run_once(r, max_active, &t[mode][k], &st);
			if (rc != XTC_OK)
				fprintf(stderr, "run failed: %s\n",
				    xtc_strerror(rc));
			*bad += rc == 0 ? mismatches(r, ref) : 0;
			for (size_t i = 0; i < r->nlat &&
			    nlat[mode] < r->latcap; i++)
				lat[mode][nlat[mode]++] = r->lat[i];
			cpu[mode][k] = r->cpu_secs;
			steps[mode] += rc == 0 ? st.iterations : 0;
			members[mode] += r->launched;
		}
		/* The pair ran back to back: its ratio sees about the
		 * same machine load, unlike two medians. */
		if (rc == 0)
			ratio[k] = t[1][k] / t[0][k];
	}
	for (int mode = 0; mode < 2 && rc == 0; mode++) {
		qsort(t[mode], (size_t)reps, sizeof(double), cmp_dbl);
		qsort(cpu[mode], (size_t)reps, sizeof(double), cmp_dbl);
		qsort(lat[mode], nlat[mode], sizeof(int64_t), cmp_i64);
		printf("%-11s median %7.1f ms (min %.1f, max %.1f) over "
		    "%d reps, CPU %.1f ms, %llu steps/run, %.1f tiles "
		    "launched/step; fence latency p50 %.1f us, p99 %.1f us "
		    "(n=%zu)\n", mode ? "static:" : "continuous:",
		    t[mode][reps / 2] * 1e3, t[mode][0] * 1e3,
		    t[mode][reps - 1] * 1e3, reps,
		    cpu[mode][reps / 2] * 1e3,
		    (unsigned long long)(steps[mode] / (uint64_t)reps),
		    (double)members[mode] / (double)steps[mode],
		    (double)lat[mode][nlat[mode] / 2] / 1e3,
		    (double)lat[mode][nlat[mode] * 99 / 100] / 1e3,
		    nlat[mode]);
	}
	if (rc == 0) {
		qsort(ratio, (size_t)reps, sizeof(double), cmp_dbl);
		printf("continuous/static throughput: %.2fx (ratio of "
		    "medians); per back-to-back pair: median %.2fx "
		    "(min %.2f, max %.2f)\n",
		    t[1][reps / 2] / t[0][reps / 2], ratio[reps / 2],
		    ratio[0], ratio[reps - 1]);
		printf("continuous/static per CPU second: %.2fx "
		    "(medians; process CPU time, device threads "
		    "included)\n", cpu[1][reps / 2] / cpu[0][reps / 2]);
	}
	free(cpu[0]);
	free(cpu[1]);
	free(ratio);
	free(t[0]);
	free(t[1]);
	free(lat[0]);
	free(lat[1]);
	return rc;
}

int
main(int argc, char **argv)
{
	const char *want = getenv("XTC_EX13_BACKEND");
	int grid = 0, chunk = 128, chunk_set = 0, reps = 0, max_active = 8;
	long fail_step = 0;
	char why[256] = "", la0[128], la1[128];
	mb_backend_t *be = NULL;
	struct tile *tiles;
	int32_t **ref;
	struct run r;
	size_t ntiles, ndeep = 0, bad = 0;
	int64_t tb0, tb1;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--backend=", 10) == 0)
			want = argv[i] + 10;
		else if (strncmp(argv[i], "--grid=", 7) == 0)
			grid = atoi(argv[i] + 7);
		else if (strncmp(argv[i], "--chunk=", 8) == 0) {
			chunk = atoi(argv[i] + 8);
			chunk_set = 1;
		}
		else if (strncmp(argv[i], "--max-active=", 13) == 0)
			max_active = atoi(argv[i] + 13);
		else if (strncmp(argv[i], "--fail-step=", 12) == 0)
			fail_step = atol(argv[i] + 12);
		else if (strcmp(argv[i], "--bench") == 0)
			reps = 5;
		else if (strncmp(argv[i], "--bench=", 8) == 0)
			reps = atoi(argv[i] + 8);
		else {
			fprintf(stderr, "usage: %s [--backend=auto|opencl|fake]"
			    " [--grid=G] [--chunk=N] [--max-active=N]"
			    " [--bench[=REPS]] [--fail-step=N]\n", argv[0]);
			return 2;
		}
	}
	if (want == NULL || *want == '\0')
		want = "auto";
	if (grid == 0)
		grid = reps > 0 ? 16 : 8;
	if (grid < 1 || grid > 64 || chunk < 1 || max_active < 1 ||
	    max_active > 64 || reps < 0 || fail_step < 0 ||
	    (fail_step > 0 && (reps > 0 || strcmp(want, "fake") != 0)) ||
	    (strcmp(want, "auto") != 0 &&
	    strcmp(want, "opencl") != 0 && strcmp(want, "fake") != 0)) {
		fprintf(stderr, "bad arguments\n");
		return 2;
	}
	ntiles = (size_t)grid * (size_t)grid;
	if ((size_t)max_active > ntiles)
		max_active = (int)ntiles; /* capacity bounds max_active */

	tb0 = mb_now_ns();
	if (strcmp(want, "fake") != 0 &&
	    mb_opencl_open(ntiles, (size_t)max_active, &be, why,
	    sizeof why) != 0) {
		if (strcmp(want, "opencl") == 0) {
			printf("backend: none (%s); skipped\n", why);
			return 77;
		}
		printf("no OpenCL device (%s): using the FAKE backend\n", why);
	}
	if (be == NULL && (rc = mb_fake_open(ntiles, (size_t)max_active,
	    fail_step > 0 ? fail_step + 1 : 0, &be)) != 0) { /* + warm-up */
		fprintf(stderr, "fake backend: %s\n", strerror(-rc));
		return 1;
	}
	printf("backend: %s\n", be->name);

	tiles = calloc(ntiles, sizeof *tiles);
	ref = calloc(ntiles, sizeof *ref);
	memset(&r, 0, sizeof r);
	r.latcap = 1 << 20;
	r.lat = malloc(r.latcap * sizeof *r.lat);
	r.largs = calloc((size_t)max_active, sizeof *r.largs);
	r.lmap = calloc((size_t)max_active, sizeof *r.lmap);
	if (tiles == NULL || ref == NULL || r.lat == NULL ||
	    r.largs == NULL || r.lmap == NULL)
		return 1;
	make_tiles(tiles, grid);
	if (warm_up(be, tiles, (size_t)max_active, chunk) != 0) {
		fprintf(stderr, "warm-up step failed on %s\n", be->name);
		return 1;
	}
	tb1 = mb_now_ns();
	printf("setup (kernel build, first launch): %.0f ms\n",
	    (double)(tb1 - tb0) / 1e6);
	for (size_t i = 0; i < ntiles; i++) {
		ref[i] = malloc(MB_TILE_PIX * sizeof **ref);
		if (ref[i] == NULL)
			return 1;
		mb_reference(&tiles[i].arg, ref[i]);
		ndeep += tiles[i].arg.maxit == DEEP_MAXIT;
	}
	printf("%zu tiles of %dx%d, %zu of depth %d, the rest 32..256; "
	    "max_active %d\n", ntiles, MB_TILE_W, MB_TILE_W, ndeep,
	    DEEP_MAXIT, max_active);
	if (reps == 0)
		printf("-- %d iterations per step\n", chunk);

	r.be = be;
	r.chunk = chunk;
	r.tiles = tiles;
	r.ntiles = ntiles;

	loadavg(la0, sizeof la0);
	if (reps == 0) {
		/* The check: both modes, every pixel against the reference. */
		for (int mode = 0; mode < (fail_step ? 1 : 2) && rc == 0;
		    mode++) {
			xtc_batch_stats_t st;
			double secs;
			size_t b;

			r.is_static = mode;
			r.nlat = 0;
			rc = run_once(&r, (size_t)max_active, &secs, &st);
			if (rc == XTC_E_NOSYS) {
				/* -Dsched_policy=false: no batch engine. */
				puts("batching not built (-Dsched_policy=false)");
				be->destroy(be);
				return 0;
			}
			if (rc != XTC_OK) {
				fprintf(stderr, "run failed: %s\n",
				    xtc_strerror(rc));
				break;
			}
			b = mismatches(&r, ref);
			bad += b;
			qsort(r.lat, r.nlat, sizeof *r.lat, cmp_i64);
			printf("%-11s %7.1f ms, %llu steps, %.1f tiles "
			    "launched/step, fence latency p50 %.0f us, p99 "
			    "%.0f us; %s\n", mode ? "static:" : "continuous:",
			    secs * 1e3, (unsigned long long)st.iterations,
			    (double)r.launched / (double)st.iterations,
			    (double)r.lat[r.nlat / 2] / 1e3,
			    (double)r.lat[r.nlat * 99 / 100] / 1e3,
			    b == 0 ? "bit-identical to the C reference" :
			    "MISMATCH");
			if (fail_step > 0) {
				printf("device failure injected at step %ld: "
				    "%zu tiles ended XTC_E_IO, each completed "
				    "once; the other %zu %s\n", fail_step,
				    r.failed, ntiles - r.failed, b == 0 ?
				    "bit-identical" : "NOT as expected");
				if (r.failed == 0)
					bad++; /* the fault must have hit */
			}
		}
	} else {
		/* --chunk given: that step size; else a launch-bound (16)
		 * and a compute-bound (128) step. */
		int chunks[2] = { chunk_set ? chunk : 16, 128 };

		for (int c = 0; c < (chunk_set ? 1 : 2) && rc == 0; c++) {
			r.chunk = chunks[c];
			printf("-- %d iterations per step\n", r.chunk);
			rc = bench(&r, ref, reps, (size_t)max_active, &bad);
		}
	}
	loadavg(la1, sizeof la1);
	printf("loadavg before: %s, after: %s\n", la0, la1);
	printf("clFinish/clWaitForEvents calls: %ld\n",
	    be->blocking_calls(be));
	if (rc == 0 && bad == 0 && be->blocking_calls(be) == 0)
		printf("result: all %zu tiles %s on %s\n", ntiles,
		    fail_step ? "as expected (failed once, or bit-identical)" :
		    "bit-identical to the C reference", be->name);
	else
		rc = 1;

	be->destroy(be);
	for (size_t i = 0; i < ntiles; i++)
		free(ref[i]);
	free(ref);
	free(tiles);
	free(r.lat);
	free(r.largs);
	free(r.lmap);
	return rc == 0 ? 0 : 1;
}
