/*
 * test_preempt_tls.c - preemption in a program with a large static TLS
 * block (a 260 KiB __thread array). glibc places a thread's static TLS in
 * its stack, so a thread created with a small explicit stack size fails
 * (EINVAL): the monitor thread's 64 KiB stack did, xtc__preempt_register
 * returned XTC_E_INTERNAL at carrier start, and the executor ran without
 * preemption, silently. Checked by an event: a second proc runs on the
 * single carrier while the first, which never yields, is still spinning,
 * and the executor reports preemptions; xtc_exec_set_preempt and
 * xtc_exec_run return XTC_OK. Any remaining failure of a carrier's
 * preemption setup ends xtc_exec_run with its error: every monitor slot
 * taken by other threads, the run returns XTC_E_RESOURCE at once instead
 * of running the work uncut.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "preempt_int.h"
#include "xtc.h"
#include "xtc_blocking.h"
#include "xtc_exec.h"
#include "xtc_preempt.h"
#include "xtc_proc.h"

#include "test_util.h"

enum { BIG_TLS = 260 * 1024 };
static __thread unsigned char big_tls[BIG_TLS];

static atomic_int second_ran, first_done, first_saw_second;
static xtc_exec_t *ex;

/* Never yields: only an involuntary preemption lets the second proc run.
 * Gives up after 20 s (a generous bound on the event, not a timing
 * check) so the case fails instead of hanging. */
XTC_PREEMPTIBLE static void spinner(void *arg)
{
	(void)arg;
	int64_t t0 = xtc_clock_mono();
	volatile uint64_t acc = 0;
	while (!atomic_load(&second_ran) && xtc_clock_mono() - t0 < 20 * SEC)
		for (int i = 0; i < 1000; i++)
			acc += (uint64_t)i ^ big_tls[(acc + (uint64_t)i) % BIG_TLS];
	atomic_store(&first_saw_second, atomic_load(&second_ran));
	atomic_store(&first_done, 1);
}

static void second(void *arg)
{
	(void)arg;
	big_tls[BIG_TLS - 1] = 1; /* the carrier's own copy */
	atomic_store(&second_ran, 1);
}

static void spawn_both(void *arg)
{
	(void)arg;
	REQUIRE(xtc_proc_spawn(xtc_exec_loop(ex, 0), spinner, NULL, NULL,
	                       NULL) == XTC_OK);
	REQUIRE(xtc_proc_spawn(xtc_exec_loop(ex, 0), second, NULL, NULL,
	                       NULL) == XTC_OK);
}

static int run_rc = -12345;
static void *runner(void *arg)
{
	(void)arg;
	run_rc = xtc_exec_run(ex);
	return NULL;
}

static void test_big_static_tls(void)
{
	if (!xtc_preempt_involuntary_supported()) {
		fprintf(stderr, "no involuntary preemption here: skipped\n");
		return;
	}
	memset(big_tls, 7, sizeof big_tls);
	REQUIRE(xtc_exec_init(&ex, 1) == XTC_OK);
	CHECK_EQ(xtc_exec_set_preempt(ex, 200 * US), XTC_OK);
	xtc_preempt_set_involuntary(1);
	xtc_exec_set_service_mode(ex, 1);
	pthread_t r;
	REQUIRE(pthread_create(&r, NULL, runner, NULL) == 0);
	REQUIRE(xtc_exec_submit(ex, 0, spawn_both, NULL) == XTC_OK);
	int64_t t0 = xtc_clock_mono();
	while (!atomic_load(&first_done) && xtc_clock_mono() - t0 < 60 * SEC)
		usleep(1000);
	CHECK(atomic_load(&first_done));
	CHECK(atomic_load(&first_saw_second));
	xtc_exec_stop(ex);
	pthread_join(r, NULL);
	CHECK_EQ(run_rc, XTC_OK);
	xtc_preempt_stats_t st;
	REQUIRE(xtc_preempt_stats_global(&st, NULL) == XTC_OK);
	CHECK(st.preemptions > 0);
	xtc_preempt_set_involuntary(0);
	CHECK_EQ(xtc_exec_fini(ex), XTC_OK);
	CHECK_EQ(big_tls[0], 7); /* this thread's copy is untouched */
}

