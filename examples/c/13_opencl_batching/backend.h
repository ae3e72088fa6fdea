/*
 * backend.h - the device under the example's batch group: one
 * asynchronous "step" per batch iteration over the members' tiles, and an
 * eventfd (fence_fd) that the device side writes when the step's results
 * are in host memory. Two implementations with the same contract:
 * backend_opencl.c (a real OpenCL platform: an event callback writes the
 * eventfd) and backend_fake.c (a thread computes the step on the CPU and
 * writes the eventfd). The batch engine parks its driver on fence_fd
 * (XTC_BATCH_EXEC_FENCE), so neither the loop thread nor the driver ever
 * waits inside the device API.
 *
 * One step in flight at a time (the batch driver awaits each op before it
 * submits the next), so launch may reuse its staging buffers.
 */
#ifndef MB_BACKEND_H
#define MB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "mandel.h"

typedef struct mb_backend mb_backend_t;

struct mb_backend {
	char name[192]; /* "OpenCL: <platform> / <device>" or "FAKE: ..." */
	int fence_fd;   /* eventfd (non-blocking), one write per step */
	size_t max_n;   /* members per step, at most */
	/* Start one step over args[0..n): every pixel of each member's tile
	 * advances by at most chunk iterations from the state kept on the
	 * device for args[k].slot. Does not wait. 0 or -errno. */
	int (*launch)(mb_backend_t *be, const mb_arg_t *args, size_t n,
	    int chunk);
	/* After fence_fd became readable: the step's status (0, or negative
	 * when the device reported a failure), the per-pixel state rows
	 * (n * MB_TILE_PIX values, row k for args[k]) and the monotonic time
	 * (ns) at which the device side signalled. Does not wait. */
	int (*result)(mb_backend_t *be, const int32_t **rows,
	    int64_t *signal_ns);
	/* Calls that would block the calling thread inside the device API
	 * (clFinish, clWaitForEvents) made so far; the example requires 0. */
	long (*blocking_calls)(mb_backend_t *be);
	void (*destroy)(mb_backend_t *be);
};

/* A real OpenCL device (the first platform's first device, CPU or GPU)
 * with state rows for nslots tiles. 0, or -1 with a reason in why (not
 * built with OpenCL, no platform, build failure). */
int mb_opencl_open(size_t nslots, size_t max_n, mb_backend_t **out,
    char *why, size_t whylen);
/* The FAKE device: a thread running mb_step_pixel. fail_step > 0: that
 * step (1-based) reports a device failure instead of computing, as an
 * OpenCL callback with a negative status would. 0 or -errno. */
int mb_fake_open(size_t nslots, size_t max_n, long fail_step,
    mb_backend_t **out);

/* CLOCK_MONOTONIC in ns (both backends stamp signal_ns with it). */
int64_t mb_now_ns(void);

#endif
