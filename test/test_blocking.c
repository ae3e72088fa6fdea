/*
 * test_blocking.c - the blocking offload pool: argument errors, the
 * synchronous fallbacks (off a fiber, from a pool thread), pool size rules,
 * that a parked fiber leaves its loop running, growth on demand, fire and
 * forget with exact counts, shutdown/restart, kill while offloaded, a
 * multi-loop stress with exact counts, and a loop finalised while a fiber
 * is offloaded (job running: fini waits; job queued: withdrawn).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop_int.h"
#include "xtc.h"
#include "xtc_blocking.h"

#include "test_util.h"

/* Wait (bounded, 10 s) until *v >= want; 1 on success. */
static int wait_ge(_Atomic int *v, int want)
{
	for (int i = 0; i < 10000; i++) {
		if (atomic_load(v) >= want)
			return 1;
		usleep(1000);
	}
	return 0;
}

static int ret_arg(void *arg) { return (int)(intptr_t)arg; }

static pthread_t main_tid;
static int on_other_thread(void *arg)
{
	(void)arg;
	return !pthread_equal(pthread_self(), main_tid);
}

/* ---- errors and synchronous fallbacks ------------------------------------ */

static void test_errors(void)
{
	int r = -1;

	CHECK(xtc_blocking_run(NULL, NULL, &r) == XTC_E_INVAL);
	CHECK(r == -1);
	CHECK(xtc_blocking_submit(NULL, NULL) == XTC_E_INVAL);
	CHECK(xtc_blocking_pool_size(0) == XTC_E_RANGE);
	CHECK(xtc_blocking_pool_size(-3) == XTC_E_RANGE);
	CHECK(xtc_blocking_pool_size(XTC_BLOCKING_MAX_THREADS + 1) ==
	      XTC_E_RANGE);
	/* Off a fiber: runs synchronously on this thread. */
	main_tid = pthread_self();
	CHECK(xtc_blocking_run(ret_arg, (void *)(intptr_t)42, &r) == XTC_OK);
	CHECK(r == 42);
	CHECK(xtc_blocking_run(on_other_thread, NULL, &r) == XTC_OK);
	CHECK(r == 0);
	CHECK(xtc_blocking_run(ret_arg, NULL, NULL) == XTC_OK);
	xtc_blocking_shutdown(); /* not started: no-op */
	xtc_blocking_shutdown();
}

/* ---- a fiber offloads; its loop keeps running ---------------------------- */

static _Atomic int gate;      /* set by the ticker fiber */
static _Atomic int ran_on_pool;

/* Blocks (bounded) until the ticker fiber on the same loop ran: proves the
 * loop kept running while this job's fiber was parked. */
static int wait_for_gate(void *arg)
{
	(void)arg;
	atomic_store(&ran_on_pool, !pthread_equal(pthread_self(), main_tid));
	for (int i = 0; i < 5000 && !atomic_load(&gate); i++)
		usleep(1000);
	return atomic_load(&gate) ? 7 : -1;
}

static int offload_result = -100;
static void offloader(void *arg)
{
	(void)arg;
	int r = 0;
	/* Inside a Go callback no park is allowed: fn runs right here. */
	xtc__gocb_enter();
	CHECK(xtc_blocking_run(on_other_thread, NULL, &r) == XTC_OK);
	xtc__gocb_leave();
	CHECK(r == 0);
	r = 0;
	CHECK(xtc_blocking_run(wait_for_gate, NULL, &r) == XTC_OK);
	offload_result = r;
}

static void ticker(void *arg)
{
	(void)arg;
	CHECK(xtc_proc_sleep(2 * MS) == XTC_OK);
	atomic_store(&gate, 1);
}

