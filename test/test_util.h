/*
 * test_util.h - the check harness shared by the C tests: a failure
 * counter, CHECK / CHECK_EQ (report and count, never abort, so one run
 * lists every broken case), REQUIRE (report and exit: for setup whose
 * failure leaves nothing valid to check), RUN (names a test case and its
 * verdict; the one definition, with an optional one-case filter), time
 * units, and loop helpers that exit on a setup failure.
 */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtc.h"

static int failures;

#define CHECK(cond)                                                         \
	do {                                                                    \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,          \
			        __LINE__, #cond);                                       \
			failures++;                                                     \
		}                                                                   \
	} while (0)

#define REQUIRE(cond)                                                       \
	do {                                                                    \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__,        \
			        __LINE__, #cond);                                       \
			exit(1);                                                        \
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

/* RUN runs only this case when set (a test's argv[1], where it takes one):
 * the full function name or the name without its test_ prefix. */
static const char *test_only;

static inline int test_selected(const char *name)
{
	if (test_only == NULL || strcmp(test_only, name) == 0)
		return 1;
	return strncmp(name, "test_", 5) == 0 && strcmp(test_only, name + 5) == 0;
}

#define RUN(fn)                                                             \
	do {                                                                    \
		if (!test_selected(#fn))                                            \
			break;                                                          \
		int before_ = failures;                                             \
		fn();                                                               \
		fprintf(stderr, "%-40s %s\n", #fn,                                  \
		        failures == before_ ? "ok" : "FAILED");                     \
	} while (0)

#define US 1000LL
#define MS 1000000LL
#define SEC 1000000000LL

/* A fresh loop; setup failures end the test (nothing can be checked). */
static inline xtc_loop_t *new_loop(void)
{
	xtc_loop_t *l = NULL;
	if (xtc_loop_init(&l) != XTC_OK) {
		fprintf(stderr, "xtc_loop_init failed\n");
		exit(1);
	}
	return l;
}

static inline void run_fini(xtc_loop_t *l)
{
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(xtc_loop_fini(l) == XTC_OK);
}

#endif
