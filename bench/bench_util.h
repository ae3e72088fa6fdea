/*
 * bench_util.h - helpers shared by the C benchmarks: comparators for qsort
 * and the median of repeated runs (benchmarks report medians, never means,
 * on a shared machine).
 */
#ifndef XTC_BENCH_UTIL_H
#define XTC_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static inline int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Sorts v in place. */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