/* Threads that hold a monitor slot each until released. */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int hold_release, hold_taken, hold_full, hold_started;

static void *holder(void *arg)
{
	(void)arg;
	int rc = xtc__preempt_register(1 * MS);
	pthread_mutex_lock(&hold_mu);
	hold_started++;
	if (rc == XTC_OK)
		hold_taken++;
	else if (rc == XTC_E_RESOURCE)
		hold_full = 1;
	pthread_cond_broadcast(&hold_cv);
	while (!hold_release)
		pthread_cond_wait(&hold_cv, &hold_mu);
	pthread_mutex_unlock(&hold_mu);
	return NULL; /* the thread's exit frees its slot */
}

static void noop(void *arg)
{
	(void)arg;
}

static void test_no_slot_fails_run(void)
{
	if (!xtc_preempt_involuntary_supported())
		return;
	enum { MAXH = XTC__PREEMPT_MAX_SLOTS + 4 };
	static pthread_t th[MAXH];
	int n = 0;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 1024 * 1024); /* > the 260 KiB TLS */
	while (n < MAXH) {
		REQUIRE(pthread_create(&th[n], &a, holder, NULL) == 0);
		n++;
		pthread_mutex_lock(&hold_mu);
		while (hold_started < n)
			pthread_cond_wait(&hold_cv, &hold_mu);
		int full = hold_full;
		pthread_mutex_unlock(&hold_mu);
		if (full)
			break;
	}
	pthread_attr_destroy(&a);
	CHECK(hold_full);
	REQUIRE(xtc_exec_init(&ex, 1) == XTC_OK);
	CHECK_EQ(xtc_exec_set_preempt(ex, 200 * US), XTC_OK);
	xtc_preempt_set_involuntary(1); /* the signal path: a slot */
	CHECK_EQ(xtc_exec_submit(ex, 0, noop, NULL), XTC_OK);
	/* not in service mode: a run that started would end at quiescence */
	CHECK_EQ(xtc_exec_run(ex), XTC_E_RESOURCE);
	pthread_mutex_lock(&hold_mu);
	hold_release = 1;
	pthread_cond_broadcast(&hold_cv);
	pthread_mutex_unlock(&hold_mu);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	/* slots free again: the same executor runs, preempted */
	CHECK_EQ(xtc_exec_submit(ex, 0, noop, NULL), XTC_OK);
	CHECK_EQ(xtc_exec_run(ex), XTC_OK);
	xtc_preempt_set_involuntary(0);
	CHECK_EQ(xtc_exec_fini(ex), XTC_OK);
}

/* The blocking pool's threads have the same need: a fixed 256 KiB stack
 * could not hold the 260 KiB of TLS, pthread_create failed and
 * xtc_blocking_submit returned XTC_E_AGAIN (no pool thread). */
static atomic_int pool_ran;
static int on_pool(void *arg)
{
	(void)arg;
	memset(big_tls, 3, BIG_TLS); /* this thread's copy */
	atomic_store(&pool_ran, 1);
	return 0;
}

static void test_blocking_pool_starts(void)
{
	CHECK_EQ(xtc_blocking_submit(on_pool, NULL), XTC_OK);
	/* an event, with a generous guard */
	for (int64_t g = xtc_clock_mono() + 20000000000LL;
	     !atomic_load(&pool_ran) && xtc_clock_mono() < g;)
		usleep(1000);
	CHECK(atomic_load(&pool_ran));
	xtc_blocking_shutdown();
}

int main(int argc, char **argv)
{
	test_only = argc > 1 ? argv[1] : NULL;
	RUN(test_big_static_tls);
	RUN(test_no_slot_fails_run);
	RUN(test_blocking_pool_starts);
	return failures ? 1 : 0;
}
