/*
 * backend_opencl.c - a real OpenCL device under the batch group.
 *
 * One step = three commands on an in-order queue: write the members'
 * argument records, run mandel_step over n * MB_TILE_PIX work-items (one
 * work-group per member's tile where the device allows it), read the
 * members' state rows back. The read's event gets a CL_COMPLETE callback
 * that stamps the time and writes the eventfd; launch ends with clFlush,
 * which submits without waiting. Nothing here calls clFinish or
 * clWaitForEvents: the batch driver parks on the eventfd (FENCE) and the
 * loop keeps running. The callback runs on an OpenCL runtime thread, may
 * not block and does not call back into OpenCL beyond what the spec
 * allows; it only stores two atomics and writes the fd.
 *
 * A negative execution status (a command terminated abnormally) reaches
 * result() as a negative return, and the example ends those members ERROR.
 *
 * Kernel arithmetic is mandel.h's, spelled in OpenCL C with FP_CONTRACT
 * OFF and no fast-math options, so iteration counts match the C reference
 * bit for bit.
 *
 * The two blocking entry points are interposed below (this executable's
 * definitions take precedence over the loader's) to count calls; the
 * example requires the count to stay 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"

#ifndef MB_HAVE_OPENCL

int
mb_opencl_open(size_t nslots, size_t max_n, mb_backend_t **out, char *why,
    size_t whylen)
{
	(void)nslots;
	(void)max_n;
	(void)out;
	snprintf(why, whylen, "built without OpenCL headers and loader");
	return -1;
}

#else

#include <dlfcn.h>
#include <sys/eventfd.h>

#include <CL/cl.h>

static const char kernel_src[] =
"#pragma OPENCL FP_CONTRACT OFF\n"
"#define TILE_W " "32" "\n"
"#define TILE_PIX (TILE_W * TILE_W)\n"
"typedef struct { int slot, maxit, first, pad; float x0, y0, dx, pad2; }\n"
"    mb_arg_t;\n"
"__kernel void mandel_step(__global const mb_arg_t *args,\n"
"    __global float *zx, __global float *zy, __global int *st,\n"
"    __global int *rows, int chunk)\n"
"{\n"
"	size_t g = get_global_id(0);\n"
"	int m = (int)(g / TILE_PIX), p = (int)(g % TILE_PIX);\n"
"	mb_arg_t a = args[m];\n"
"	size_t i = (size_t)a.slot * TILE_PIX + p;\n"
"	float x = 0.0f, y = 0.0f;\n"
"	int it = 0, end, s;\n"
"	float cx = a.x0 + (float)(p % TILE_W) * a.dx;\n"
"	float cy = a.y0 + (float)(p / TILE_W) * a.dx;\n"
"	if (!a.first) {\n"
"		s = st[i];\n"
"		if (s < 0) { rows[g] = s; return; }\n"
"		x = zx[i]; y = zy[i]; it = s;\n"
"	}\n"
"	end = a.maxit - it < chunk ? a.maxit : it + chunk;\n"
"	while (it < end) {\n"
"		float x2 = x * x, y2 = y * y, xy;\n"
"		if (x2 + y2 > 4.0f)\n"
"			break;\n"
"		xy = x * y;\n"
"		y = xy + xy + cy;\n"
"		x = x2 - y2 + cx;\n"
"		it++;\n"
"	}\n"
"	zx[i] = x; zy[i] = y;\n"
"	s = (it < end || it == a.maxit) ? ~it : it;\n"
"	st[i] = s;\n"
"	rows[g] = s;\n"
"}\n";

_Static_assert(MB_TILE_W == 32, "kernel_src spells TILE_W 32");
_Static_assert(sizeof(mb_arg_t) == 32, "mb_arg_t layout is the kernel's");

/* ---- interposed blocking calls (counted, then forwarded) ---------------- */

static atomic_long g_blocking;

CL_API_ENTRY cl_int CL_API_CALL
clFinish(cl_command_queue q)
{
	cl_int (*real)(cl_command_queue) =
	    (cl_int (*)(cl_command_queue))dlsym(RTLD_NEXT, "clFinish");

	atomic_fetch_add(&g_blocking, 1);
	return real != NULL ? real(q) : CL_INVALID_OPERATION;
}

