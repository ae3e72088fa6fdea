/*
 * batch_fixture.h - helpers shared by the batch tests and benches
 * (test/test_batch.c, bench/bench_batch.c, bench/bench_batch_mt.c): the
 * options builder, the step and complete callbacks they all need, the two
 * clocks they time with, the min/max spread line, and an allocation
 * counter. Test code only, header-only: everything is static inline, so a
 * user that needs only part of it gets no unused-function warning.
 *
 * The benches include it as "../test/batch_fixture.h" (a quoted include
 * resolves next to the including file first), so no build file gains an
 * include path for it.
 *
 * Allocation counter: define BATCH_FIXTURE_COUNT_ALLOCS before the include
 * in exactly one file of a statically linked program; malloc, calloc and
 * realloc then count into bf_allocs for the whole program (they wrap the
 * C library's allocator through its __libc_ entry points).
 */
#ifndef BATCH_FIXTURE_H
#define BATCH_FIXTURE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "xtc.h"
#include "xtc_batch.h"

static inline xtc_batch_opts_t bf_opts(size_t cap, size_t act, uint64_t res,
                                       xtc_batch_step_fn st,
                                       xtc_batch_complete_fn co, void *user)
{
	xtc_batch_opts_t o;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.version = XTC_BATCH_VERSION;
	o.capacity = cap;
	o.max_active = act;
	o.resource_capacity = res;
	o.step = st;
	o.complete = co;
	o.user = user;
	return o;
}

/* step: every member is DONE after one round */
static inline int bf_done_step(const xtc_batch_item_t *it,
                               xtc_batch_result_t *res, size_t n, void *user)
{
	(void)it;
	(void)user;
	for (size_t k = 0; k < n; k++)
		res[k].state = XTC_BATCH_DONE;
	return XTC_OK;
}

/* complete: nothing to record */
static inline void bf_nop_complete(uint64_t h, void *r, int outcome,
                                   void *user)
{
	(void)h;
	(void)r;
	(void)outcome;
	(void)user;
}

static inline double bf_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* wall time, and the calling thread's CPU time (time other processes took
 * from the machine counts for neither of two variants compared by it) */
static inline double bf_mono_ns(void) { return bf_clock_ns(CLOCK_MONOTONIC); }
static inline double bf_cpu_ns(void)
{
	return bf_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* "  name  min .. max (n=..)" on stderr: the spread next to a median */
static inline void bf_spread(const char *name, const double *v, int n)
{
	double lo = v[0], hi = v[0];

	for (int i = 1; i < n; i++) {
		if (v[i] < lo)
			lo = v[i];
		if (v[i] > hi)
			hi = v[i];
	}
	fprintf(stderr, "  %-22s min %.4g max %.4g (n=%d)\n", name, lo, hi, n);
}

#ifdef BATCH_FIXTURE_COUNT_ALLOCS
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static atomic_long bf_allocs;

void *malloc(size_t n)
{
	atomic_fetch_add_explicit(&bf_allocs, 1, memory_order_relaxed);
	return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
	atomic_fetch_add_explicit(&bf_allocs, 1, memory_order_relaxed);
	return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
	atomic_fetch_add_explicit(&bf_allocs, 1, memory_order_relaxed);
	return __libc_realloc(p, n);
}
#endif

#endif
