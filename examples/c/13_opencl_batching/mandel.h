/*
 * mandel.h - the Mandelbrot arithmetic shared by the example's three
 * implementations: the OpenCL kernel (backend_opencl.c spells the same
 * expressions in OpenCL C), the FAKE device (backend_fake.c calls
 * mb_step_pixel) and the plain reference (mb_reference).
 *
 * Bit-identity: every operation is one IEEE-754 single-precision multiply,
 * add or subtract, written in the same order everywhere, and compiled with
 * contraction off (FP_CONTRACT OFF in the kernel, -ffp-contract=off here),
 * so no fused multiply-add can change a rounding. Iteration counts are
 * integers, which is what the test compares pixel by pixel.
 *
 * Resumable state: a pixel's (x, y, st) survives between device steps; st
 * >= 0 is the iterations done so far, st < 0 (~count) means finished
 * (escaped, or count == maxit). A chunked run therefore takes exactly the
 * iterations of the straight reference loop, only spread over steps.
 */
#ifndef MANDEL_H
#define MANDEL_H

#include <stdint.h>

#define MB_TILE_W   32
#define MB_TILE_PIX (MB_TILE_W * MB_TILE_W)

/* One member of a device step; the same 32-byte layout in the kernel. */
typedef struct mb_arg {
	int32_t slot;   /* the tile's state row on the device */
	int32_t maxit;  /* its depth */
	int32_t first;  /* 1: start from z = 0 */
	int32_t pad;
	float   x0, y0; /* the tile's corner in the complex plane */
	float   dx;     /* pixel pitch */
	float   pad2;
} mb_arg_t;

/* Advance one pixel by at most chunk iterations; returns its new st. */
static inline int32_t
mb_step_pixel(const mb_arg_t *a, int p, int chunk, float *zx, float *zy,
    int32_t st)
{
	float x = 0.0f, y = 0.0f;
	int32_t it = 0, end;
	float cx = a->x0 + (float)(p % MB_TILE_W) * a->dx;
	float cy = a->y0 + (float)(p / MB_TILE_W) * a->dx;

	if (!a->first) {
		if (st < 0)
			return st; /* finished in an earlier step */
		x = *zx;
		y = *zy;
		it = st;
	}
	end = a->maxit - it < chunk ? a->maxit : it + chunk;
	while (it < end) {
		float x2 = x * x, y2 = y * y, xy;

		if (x2 + y2 > 4.0f)
			break;
		xy = x * y;
		y = xy + xy + cy;
		x = x2 - y2 + cx;
		it++;
	}
	*zx = x;
	*zy = y;
	return (it < end || it == a->maxit) ? ~it : it;
}

/* The plain reference: each pixel straight through to maxit. */
static inline void
mb_reference(const mb_arg_t *a, int32_t *iters)
{
	for (int p = 0; p < MB_TILE_PIX; p++) {
		float x = 0.0f, y = 0.0f;
		float cx = a->x0 + (float)(p % MB_TILE_W) * a->dx;
		float cy = a->y0 + (float)(p / MB_TILE_W) * a->dx;
		int32_t it = 0;

		while (it < a->maxit) {
			float x2 = x * x, y2 = y * y, xy;

			if (x2 + y2 > 4.0f)
				break;
			xy = x * y;
			y = xy + xy + cy;
			x = x2 - y2 + cx;
			it++;
		}
		iters[p] = it;
	}
}

#endif
