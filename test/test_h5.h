/*
 * test_h5.h - the tiny check harness shared by the executor, class, stall
 * and simulator tests.
 */
#ifndef TEST_H5_H
#define TEST_H5_H

#include <stdio.h>
#include <stdlib.h>

static int failures;

#define CHECK(cond)                                                         \
	do {                                                                    \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,          \
			        __LINE__, #cond);                                       \
			failures++;                                                     \
		}                                                                   \
	} while (0)

#define CHECK_EQ(a, b)                                                      \
	do {                                                                    \
		long long a_ = (long long)(a), b_ = (long long)(b);                 \
		if (a_ != b_) {                                                     \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", \
			        __FILE__, __LINE__, #a, #b, a_, b_);                    \
			failures++;                                                     \
		}                                                                   \
	} while (0)

#define RUN(fn)                                                             \
	do {                                                                    \
		int before_ = failures;                                             \
		fn();                                                               \
		fprintf(stderr, "%-40s %s\n", #fn,                                  \
		        failures == before_ ? "ok" : "FAILED");                     \
	} while (0)

#endif
