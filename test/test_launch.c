/*
 * test_launch.c - xtc_launch: result on completion, no-deadline runs, a
 * parked child killed at its deadline, a never-yielding child stopped on
 * time by involuntary preemption (executor with a slice), a child that dies
 * on its own (XTC_E_ABORTED), every error path, and the caller's loop
 * finalised while it waits for a child on another loop.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loop_int.h"
#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_launch.h"
#include "xtc_preempt.h"

#include "test_util.h"

static intptr_t ret42(void *arg)
{
	(void)arg;
	return 42;
}

static intptr_t sleeper(void *arg)
{
	xtc_proc_sleep((int64_t)(intptr_t)arg);
	return 7;
}

static volatile int spin_stop;
XTC_PREEMPTIBLE static intptr_t runaway(void *arg)
{
	(void)arg;
	volatile uint64_t n = 0;
	while (!spin_stop)
		n++;
	return 1;
}

static intptr_t dies(void *arg)
{
	(void)arg;
	xtc_exit_self(5);
	return 1;
}

static int gocb_rc;
static void in_go(void *arg)
{
	(void)arg;
	gocb_rc = xtc_launch(NULL, ret42, NULL, -1, NULL, NULL);
}

static intptr_t body(void *arg)
{
	(void)arg;
	intptr_t r = 0;
	CHECK(xtc_launch(NULL, NULL, NULL, -1, NULL, &r) == XTC_E_INVAL);
	xtc_launch_opts_t bad = { .loop = 1 };
	CHECK(xtc_launch(NULL, ret42, NULL, -1, &bad, &r) == XTC_E_INVAL);
	CHECK(xtc__carrier_call(in_go, NULL) == XTC_OK);
	CHECK(gocb_rc == XTC_E_DEADLK);

	CHECK(xtc_launch(NULL, ret42, NULL, -1, NULL, &r) == XTC_OK && r == 42);
	CHECK(xtc_launch(NULL, ret42, NULL, 100 * MS, NULL, NULL) == XTC_OK);
	xtc_launch_opts_t named = { .name = "child", .mailbox_cap = 8 };
	r = 0;
	CHECK(xtc_launch(NULL, sleeper, (void *)(intptr_t)(5 * MS), 2000 * MS,
	                 &named, &r) == XTC_OK && r == 7);

	int64_t t0 = xtc_clock_mono();
	r = -1;
	CHECK(xtc_launch(NULL, sleeper, (void *)(intptr_t)(5000 * MS), 20 * MS,
	                 NULL, &r) == XTC_E_AGAIN);
	int64_t dt = xtc_clock_mono() - t0;
	CHECK(dt >= 19 * MS && dt < 2000 * MS);
	CHECK(r == -1);

	CHECK(xtc_launch(NULL, dies, NULL, 1000 * MS, NULL, &r) == XTC_E_ABORTED);
	return 1;
}

static void test_on_loop(void)
{
	xtc_loop_t *l = NULL;
	REQUIRE(xtc_loop_init(&l) == XTC_OK);
	/* off a fiber */
	CHECK(xtc_launch(l, ret42, NULL, -1, NULL, NULL) == XTC_E_INVAL);
	xtc_task_t *t = NULL;
	CHECK(xtc_async(l, body, NULL, &t) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	intptr_t r = 0;
	CHECK(xtc_await(t, &r) == XTC_OK && r == 1);
	CHECK(xtc_loop_fini(l) == XTC_OK);
}

static int64_t runaway_dt = -1;
static int runaway_rc = 99;
static intptr_t runaway_parent(void *arg)
{
	(void)arg;
	int64_t t0 = xtc_clock_mono();
	runaway_rc = xtc_launch(NULL, runaway, NULL, 30 * MS, NULL, NULL);
	runaway_dt = xtc_clock_mono() - t0;
	return 0;
}

static void test_runaway(void)
{
	if (!xtc_preempt_involuntary_supported())
		return;
#if defined(__SANITIZE_THREAD__)
	/* TSan defers signal handlers to its next interceptor: the tick
	 * never lands in the never-yielding child, which would spin forever */
	return;
#endif
	xtc_exec_t *e = NULL;
	REQUIRE(xtc_exec_init(&e, 1) == XTC_OK);
	CHECK(xtc_exec_set_preempt(e, 1 * MS) == XTC_OK);
	xtc_preempt_set_involuntary(1);
	spin_stop = 0;
	CHECK(xtc_exec_async_on(e, 0, runaway_parent, NULL, NULL) == XTC_OK);
	CHECK(xtc_exec_run(e) == XTC_OK);
	CHECK(runaway_rc == XTC_E_AGAIN);
	CHECK(runaway_dt >= 29 * MS && runaway_dt < 2000 * MS);
	xtc_preempt_set_involuntary(0);
	spin_stop = 1;
	CHECK(xtc_exec_fini(e) == XTC_OK);
}