static void test_loop_keeps_running(void)
{
	xtc_loop_t *l = new_loop();

	main_tid = pthread_self();
	CHECK(xtc_proc_spawn(l, offloader, NULL, NULL, NULL) == XTC_OK);
	CHECK(xtc_proc_spawn(l, ticker, NULL, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(offload_result == 7);
	CHECK(atomic_load(&ran_on_pool) == 1);
	CHECK(xtc_loop_fini(l) == XTC_OK);
}

/* ---- pool size ------------------------------------------------------------ */

static _Atomic int started, release_jobs;
static int block_until_released(void *arg)
{
	(void)arg;
	atomic_fetch_add(&started, 1);
	for (int i = 0; i < 10000 && !atomic_load(&release_jobs); i++)
		usleep(1000);
	return 0;
}

static void test_pool_size(void)
{
	CHECK(xtc_blocking_pool_size(2) == XTC_OK);
	CHECK(xtc_blocking_pool_size(3) == XTC_OK); /* still not started */
	CHECK(xtc_blocking_threads() == 0);
	atomic_store(&started, 0);
	atomic_store(&release_jobs, 0);
	for (int i = 0; i < 8; i++)
		CHECK(xtc_blocking_submit(block_until_released, NULL) == XTC_OK);
	CHECK(wait_ge(&started, 3));
	usleep(20000);
	/* Fixed at 3: no growth, the other 5 wait. */
	CHECK(atomic_load(&started) == 3);
	CHECK(xtc_blocking_threads() == 3);
	CHECK(xtc_blocking_pool_size(4) == XTC_E_INVAL); /* running */
	atomic_store(&release_jobs, 1);
	xtc_blocking_shutdown(); /* runs the queued ones, joins */
	CHECK(atomic_load(&started) == 8);
	CHECK(xtc_blocking_threads() == 0);
	CHECK(xtc_blocking_pool_size(4) == XTC_OK); /* stopped again */
	xtc_blocking_shutdown();
}

/* Default (growing) pool: 20 blocked jobs all start. */
static void test_growth(void)
{
	/* pool_size fixed the size; a fresh default needs a new process, so
	 * this test runs first (see main). */
	atomic_store(&started, 0);
	atomic_store(&release_jobs, 0);
	for (int i = 0; i < 20; i++)
		CHECK(xtc_blocking_submit(block_until_released, NULL) == XTC_OK);
	CHECK(wait_ge(&started, 20));
	CHECK(xtc_blocking_threads() >= 20);
	CHECK(xtc_blocking_threads() <= XTC_BLOCKING_MAX_THREADS);
	atomic_store(&release_jobs, 1);
	xtc_blocking_shutdown();
	CHECK(xtc_blocking_threads() == 0);
}

/* ---- submit counts, shutdown from a job ---------------------------------- */

static _Atomic int count;
static int bump(void *arg)
{
	atomic_fetch_add(&count, (int)(intptr_t)arg);
	return 0;
}

static int shutdown_from_job(void *arg)
{
	(void)arg;
	xtc_blocking_shutdown(); /* no-op on a pool thread: must not hang */
	atomic_fetch_add(&count, 1000);
	return 0;
}

static void test_submit_counts(void)
{
	atomic_store(&count, 0);
	for (int i = 0; i < 5000; i++)
		CHECK(xtc_blocking_submit(bump, (void *)(intptr_t)1) == XTC_OK);
	CHECK(xtc_blocking_submit(shutdown_from_job, NULL) == XTC_OK);
	xtc_blocking_shutdown();
	CHECK(atomic_load(&count) == 6000);
	/* Restart after shutdown. */
	CHECK(xtc_blocking_submit(bump, (void *)(intptr_t)5) == XTC_OK);
	xtc_blocking_shutdown();
	CHECK(atomic_load(&count) == 6005);
}

/* ---- kill while offloaded ------------------------------------------------- */

/* Ordered by events, not by a 2 ms sleep against a 20 ms job (a loop
 * thread frozen past both handled the job's completion first): the killer
 * kills once the job runs, and the job ends only after the kill. */
static _Atomic int killed_job_done, after_run, killed_job_started, kill_sent;
static int slow_job(void *arg)
{
	(void)arg;
	atomic_store(&killed_job_started, 1);
	for (int i = 0; i < 30000 && !atomic_load(&kill_sent); i++)
		usleep(1000);
	atomic_store(&killed_job_done, 1);
	return 3;
}

static void victim(void *arg)
{
	int r = 0;
	(void)arg;
	CHECK(xtc_blocking_run(slow_job, NULL, &r) == XTC_OK);
	/* The job finished before the proc could unwind. */
	CHECK(atomic_load(&killed_job_done) == 1);
	CHECK(r == 3);
	atomic_store(&after_run, 1);
	xtc_yield(); /* the pending kill acts here */
	atomic_store(&after_run, 2);
}

static xtc_pid_t victim_pid;
static void killer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 30000 && !atomic_load(&killed_job_started); i++)
		CHECK(xtc_proc_sleep(1 * MS) == XTC_OK);
	CHECK(atomic_load(&killed_job_started) == 1);
	CHECK(xtc_exit_pid(victim_pid, 9) == XTC_OK);
	atomic_store(&kill_sent, 1);
}

