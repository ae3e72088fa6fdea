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
#include <unistd.h>

#include "xtc.h"

/* Atomic: a CHECK may fail on another thread or carrier than main's (a
 * plain int raced there under TSan, a freeze-hunt finding). */
static _Atomic int failures;

#define CHECK(cond)                                                         \
	do {                                                                    \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,          \
			        __LINE__, #cond);                                       \
			failures++;                                                     \
		}                                                                   \
	} while (0)

/* REQUIRE: a precondition of the rest of the case (a spawn, a wait whose
 * object the next line frees, a setup call). Failing, it reports and ends
 * the program at once (status 1, the test's failure), from any thread or
 * fiber: the lines after it would otherwise run on a state the failed
 * call did not make (test_future's fiber once went on to await a future
 * a thread had freed: a heap-use-after-free under TSan hid the real
 * failure). _exit, not exit: other threads may still run the case, and
 * exit's destructors and leak check would race them. */
#define REQUIRE(cond)                                                       \
	do {                                                                    \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__,        \
			        __LINE__, #cond);                                       \
			fflush(stderr);                                                 \
			_exit(1);                                                       \
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

/* A watchdog for a case whose failure mode is "never finishes" (a
 * livelock, a wait that never ends): a generous bound on an event, not a
 * timing assertion. test_watchdog_start(secs, what) arms it; if
 * test_watchdog_stop() has not been called within secs, it reports `what`
 * and ends the program (status 1) instead of leaving meson's timeout to
 * kill it without a word. One at a time. */
#include <pthread.h>
#include <time.h>

static pthread_mutex_t test_wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t test_wd_cv = PTHREAD_COND_INITIALIZER;
static int test_wd_armed;
static pthread_t test_wd_thread;
static const char *test_wd_what;
static int test_wd_secs;

static void *test_wd_main(void *arg)
{
	struct timespec until;
	(void)arg;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += test_wd_secs;
	pthread_mutex_lock(&test_wd_mu);
	while (test_wd_armed)
		if (pthread_cond_timedwait(&test_wd_cv, &test_wd_mu, &until) != 0 &&
		    test_wd_armed) {
			fprintf(stderr, "watchdog: %s did not finish within %d s\n",
			        test_wd_what, test_wd_secs);
			fflush(stderr);
			_exit(1);
		}
	pthread_mutex_unlock(&test_wd_mu);
	return NULL;
}

static inline void test_watchdog_start(int secs, const char *what)
{
	test_wd_what = what;
	test_wd_secs = secs;
	test_wd_armed = 1;
	REQUIRE(pthread_create(&test_wd_thread, NULL, test_wd_main, NULL) == 0);
}

static inline void test_watchdog_stop(void)
{
	pthread_mutex_lock(&test_wd_mu);
	test_wd_armed = 0;
	pthread_cond_signal(&test_wd_cv);
	pthread_mutex_unlock(&test_wd_mu);
	pthread_join(test_wd_thread, NULL);
}

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