/* The launching proc is killed while it waits: the child's record lives
 * on the caller's stack, so the caller must not unwind before the child
 * is gone, and the child is cancelled with it. */
static xtc_pid_t killed_caller;
static _Atomic int child_started, child_finished, caller_after;

static intptr_t slow_child(void *arg)
{
	(void)arg;
	atomic_store(&child_started, 1);
	/* long enough that no stall of the loop's thread lets it wake
	 * before the kill reaches it (30 ms did: a 40 ms freeze woke both
	 * timers in one step, and the child ran before its killed caller) */
	xtc_proc_sleep(10 * SEC);
	atomic_store(&child_finished, 1);
	return 9;
}

static void launching_proc(void *arg)
{
	(void)arg;
	intptr_t r = 0;
	(void)xtc_launch(NULL, slow_child, NULL, -1, NULL, &r);
	atomic_store(&caller_after, 1); /* never reached: killed */
}

static void killer(void *arg)
{
	(void)arg;
	while (!atomic_load(&child_started))
		xtc_proc_sleep(MS);
	CHECK(xtc_exit_pid(killed_caller, 77) == XTC_OK);
}

static void test_caller_killed(void)
{
	xtc_loop_t *l = NULL;
	REQUIRE(xtc_loop_init(&l) == XTC_OK);
	CHECK(xtc_proc_spawn(l, launching_proc, NULL, NULL, &killed_caller) ==
	      XTC_OK);
	CHECK(xtc_proc_spawn(l, killer, NULL, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(atomic_load(&caller_after) == 0);
	/* the child was cancelled with its caller, not left to run on */
	CHECK(atomic_load(&child_finished) == 0);
	CHECK(xtc_loop_fini(l) == XTC_OK);
}

/* The caller's loop is finalised while it waits for a child on another
 * loop: fini cancels the child and unhooks the caller, so the child never
 * writes into the released caller's stack nor wakes its task, whether it
 * finishes its function afterwards (busy child) or is parked when the
 * kill comes (sleeping child). */
static _Atomic int fl_started, fl_release, fl_fn_done, fl_after, fl_l2_stop;
static xtc_loop_t *fl_l2;

static intptr_t fl_busy_child(void *arg)
{
	(void)arg;
	atomic_store(&fl_started, 1);
	while (!atomic_load(&fl_release))
		; /* no park: the kill cannot land before fn returns */
	atomic_store(&fl_fn_done, 1);
	return 9;
}

static intptr_t fl_sleep_child(void *arg)
{
	(void)arg;
	atomic_store(&fl_started, 1);
	xtc_proc_sleep(10 * SEC); /* killed here */
	atomic_store(&fl_fn_done, 1);
	return 9;
}

static intptr_t fl_caller(void *arg)
{
	intptr_t r = 0;
	int rc = xtc_launch(fl_l2, (xtc_launch_fn)arg, NULL, -1, NULL, &r);

	(void)rc;
	atomic_store(&fl_after, 1); /* never reached: released at fini */
	return r;
}

static intptr_t fl_stopper(void *arg)
{
	while (!atomic_load(&fl_started))
		xtc_yield();
	xtc_yield();
	CHECK(xtc_loop_stop(arg) == XTC_OK);
	return 0;
}

static void *fl_l2_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&fl_l2_stop)) {
		CHECK(xtc_loop_run(fl_l2) == XTC_OK);
		usleep(1000);
	}
	return NULL;
}

static void fini_with_child_elsewhere(int busy)
{
	xtc_loop_t *l = new_loop();
	pthread_t th;

	fl_l2 = new_loop();
	atomic_store(&fl_started, 0);
	atomic_store(&fl_release, 0);
	atomic_store(&fl_fn_done, 0);
	atomic_store(&fl_after, 0);
	atomic_store(&fl_l2_stop, 0);
	REQUIRE(pthread_create(&th, NULL, fl_l2_main, NULL) == 0);
	CHECK(xtc_async(l, fl_caller,
	                (void *)(busy ? fl_busy_child : fl_sleep_child),
	                NULL) == XTC_OK);
	CHECK(xtc_async(l, fl_stopper, l, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(xtc_loop_fini(l) == XTC_OK);
	atomic_store(&fl_release, 1); /* the busy child returns now */
	atomic_store(&fl_l2_stop, 1);
	pthread_join(th, NULL);
	CHECK(xtc_loop_run(fl_l2) == XTC_OK); /* the child is gone */
	CHECK_EQ(atomic_load(&fl_fn_done), busy ? 1 : 0);
	CHECK_EQ(atomic_load(&fl_after), 0);
	CHECK(xtc_loop_fini(fl_l2) == XTC_OK);
}

static void test_fini_child_elsewhere(void)
{
	fini_with_child_elsewhere(1);
	fini_with_child_elsewhere(0);
}

int main(void)
{
	test_on_loop();
	test_caller_killed();
	test_runaway();
	RUN(test_fini_child_elsewhere);
	if (failures)
		fprintf(stderr, "test_launch: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
