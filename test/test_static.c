/*
 * test_static.c - involuntary preemption in a static executable (linked
 * with -static): the code map finds the declared code (XTC_PREEMPTIBLE,
 * through the linker's section symbols: there is no dynamic loader) and,
 * under XTC_PREEMPT_POLICY_PROGRAM, the user's code between the entry
 * point and the runtime; libc stays denied, and two spinners that never
 * yield, sharing one loop, both finish (each waits for the other to have
 * run: without preemption the first one spins forever and the test times
 * out). Only the ordinary public API, as a static user program has it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_preempt.h"

#include "test_util.h"

int xtc__preempt_pc_ok(const void *pc);

static volatile int started[2], give_up;
static atomic_int finished;

/* Never calls a function: only a preemption lets the other one start
 * (give_up ends a run where none happens, as a failure). */
XTC_PREEMPTIBLE static intptr_t spinner(void *arg)
{
	int me = (int)(intptr_t)arg;
	volatile uint64_t x = 1;
	started[me] = 1;
	while (!started[1 - me] && !give_up)
		x = x * 6364136223846793005ull + 1;
	for (int i = 0; i < 1000000; i++)
		x = x * 6364136223846793005ull + 1;
	atomic_fetch_add(&finished, 1);
	return (intptr_t)(x & 1);
}

static int stop_task(xtc_task_t *self, void *user)
{
	(void)self;
	xtc_exec_stop((xtc_exec_t *)user);
	return XTC_TASK_DONE;
}

static void *exec_thread(void *arg)
{
	return (void *)(intptr_t)xtc_exec_run((xtc_exec_t *)arg);
}

/* user code that is not declared preemptible */
__attribute__((noinline)) static int plain_user_fn(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static void test_static_map(void)
{
	/* declared code (its section, found in a program without a dynamic
	 * loader); the rest of the program only under the policy that
	 * allows its text: the window between the entry point and the
	 * runtime */
	CHECK(xtc__preempt_pc_ok((const void *)&spinner) == 1);
	CHECK(xtc__preempt_pc_ok((const void *)&plain_user_fn) == 0);
	CHECK(xtc_preempt_set_policy(XTC_PREEMPT_POLICY_PROGRAM) == XTC_OK);
	CHECK(xtc__preempt_pc_ok((const void *)&plain_user_fn) == 1);
	CHECK(xtc__preempt_pc_ok((const void *)&malloc) == 0);
	CHECK(xtc_preempt_set_policy(XTC_PREEMPT_POLICY_DECLARED) == XTC_OK);
	CHECK(plain_user_fn(1) == 2);
	CHECK(xtc__preempt_pc_ok((const void *)&malloc) == 0);
	CHECK(xtc__preempt_pc_ok((const void *)&pthread_mutex_lock) == 0);
	CHECK(xtc__preempt_pc_ok((const void *)&write) == 0);
	CHECK(xtc__preempt_pc_ok((const void *)&xtc_yield) == 0);
	CHECK(xtc__preempt_pc_ok((const void *)&xtc_exec_run) == 0);
}

static void test_static_spinners(void)
{
	xtc_exec_t *e = NULL;
	REQUIRE(xtc_exec_init(&e, 1) == XTC_OK);
	REQUIRE(xtc_exec_set_preempt(e, 500 * US) == XTC_OK);
	xtc_preempt_set_involuntary(1);
	REQUIRE(xtc_exec_async_on(e, 0, spinner, (void *)0, NULL) == XTC_OK);
	REQUIRE(xtc_exec_async_on(e, 0, spinner, (void *)1, NULL) == XTC_OK);
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, exec_thread, e) == 0);
	for (int ms = 0; atomic_load(&finished) < 2; ms++) {
		if (ms == 20000)
			give_up = 1;
		usleep(1000);
	}
	CHECK(!give_up);
	REQUIRE(xtc_exec_spawn_on(e, 0, stop_task, e, NULL) == XTC_OK);
	void *rc;
	pthread_join(th, &rc);
	CHECK((intptr_t)rc == XTC_OK);
	xtc_preempt_stats_t st;
	CHECK(xtc_preempt_stats_global(&st, NULL) == XTC_OK);
	fprintf(stderr, "test_static: %llu preemptions, %llu deferrals\n",
	        (unsigned long long)st.preemptions,
	        (unsigned long long)st.deferrals);
	CHECK(st.preemptions > 0);
	xtc_preempt_set_involuntary(0);
	CHECK(xtc_exec_fini(e) == XTC_OK);
}

int main(void)
{
#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__linux__)
	/* the usual link order (objects, then -lxtc, then libc): supported */
	REQUIRE(xtc_preempt_involuntary_supported());
#else
	if (!xtc_preempt_involuntary_supported())
		return 77;
#endif
	RUN(test_static_map);
	RUN(test_static_spinners);
	return failures ? 1 : 0;
}