CL_API_ENTRY cl_int CL_API_CALL
clWaitForEvents(cl_uint n, const cl_event *evs)
{
	cl_int (*real)(cl_uint, const cl_event *) =
	    (cl_int (*)(cl_uint, const cl_event *))dlsym(RTLD_NEXT,
	    "clWaitForEvents");

	atomic_fetch_add(&g_blocking, 1);
	return real != NULL ? real(n, evs) : CL_INVALID_OPERATION;
}

/* ---- the backend --------------------------------------------------------- */

typedef struct ocl {
	mb_backend_t be;
	cl_context ctx;
	cl_command_queue q;
	cl_program prog;
	cl_kernel k;
	cl_mem args_buf, zx, zy, st, rows_buf;
	size_t nslots;
	size_t local;        /* work-group size (MB_TILE_PIX or 0: runtime's) */
	mb_arg_t *args;      /* staging for the non-blocking write */
	int32_t *rows;       /* target of the non-blocking read */
	cl_event ev;         /* the step's read, until result() */
	_Atomic int status;  /* from the callback */
	_Atomic int64_t signal_ns;
} ocl_t;

static void CL_CALLBACK
on_complete(cl_event ev, cl_int status, void *user)
{
	ocl_t *o = user;
	uint64_t one = 1;

	(void)ev;
	atomic_store(&o->status, status < 0 ? (int)status : 0);
	atomic_store(&o->signal_ns, mb_now_ns());
	if (write(o->be.fence_fd, &one, sizeof one) != sizeof one)
		perror("opencl: eventfd write");
}

static int
ocl_launch(mb_backend_t *be, const mb_arg_t *args, size_t n, int chunk)
{
	ocl_t *o = (ocl_t *)be;
	size_t global = n * MB_TILE_PIX;
	cl_int err;

	if (n == 0 || n > be->max_n || o->ev != NULL)
		return -EINVAL;
	for (size_t k = 0; k < n; k++)
		if (args[k].slot < 0 || (size_t)args[k].slot >= o->nslots)
			return -EINVAL;
	memcpy(o->args, args, n * sizeof *args);
	err = clEnqueueWriteBuffer(o->q, o->args_buf, CL_FALSE, 0,
	    n * sizeof *args, o->args, 0, NULL, NULL);
	if (err == CL_SUCCESS)
		err = clSetKernelArg(o->k, 5, sizeof(cl_int), &chunk);
	if (err == CL_SUCCESS)
		err = clEnqueueNDRangeKernel(o->q, o->k, 1, NULL, &global,
		    o->local ? &o->local : NULL, 0, NULL, NULL);
	if (err == CL_SUCCESS)
		err = clEnqueueReadBuffer(o->q, o->rows_buf, CL_FALSE, 0,
		    global * sizeof(int32_t), o->rows, 0, NULL, &o->ev);
	if (err == CL_SUCCESS) {
		atomic_store(&o->status, 1); /* not signalled yet */
		err = clSetEventCallback(o->ev, CL_COMPLETE, on_complete, o);
	}
	if (err == CL_SUCCESS)
		err = clFlush(o->q); /* submit; does not wait */
	if (err != CL_SUCCESS) {
		fprintf(stderr, "opencl: launch failed (%d)\n", (int)err);
		return -EIO;
	}
	return 0;
}

static int
ocl_result(mb_backend_t *be, const int32_t **rows, int64_t *signal_ns)
{
	ocl_t *o = (ocl_t *)be;
	int st = atomic_load(&o->status);

	if (o->ev != NULL) {
		clReleaseEvent(o->ev);
		o->ev = NULL;
	}
	*rows = o->rows;
	*signal_ns = atomic_load(&o->signal_ns);
	/* st > 0: the fence became readable without this step's callback. */
	return st != 0 ? -EIO : 0;
}

static long
ocl_blocking_calls(mb_backend_t *be)
{
	(void)be;
	return atomic_load(&g_blocking);
}

static void
ocl_destroy(mb_backend_t *be)
{
	ocl_t *o = (ocl_t *)be;

	/* Every step's callback has fired by now (the example awaited each
	 * fence), so releasing does not race a running command. */
	if (o->ev != NULL)
		clReleaseEvent(o->ev);
	if (o->k != NULL)
		clReleaseKernel(o->k);
	if (o->prog != NULL)
		clReleaseProgram(o->prog);
	if (o->args_buf != NULL)
		clReleaseMemObject(o->args_buf);
	if (o->zx != NULL)
		clReleaseMemObject(o->zx);
	if (o->zy != NULL)
		clReleaseMemObject(o->zy);
	if (o->st != NULL)
		clReleaseMemObject(o->st);
	if (o->rows_buf != NULL)
		clReleaseMemObject(o->rows_buf);
	if (o->q != NULL)
		clReleaseCommandQueue(o->q);
	if (o->ctx != NULL)
		clReleaseContext(o->ctx);
	if (be->fence_fd >= 0)
		close(be->fence_fd);
	free(o->args);
	free(o->rows);
	free(o);
}