static void test_kill_while_offloaded(void)
{
	xtc_loop_t *l = new_loop();

	CHECK(xtc_proc_spawn(l, victim, NULL, NULL, &victim_pid) == XTC_OK);
	CHECK(xtc_proc_spawn(l, killer, NULL, NULL, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(atomic_load(&killed_job_done) == 1);
	CHECK(atomic_load(&after_run) == 1);
	CHECK(xtc_loop_fini(l) == XTC_OK);
}

/* ---- stress: loops on threads, many fibers, exact counts ----------------- */

#define S_LOOPS 3
#define S_PROCS 100
#define S_RUNS  10

static _Atomic long s_sum;
static _Atomic int s_bad;

static int square(void *arg)
{
	intptr_t v = (intptr_t)arg;
	return (int)(v * v % 1000);
}

static void stress_proc(void *arg)
{
	intptr_t base = (intptr_t)arg;
	for (int i = 0; i < S_RUNS; i++) {
		int r = -1;
		intptr_t v = base * S_RUNS + i;
		if (xtc_blocking_run(square, (void *)v, &r) != XTC_OK ||
		    r != (int)(v * v % 1000))
			atomic_fetch_add(&s_bad, 1);
		atomic_fetch_add(&s_sum, r);
		if (i % 3 == 0)
			xtc_yield();
	}
}

static void *stress_thread(void *arg)
{
	intptr_t li = (intptr_t)arg;
	xtc_loop_t *l = new_loop();
	for (intptr_t p = 0; p < S_PROCS; p++)
		if (xtc_proc_spawn(l, stress_proc,
		                   (void *)(li * S_PROCS + p), NULL, NULL) != 0)
			atomic_fetch_add(&s_bad, 1);
	if (xtc_loop_run(l) != XTC_OK || xtc_loop_fini(l) != XTC_OK)
		atomic_fetch_add(&s_bad, 1);
	return NULL;
}

static void test_stress(void)
{
	pthread_t th[S_LOOPS];
	long want = 0;

	for (long v = 0; v < (long)S_LOOPS * S_PROCS * S_RUNS; v++)
		want += v * v % 1000;
	for (intptr_t i = 0; i < S_LOOPS; i++)
		REQUIRE(pthread_create(&th[i], NULL, stress_thread, (void *)i) == 0);
	for (int i = 0; i < S_LOOPS; i++)
		pthread_join(th[i], NULL);
	CHECK(atomic_load(&s_bad) == 0);
	CHECK(atomic_load(&s_sum) == want);
	xtc_blocking_shutdown();
}

/* ---- executor: migratable procs offload; wakes find them wherever ------ */

#define E_PROCS 64
#define E_RUNS  8
static _Atomic int e_done, e_bad, e_moved;

static int tiny_sleep(void *arg)
{
	usleep(200);
	return (int)(intptr_t)arg;
}

static void exec_proc(void *arg)
{
	for (int i = 0; i < E_RUNS; i++) {
		int before = xtc_exec_loop_id(), r = -1;
		if (xtc_blocking_run(tiny_sleep, arg, &r) != XTC_OK ||
		    r != (int)(intptr_t)arg)
			atomic_fetch_add(&e_bad, 1);
		if (xtc_exec_loop_id() != before)
			atomic_fetch_add(&e_moved, 1);
		xtc_yield();
	}
	atomic_fetch_add(&e_done, 1);
}

static void test_exec_migratable(void)
{
	xtc_exec_t *e = NULL;
	xtc_proc_opts_t o = { .migratable = 1 };

	if (xtc_exec_init(&e, 2) != XTC_OK) {
		CHECK(0);
		return;
	}
	/* All on loop 0: loop 1 steals the ready ones. */
	for (intptr_t i = 0; i < E_PROCS; i++)
		CHECK(xtc_proc_spawn(xtc_exec_loop(e, 0), exec_proc, (void *)i,
		                     &o, NULL) == XTC_OK);
	CHECK(xtc_exec_run(e) == XTC_OK);
	CHECK(atomic_load(&e_done) == E_PROCS);
	CHECK(atomic_load(&e_bad) == 0);
	printf("test_blocking: %d of %d offload resumes on another carrier\n",
	       atomic_load(&e_moved), E_PROCS * E_RUNS);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	xtc_blocking_shutdown();
}

/* ---- loop finalised while a fiber is offloaded ---------------------------- */

/* The job's argument lives on the parked fiber's stack, as it usually
 * does: fini must neither release that stack while the job still writes
 * it, nor let the completion wake the released fiber. A job still queued
 * is withdrawn and never runs. */
struct fin_arg { _Atomic int *gate; int out; };
static _Atomic int fin_gate, fin_job_started, fin_job_done, fin_after;
static _Atomic int fin_queued_ran, fin_parked;

static int fin_job(void *a)
{
	struct fin_arg *fa = a;

	atomic_store(&fin_job_started, 1);
	for (int i = 0; i < 10000 && !atomic_load(fa->gate); i++)
		usleep(1000);
	fa->out = 99; /* into the fiber's stack */
	atomic_store(&fin_job_done, 1);
	return 5;
}

static int fin_queued_job(void *a)
{
	(void)a;
	atomic_store(&fin_queued_ran, 1);
	return 0;
}

static intptr_t fin_offloader(void *arg)
{
	struct fin_arg fa = { .gate = &fin_gate };
	int r = 0;

	atomic_fetch_add(&fin_parked, 1);
	(void)xtc_blocking_run(arg != NULL ? fin_queued_job : fin_job, &fa, &r);
	atomic_store(&fin_after, 1); /* never reached: released at fini */
	return r;
}

static intptr_t fin_stopper(void *arg)
{
	xtc_loop_t *l = arg;

	while (atomic_load(&fin_parked) < 1)
		xtc_yield();
	xtc_yield(); /* let the offloader park */
	CHECK(xtc_loop_stop(l) == XTC_OK);
	return 0;
}

static void *open_gate_later(void *arg)
{
	(void)arg;
	usleep(20000);
	atomic_store(&fin_gate, 1);
	return NULL;
}

/* The job runs on a pool thread when the loop is finalised: fini waits
 * for it (its argument is on the fiber's stack), then releases the fiber. */
static void test_fini_while_running(void)
{
	xtc_loop_t *l = new_loop();
	pthread_t th;

	atomic_store(&fin_gate, 0);
	atomic_store(&fin_job_started, 0);
	atomic_store(&fin_job_done, 0);
	atomic_store(&fin_after, 0);
	atomic_store(&fin_parked, 0);
	CHECK(xtc_async(l, fin_offloader, NULL, NULL) == XTC_OK);
	CHECK(xtc_async(l, fin_stopper, l, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(wait_ge(&fin_job_started, 1));
	REQUIRE(pthread_create(&th, NULL, open_gate_later, NULL) == 0);
	CHECK(xtc_loop_fini(l) == XTC_OK);
	CHECK_EQ(atomic_load(&fin_job_done), 1); /* fini waited for it */
	CHECK_EQ(atomic_load(&fin_after), 0);
	pthread_join(th, NULL);
	xtc_blocking_shutdown(); /* test_pool_size needs a stopped pool */
}

/* The job is still queued (every pool thread busy): fini takes it off the
 * queue; it never runs, even when the pool frees up or shuts down. Needs
 * a fixed-size pool: run after test_pool_size. */
static void test_fini_while_queued(void)
{
	xtc_loop_t *l = new_loop();

	atomic_store(&started, 0);
	atomic_store(&release_jobs, 0);
	atomic_store(&fin_queued_ran, 0);
	atomic_store(&fin_after, 0);
	atomic_store(&fin_parked, 0);
	for (int i = 0; i < 4; i++) /* test_pool_size fixed the size at 4 */
		CHECK(xtc_blocking_submit(block_until_released, NULL) == XTC_OK);
	CHECK(wait_ge(&started, 4));
	CHECK(xtc_async(l, fin_offloader, (void *)1, NULL) == XTC_OK);
	CHECK(xtc_async(l, fin_stopper, l, NULL) == XTC_OK);
	CHECK(xtc_loop_run(l) == XTC_OK);
	CHECK(xtc_loop_fini(l) == XTC_OK);
	atomic_store(&release_jobs, 1);
	xtc_blocking_shutdown(); /* would run a job left on the queue */
	CHECK_EQ(atomic_load(&fin_queued_ran), 0);
	CHECK_EQ(atomic_load(&fin_after), 0);
	CHECK_EQ(atomic_load(&started), 4);
}

int main(void)
{
	test_growth(); /* needs the default (growing) pool */
	test_errors();
	test_loop_keeps_running();
	test_submit_counts();
	test_kill_while_offloaded();
	test_stress();
	test_exec_migratable();
	RUN(test_fini_while_running);
	test_pool_size(); /* fixes the size: last but one */
	RUN(test_fini_while_queued);
	if (failures) {
		fprintf(stderr, "test_blocking: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_blocking: ok\n");
	return 0;
}