int
mb_opencl_open(size_t nslots, size_t max_n, mb_backend_t **out, char *why,
    size_t whylen)
{
	cl_platform_id plat;
	cl_device_id dev;
	cl_uint np = 0, nd = 0;
	char pname[80] = "", dname[80] = "";
	size_t maxwg = 0, pix = nslots * MB_TILE_PIX;
	cl_int err;
	ocl_t *o;

	if (clGetPlatformIDs(1, &plat, &np) != CL_SUCCESS || np == 0) {
		snprintf(why, whylen, "no OpenCL platform");
		return -1;
	}
	if (clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, &nd) !=
	    CL_SUCCESS || nd == 0) {
		snprintf(why, whylen, "OpenCL platform without a device");
		return -1;
	}
	o = calloc(1, sizeof *o);
	if (o == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	o->be.fence_fd = -1;
	o->nslots = nslots;
	o->be.max_n = max_n;
	(void)clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof pname, pname,
	    NULL);
	(void)clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof dname, dname, NULL);
	(void)clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof maxwg,
	    &maxwg, NULL);
	o->local = maxwg >= MB_TILE_PIX ? MB_TILE_PIX : 0;
	snprintf(o->be.name, sizeof o->be.name, "OpenCL: %s / %s", pname,
	    dname);

	o->ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
	if (err == CL_SUCCESS)
		o->q = clCreateCommandQueue(o->ctx, dev, 0, &err);
	if (err == CL_SUCCESS) {
		const char *src = kernel_src;

		o->prog = clCreateProgramWithSource(o->ctx, 1, &src, NULL,
		    &err);
	}
	if (err == CL_SUCCESS) {
		/* No -cl-fast-relaxed-math / -cl-mad-enable: the kernel must
		 * round like the C reference. */
		err = clBuildProgram(o->prog, 1, &dev, "", NULL, NULL);
		if (err != CL_SUCCESS) {
			char log[2048] = "";

			(void)clGetProgramBuildInfo(o->prog, dev,
			    CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
			fprintf(stderr, "opencl: build log:\n%s\n", log);
		}
	}
	if (err == CL_SUCCESS)
		o->k = clCreateKernel(o->prog, "mandel_step", &err);
#define BUF(field, bytes) \
	if (err == CL_SUCCESS) \
		o->field = clCreateBuffer(o->ctx, CL_MEM_READ_WRITE, (bytes), \
		    NULL, &err)
	BUF(args_buf, max_n * sizeof(mb_arg_t));
	BUF(zx, pix * sizeof(float));
	BUF(zy, pix * sizeof(float));
	BUF(st, pix * sizeof(int32_t));
	BUF(rows_buf, max_n * MB_TILE_PIX * sizeof(int32_t));
#undef BUF
	if (err == CL_SUCCESS)
		err = clSetKernelArg(o->k, 0, sizeof(cl_mem), &o->args_buf);
	if (err == CL_SUCCESS)
		err = clSetKernelArg(o->k, 1, sizeof(cl_mem), &o->zx);
	if (err == CL_SUCCESS)
		err = clSetKernelArg(o->k, 2, sizeof(cl_mem), &o->zy);
	if (err == CL_SUCCESS)
		err = clSetKernelArg(o->k, 3, sizeof(cl_mem), &o->st);
	if (err == CL_SUCCESS)
		err = clSetKernelArg(o->k, 4, sizeof(cl_mem), &o->rows_buf);
	o->args = calloc(max_n, sizeof *o->args);
	o->rows = calloc(max_n * MB_TILE_PIX, sizeof *o->rows);
	o->be.fence_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (err != CL_SUCCESS || o->args == NULL || o->rows == NULL ||
	    o->be.fence_fd < 0) {
		snprintf(why, whylen, "OpenCL setup failed (%d) on %s",
		    (int)err, o->be.name);
		ocl_destroy(&o->be);
		return -1;
	}
	o->be.launch = ocl_launch;
	o->be.result = ocl_result;
	o->be.blocking_calls = ocl_blocking_calls;
	o->be.destroy = ocl_destroy;
	*out = &o->be;
	return 0;
}

#endif
