/*
 * test_exec_gocall.c - the Go front door's C half (csrc/exec_gocall.c), driven from
 * plain threads the way the Go side drives it: a free list of record
 * indices owned by the submitters, one consumer of the completion ring
 * that sleeps on the eventfd after arming it.
 *
 * Cases: a value comes back through the ring and through the spin, each
 * record settles exactly once under many submitters (checked per call by a
 * token only that call's function returns); a kill before the start never
 * runs the function, a kill of a running call settles ABORTED; a full
 * submission ring falls back to the inbox (no refusal); submissions the
 * executor's fini dropped unrun are settled ABORTED by xtc__gocalls_settle;
 * class calls run in their class; a call spawned from the caller's thread
 * has its pid at return; the per-loop counts of calls in flight follow
 * submissions and settlements; bad arguments. Every wait is bounded by
 * events (a generous deadline ends a hung test), never a timing assertion.
 */
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_proc.h"
#include "exec_gocall_int.h"
#include "exec_int.h"
#include "loop_int.h"
#include "test_util.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define NCALLS 20000
#else
#define NCALLS 200000
#endif
#define NSUB 4
#define CAP 1024

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

static xtc__gocall_done_t *done_of(xtc__gocalls_t *t, uint32_t i)
{
	void *base = NULL;

	/* the record's chunk, made if no submission made it yet */
	if (xtc__gocalls_chunk(t, i / XTC__GOCALLS_CHUNK, &base) != XTC_OK)
		abort();
	return (xtc__gocall_done_t *)((char *)base +
	    (size_t)(i % XTC__GOCALLS_CHUNK) * xtc__gocalls_stride());
}

static uint32_t waiter_of(xtc__gocalls_t *t, uint32_t i)
{
	return __atomic_load_n(&done_of(t, i)->waiter, __ATOMIC_ACQUIRE);
}

/* ---- an executor running in service mode on its own thread ------------ */

static void *run_main(void *a)
{
	(void)xtc_exec_run(a);
	return NULL;
}

static xtc_exec_t *start_exec(int n, pthread_t *th)
{
	xtc_exec_t *e = NULL;

	REQUIRE(xtc_exec_init(&e, n) == XTC_OK);
	xtc_exec_set_service_mode(e, 1);
	REQUIRE(pthread_create(th, NULL, run_main, e) == 0);
	return e;
}

static void stop_exec(xtc_exec_t *e, pthread_t th)
{
	CHECK(xtc_exec_stop(e) == XTC_OK);
	pthread_join(th, NULL);
}

/* ---- the consumer: pops settled indices, sleeps on the eventfd -------- */

typedef struct consumer {
	xtc__gocalls_t *t;
	_Atomic int stop;
	_Atomic long popped;
	_Atomic uint32_t *got;  /* per record: settlements seen (0/1) */
	_Atomic long dup;       /* a record popped twice */
	pthread_t th;
} consumer_t;

static void *consumer_main(void *a)
{
	consumer_t *c = a;
	uint32_t buf[64];
	struct pollfd pfd = { .fd = xtc__gocalls_fd(c->t), .events = POLLIN };

	for (;;) {
		int n = xtc__gocalls_pop(c->t, buf, 64);
		if (n > 0) {
			for (int i = 0; i < n; i++)
				if (atomic_exchange(&c->got[buf[i]], 1) != 0)
					atomic_fetch_add(&c->dup, 1);
			atomic_fetch_add(&c->popped, n);
			continue;
		}
		if (atomic_load(&c->stop))
			return NULL;
		if (xtc__gocalls_arm(c->t))
			continue;
		(void)poll(&pfd, 1, 100);
		{
			uint64_t v;
			(void)!read(pfd.fd, &v, sizeof(v));
		}
	}
}

/* wait until record i's settlement was seen by the consumer, then hand
 * it back (what the Go waiter does when it was sent the index) */
static int await_ring(consumer_t *c, uint32_t i)
{
	int64_t dl = now_ns() + 30 * SEC;

	while (atomic_load(&c->got[i]) == 0) {
		if (now_ns() > dl)
			return 0;
		sched_yield();
	}
	atomic_store(&c->got[i], 0);
	return 1;
}

/* until loop 0's carrier parks (its sleeping word), or the deadline */
static void wait_parked(xtc_exec_t *e, int64_t dl)
{
	while (!atomic_load(&xtc_exec_loop(e, 0)->sleeping) && now_ns() < dl)
		usleep(200);
}

/* ---- C functions run as calls ----------------------------------------- */

static intptr_t f_ident(void *a) { return (intptr_t)a; }

static _Atomic int spin_started;
static _Atomic long ran_count;

static intptr_t f_count(void *a)
{
	atomic_fetch_add(&ran_count, 1);
	return (intptr_t)a;
}

/* spins until told to stop by the flag it gets (never yields: only a kill
 * at a park, or preemption, ends it early); here it parks in a loop */
static intptr_t f_park_forever(void *a)
{
	(void)a;
	atomic_store(&spin_started, 1);
	for (;;)
		xtc_proc_sleep(1 * MS);
	return 0;
}

/* ---- cases ------------------------------------------------------------- */

static void test_args(void)
{
	xtc__gocalls_t *t = NULL;
	xtc_exec_t *e = NULL;

	CHECK(xtc__gocalls_create(NULL, 8, &t) == XTC_E_INVAL);
	REQUIRE(xtc_exec_init(&e, 1) == XTC_OK);
	CHECK(xtc__gocalls_create(e, 0, &t) == XTC_E_RANGE);
	CHECK(xtc__gocalls_create(e, 8, NULL) == XTC_E_INVAL);
	REQUIRE(xtc__gocalls_create(e, 5, &t) == XTC_OK);
	CHECK(xtc__gocalls_cap(t) == 8);
	CHECK(xtc__gocalls_fd(t) >= 0);
	CHECK(xtc__gocalls_stride() % 64 == 0);
	CHECK(xtc__gocall_submit(t, 8, 0, (void *)f_ident, (uintptr_t)0, NULL, NULL, 0) == XTC_E_INVAL);
	CHECK(xtc__gocall_submit(t, 0, 1, (void *)f_ident, (uintptr_t)0, NULL, NULL, 0) == XTC_E_INVAL);
	CHECK(xtc__gocall_submit(t, 0, 0, NULL, 0, NULL, NULL, 0) == XTC_E_INVAL);
	CHECK(xtc__gocall_submit(NULL, 0, 0, (void *)f_ident, (uintptr_t)0, NULL, NULL, 0) == XTC_E_INVAL);
	CHECK(xtc__gocall_kill(t, 99) == XTC_E_INVAL);
	CHECK(xtc__gocalls_pop(t, NULL, 1) == XTC_E_INVAL);
	/* a record in flight cannot be submitted again */
	CHECK(xtc__gocall_submit(t, 3, 0, (void *)f_ident, (uintptr_t)7, NULL, "x", 0) == 0);
	CHECK(xtc__gocall_submit(t, 3, 0, (void *)f_ident, (uintptr_t)7, NULL, "x", 0) == XTC_E_INVAL);
	/* never run: the fini drops it, settle reports it ABORTED */
	CHECK(xtc_exec_fini(e) == XTC_OK);
	CHECK(xtc__gocalls_settle(t) == 1);
	CHECK(waiter_of(t, 3) == XTC__GW_DONE);
	CHECK(done_of(t, 3)->status == XTC_E_ABORTED);
	{
		uint32_t i;
		CHECK(xtc__gocalls_pop(t, &i, 1) == 1 && i == 3);
	}
	xtc__gocalls_destroy(t);
}

/* one call through the ring, one through the spin */
static void test_value(void)
{
	pthread_t th;
	xtc_exec_t *e = start_exec(1, &th);
	xtc__gocalls_t *t = NULL;
	uint32_t i;
	int64_t dl;
	int rc;

	REQUIRE(xtc__gocalls_create(e, CAP, &t) == XTC_OK);
	CHECK(xtc__gocall_submit(t, 5, 0, (void *)f_ident, (uintptr_t)41, NULL, "v", 0) == 0);
	dl = now_ns() + 30 * SEC;
	while (xtc__gocalls_pop(t, &i, 1) == 0 && now_ns() < dl)
		sched_yield();
	CHECK(i == 5);
	CHECK(waiter_of(t, 5) == XTC__GW_DONE);
	CHECK(done_of(t, 5)->status == 0 && done_of(t, 5)->value == 41);
	/* the carrier started it: the spinning caller's hint */
	CHECK(__atomic_load_n(&done_of(t, 5)->started, __ATOMIC_RELAXED) == 1);

	/* nothing else in flight: the spin is granted, nothing is pushed */
	rc = xtc__gocall_submit(t, 6, 0, (void *)f_ident, (uintptr_t)42, NULL, NULL, 1);
	CHECK(rc == 1 || rc == 2); /* 2: the carrier was parked */
	dl = now_ns() + 30 * SEC;
	while (waiter_of(t, 6) != XTC__GW_DONE && now_ns() < dl)
		sched_yield();
	CHECK(done_of(t, 6)->value == 42);
	CHECK(xtc__gocalls_pop(t, &i, 1) == 0);
	/* the carrier parked: the grant says so (2), for a longer poll. The
	 * carrier may wake between the look and the submission (a grant of 1
	 * then): tried until it says 2, with a bound */
	{
		int two = 0;
		for (int k = 0; k < 100 && !two; k++) {
			dl = now_ns() + 30 * SEC;
			wait_parked(e, dl);
			rc = xtc__gocall_submit(t, 8, 0, (void *)f_ident,
			                        (uintptr_t)43, NULL, NULL, 1);
			REQUIRE(rc == 1 || rc == 2);
			two = rc == 2;
			while (waiter_of(t, 8) != XTC__GW_DONE && now_ns() < dl)
				sched_yield();
			CHECK(done_of(t, 8)->value == 43);
		}
		CHECK(two);
		CHECK(xtc__gocalls_pop(t, &i, 1) == 0);
	}
	/* a spin given up: the index comes through the ring */
	rc = xtc__gocall_submit(t, 7, 0, (void *)f_park_forever, (uintptr_t)0, NULL, NULL, 1);
	CHECK(rc == 1 || rc == 2);
	CHECK(xtc__gocall_unspin(t, 7) == 0);
	CHECK(xtc__gocall_kill(t, 7) == XTC_OK);
	dl = now_ns() + 30 * SEC;
	while (xtc__gocalls_pop(t, &i, 1) == 0 && now_ns() < dl)
		sched_yield();
	CHECK(i == 7);
	CHECK(done_of(t, 7)->status == XTC_E_ABORTED);
	stop_exec(e, th);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	CHECK(xtc__gocalls_settle(t) == 0);
	xtc__gocalls_destroy(t);
}

/* a kill before the carrier ran the start: the function never runs */
static void test_kill_before_start(void)
{
	xtc_exec_t *e = NULL;
	xtc__gocalls_t *t = NULL;
	pthread_t th;
	uint32_t i;
	int64_t dl;

	REQUIRE(xtc_exec_init(&e, 1) == XTC_OK);
	REQUIRE(xtc__gocalls_create(e, CAP, &t) == XTC_OK);
	atomic_store(&ran_count, 0);
	CHECK(xtc__gocall_submit(t, 0, 0, (void *)f_count, (uintptr_t)1, NULL, NULL, 0) == 0);
	CHECK(xtc__gocall_kill(t, 0) == XTC_OK); /* not started: not running */
	xtc_exec_set_service_mode(e, 1);
	REQUIRE(pthread_create(&th, NULL, run_main, e) == 0);
	dl = now_ns() + 30 * SEC;
	while (xtc__gocalls_pop(t, &i, 1) == 0 && now_ns() < dl)
		sched_yield();
	CHECK(i == 0);
	CHECK(done_of(t, 0)->status == XTC_E_ABORTED);
	CHECK(atomic_load(&ran_count) == 0);
	/* never started, and a reused record starts unstarted again */
	CHECK(__atomic_load_n(&done_of(t, 0)->started, __ATOMIC_RELAXED) == 0);
	CHECK(xtc__gocall_submit(t, 0, 0, (void *)f_count, (uintptr_t)1, NULL, NULL, 0) == 0);
	dl = now_ns() + 30 * SEC;
	while (xtc__gocalls_pop(t, &i, 1) == 0 && now_ns() < dl)
		sched_yield();
	CHECK(i == 0 && done_of(t, 0)->status == 0);
	CHECK(__atomic_load_n(&done_of(t, 0)->started, __ATOMIC_RELAXED) == 1);
	/* reused while no carrier runs: not started (the claim resets it) */
	stop_exec(e, th);
	CHECK(xtc__gocall_submit(t, 0, 0, (void *)f_count, (uintptr_t)1, NULL, NULL, 0) == 0);
	CHECK(__atomic_load_n(&done_of(t, 0)->started, __ATOMIC_RELAXED) == 0);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	CHECK(xtc__gocalls_settle(t) >= 0);
	CHECK(xtc__gocalls_pop(t, &i, 1) == 1 && i == 0);
	CHECK(done_of(t, 0)->status == XTC_E_ABORTED);
	xtc__gocalls_destroy(t);
}

/* a kill of a running (parked) call */
static void test_kill_running(void)
{
	pthread_t th;
	xtc_exec_t *e = start_exec(1, &th);
	xtc__gocalls_t *t = NULL;
	uint32_t i = 99;
	int64_t dl;

	REQUIRE(xtc__gocalls_create(e, CAP, &t) == XTC_OK);
	atomic_store(&spin_started, 0);
	CHECK(xtc__gocall_submit(t, 2, 0, (void *)f_park_forever, (uintptr_t)0, NULL, NULL, 0) == 0);
	dl = now_ns() + 30 * SEC;
	while (!atomic_load(&spin_started) && now_ns() < dl)
		sched_yield();
	CHECK(xtc__gocall_kill(t, 2) == XTC_OK);
	while (xtc__gocalls_pop(t, &i, 1) == 0 && now_ns() < dl)
		sched_yield();
	CHECK(i == 2);
	CHECK(done_of(t, 2)->status == XTC_E_ABORTED);
	stop_exec(e, th);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	xtc__gocalls_destroy(t);
}

/* many submitters, one consumer: every call settles exactly once with its
 * own value, through the ring or the spin */
typedef struct sub {
	consumer_t *c;
	int id;
	long bad, lost;
} sub_t;

static void *submitter(void *a)
{
	sub_t *s = a;
	xtc__gocalls_t *t = s->c->t;
	/* a private range of records: the free list is the caller's */
	uint32_t base = (uint32_t)s->id * (CAP / NSUB);

	for (int k = 0; k < NCALLS / NSUB; k++) {
		uint32_t i = base + (uint32_t)(k % 8);
		intptr_t want = ((intptr_t)s->id << 32) | k;
		int rc = xtc__gocall_submit(t, i, k % 2, (void *)f_ident,
		                            (uintptr_t)want, NULL, NULL, k % 3 == 0);
		if (rc < 0) {
			s->bad++;
			continue;
		}
		if (rc == 1 || rc == 2) {
			int64_t dl = now_ns() + 30 * SEC;
			while (waiter_of(t, i) != XTC__GW_DONE) {
				if (now_ns() > dl) {
					if (xtc__gocall_unspin(t, i) == 0)
						goto ring;
					break;
				}
				sched_yield();
			}
		} else {
		ring:
			if (!await_ring(s->c, i)) {
				s->lost++;
				return NULL;
			}
		}
		if (done_of(t, i)->status != 0 || done_of(t, i)->value != want)
			s->bad++;
		/* the record is free again: state FREE is the runtime's, the
		 * caller hands it back by submitting it again */
	}
	return NULL;
}

static void test_exactly_once(void)
{
	pthread_t th, sth[NSUB];
	xtc_exec_t *e = start_exec(2, &th);
	consumer_t c;
	sub_t s[NSUB];
	xtc__gocalls_stats_t st;

	memset(&c, 0, sizeof c);
	REQUIRE(xtc__gocalls_create(e, CAP, &c.t) == XTC_OK);
	c.got = calloc(CAP, sizeof(*c.got));
	REQUIRE(c.got != NULL);
	REQUIRE(pthread_create(&c.th, NULL, consumer_main, &c) == 0);
	for (int k = 0; k < NSUB; k++) {
		s[k] = (sub_t){ .c = &c, .id = k };
		REQUIRE(pthread_create(&sth[k], NULL, submitter, &s[k]) == 0);
	}
	for (int k = 0; k < NSUB; k++) {
		pthread_join(sth[k], NULL);
		CHECK_EQ(s[k].bad, 0);
		CHECK_EQ(s[k].lost, 0);
	}
	atomic_store(&c.stop, 1);
	xtc__gocalls_bell(c.t);
	pthread_join(c.th, NULL);
	CHECK_EQ(atomic_load(&c.dup), 0);
	xtc__gocalls_stats(c.t, &st);
	CHECK_EQ(st.submitted, NCALLS);
	CHECK_EQ(st.ring + st.spun, NCALLS);
	CHECK_EQ(st.ring, atomic_load(&c.popped));
	{ /* every call settled: no loop's count drifted */
		int nl = 0;
		int32_t *ld = xtc__gocalls_loads(c.t, &nl);
		REQUIRE(ld != NULL && nl == 2);
		CHECK_EQ(__atomic_load_n(&ld[0], __ATOMIC_RELAXED), 0);
		CHECK_EQ(__atomic_load_n(&ld[1], __ATOMIC_RELAXED), 0);
	}
	stop_exec(e, th);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	CHECK(xtc__gocalls_settle(c.t) == 0);
	xtc__gocalls_destroy(c.t);
	free(c.got);
}

/* f_live: its argument, and the most procs its loop held at once (every
 * call is its own proc: the ones started and not yet reaped) */
static atomic_long live_max;

static intptr_t f_live(void *a)
{
	long n = (long)xtc__loop_current()->live_tasks, m = atomic_load(&live_max);

	while (n > m && !atomic_compare_exchange_weak(&live_max, &m, n))
		;
	return (intptr_t)a;
}

/* more calls queued than the submission ring holds, before the executor
 * runs: the rest wait in the carrier's overflow, none is refused, all
 * settle, in order (one carrier, calls that never yield: each runs to its
 * end in its start's order), and the overflow is admitted at the ring's
 * pace: never more procs at once than an idle drain's batch and the
 * steps since, where the inbox it replaced started all 2000 at once (a
 * stack each; this failed with live_max 2257).
 * Not under TSan: a proc there costs ~3 ms (its fiber's shadow state;
 * these 6096 took 19 s on an idle machine); test_exec's
 * test_submit_node_threads runs the overflow's races under it. */
static void test_fallback(void)
{
#if defined(__SANITIZE_THREAD__)
	fprintf(stderr, "test_fallback: skipped under TSan\n");
	return;
#endif
	enum { N = XTC_EXEC_SUBMIT_CAP + 2000 };
	xtc_exec_t *e = NULL;
	xtc__gocalls_t *t = NULL;
	xtc__gocalls_stats_t st;
	pthread_t th;
	uint32_t buf[256];
	long got = 0, bad = 0, order = 0, next = 0;
	int64_t dl;

	atomic_store(&live_max, 0);
	REQUIRE(xtc_exec_init(&e, 1) == XTC_OK);
	REQUIRE(xtc__gocalls_create(e, 8192, &t) == XTC_OK);
	for (uint32_t i = 0; i < N; i++)
		CHECK(xtc__gocall_submit(t, i, 0, (void *)f_live,
		                         (uintptr_t)(intptr_t)i, NULL, NULL, 0) == 0);
	xtc__gocalls_stats(t, &st);
	CHECK_EQ(st.fallback, N - XTC_EXEC_SUBMIT_CAP);
	xtc_exec_set_service_mode(e, 1);
	REQUIRE(pthread_create(&th, NULL, run_main, e) == 0);
	dl = now_ns() + 60 * SEC;
	while (got < N && now_ns() < dl) {
		int n = xtc__gocalls_pop(t, buf, 256);
		for (int k = 0; k < n; k++) {
			if (done_of(t, buf[k])->status != 0 ||
			    done_of(t, buf[k])->value != (int64_t)buf[k])
				bad++;
			if ((long)buf[k] != next++)
				order++;
		}
		got += n;
		if (n == 0)
			sched_yield();
	}
	CHECK_EQ(got, N);
	CHECK_EQ(bad, 0);
	CHECK_EQ(order, 0);
	/* an idle drain admits a batch; with work ready, one per step */
	CHECK(atomic_load(&live_max) <= 2 * XTC__EXEC_DRAIN_BATCH);
	if (atomic_load(&live_max) > 2 * XTC__EXEC_DRAIN_BATCH)
		fprintf(stderr, "test_fallback: %ld procs at once\n",
		        atomic_load(&live_max));
	stop_exec(e, th);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	xtc__gocalls_destroy(t);
}

/* queued and running calls when the executor is finalised: the fini's
 * teardown settles the started ones, xtc__gocalls_settle the rest; each
 * exactly once */
static void test_fini_settles(void)
{
	enum { N = 300 };
	pthread_t th;
	xtc_exec_t *e = start_exec(1, &th);
	xtc__gocalls_t *t = NULL;
	uint32_t buf[N + 1];
	int n, settled;
	int64_t dl;

	REQUIRE(xtc__gocalls_create(e, 1024, &t) == XTC_OK);
	atomic_store(&spin_started, 0);
	for (uint32_t i = 0; i < N; i++)
		CHECK(xtc__gocall_submit(t, i, 0, (void *)f_park_forever, (uintptr_t)0,
		                         NULL, NULL, 0) == 0);
	dl = now_ns() + 30 * SEC;
	while (!atomic_load(&spin_started) && now_ns() < dl)
		sched_yield();
	stop_exec(e, th);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	settled = xtc__gocalls_settle(t);
	CHECK(settled >= 0);
	n = xtc__gocalls_pop(t, buf, N + 1);
	CHECK_EQ(n, N);
	for (int k = 0; k < n; k++)
		CHECK(done_of(t, buf[k])->status == XTC_E_ABORTED);
	CHECK(xtc__gocalls_settle(t) == 0);
	xtc__gocalls_destroy(t);
}

/* a call in a class runs in it (the proc's class is the call's) */
static intptr_t f_class_ok(void *a)
{
	(void)a;
	return 1;
}

static void test_class(void)
{
	xtc_exec_t *e = NULL;
	xtc__gocalls_t *t = NULL;
	xtc_exec_class_t cls = NULL;
	pthread_t th;
	uint32_t i;
	int64_t dl;

	REQUIRE(xtc_exec_init(&e, 1) == XTC_OK);
	REQUIRE(xtc_exec_class_create(xtc_exec_loop(e, 0), 300, 0, &cls) == XTC_OK);
	REQUIRE(xtc__gocalls_create(e, 16, &t) == XTC_OK);
	xtc_exec_set_service_mode(e, 1);
	REQUIRE(pthread_create(&th, NULL, run_main, e) == 0);
	CHECK(xtc__gocall_submit(t, 1, 0, (void *)f_class_ok, (uintptr_t)cls, cls, NULL, 0) == 0);
	dl = now_ns() + 30 * SEC;
	while (xtc__gocalls_pop(t, &i, 1) == 0 && now_ns() < dl)
		sched_yield();
	CHECK(i == 1 && done_of(t, 1)->status == 0 && done_of(t, 1)->value == 1);
	CHECK(xtc_exec_class_runs(cls) >= 1); /* it ran in the class */
	stop_exec(e, th);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	xtc__gocalls_destroy(t);
}

/* spawned from the calling thread: the pid is known at return, the
 * settlement comes through the ring; a kill by that pid works */
static void test_spawn(void)
{
	pthread_t th;
	xtc_exec_t *e = start_exec(1, &th);
	xtc__gocalls_t *t = NULL;
	xtc_pid_t pid = XTC_PID_NONE;
	uint32_t i = 99;
	int64_t dl;

	REQUIRE(xtc__gocalls_create(e, 16, &t) == XTC_OK);
	CHECK(xtc__gocall_spawn(t, 4, 0, (void *)f_ident, 43, NULL, "s", &pid) == XTC_OK);
	CHECK(!xtc_pid_is_none(pid));
	dl = now_ns() + 30 * SEC;
	while (xtc__gocalls_pop(t, &i, 1) == 0 && now_ns() < dl)
		sched_yield();
	CHECK(i == 4 && done_of(t, 4)->status == 0 && done_of(t, 4)->value == 43);
	atomic_store(&spin_started, 0);
	CHECK(xtc__gocall_spawn(t, 5, 0, (void *)f_park_forever, 0, NULL, NULL, &pid) == XTC_OK);
	while (!atomic_load(&spin_started) && now_ns() < dl)
		sched_yield();
	CHECK(xtc_exit_pid(pid, XTC_E_ABORTED) == XTC_OK);
	while (xtc__gocalls_pop(t, &i, 1) == 0 && now_ns() < dl)
		sched_yield();
	CHECK(i == 5 && done_of(t, 5)->status == XTC_E_ABORTED);
	CHECK(xtc__gocall_spawn(t, 5, 0, NULL, 0, NULL, NULL, &pid) == XTC_E_INVAL);
	CHECK(xtc__gocall_spawn(t, 5, 3, (void *)f_ident, 0, NULL, NULL, &pid) == XTC_E_INVAL);
	stop_exec(e, th);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	xtc__gocalls_destroy(t);
}

/* the slab of slabs: a chunk is made by the first use of one of its
 * indices, up to the hard limit and never past it; records of every chunk
 * settle through the completion stack and keep their addresses */
static void test_growth(void)
{
	enum { LIM = 3 * XTC__GOCALLS_CHUNK }; /* rounded up: 4 chunks */
	xtc_exec_t *e = NULL;
	xtc__gocalls_t *t = NULL;
	xtc__gocall_done_t *d0;
	pthread_t th;
	void *base = NULL;
	uint32_t buf[8], seen = 0;
	int got = 0;
	int64_t dl;

	REQUIRE(xtc_exec_init(&e, 1) == XTC_OK);
	REQUIRE(xtc__gocalls_create(e, LIM, &t) == XTC_OK);
	CHECK(xtc__gocalls_cap(t) == 4 * XTC__GOCALLS_CHUNK);
	CHECK(xtc__gocalls_done(t, 0) != NULL);          /* made at create */
	CHECK(xtc__gocalls_done(t, XTC__GOCALLS_CHUNK) == NULL); /* not yet */
	d0 = xtc__gocalls_done(t, 5);
	CHECK(xtc__gocalls_chunk(t, 4, &base) == XTC_E_RANGE);
	CHECK(xtc__gocalls_chunk(t, 0, NULL) == XTC_E_INVAL);
	CHECK(xtc__gocall_submit(t, 4 * XTC__GOCALLS_CHUNK, 0, (void *)f_ident,
	                         0, NULL, NULL, 0) == XTC_E_INVAL);
	/* the last record of each chunk: the submission makes the chunk */
	for (uint32_t c = 0; c < 4; c++) {
		uint32_t i = c * XTC__GOCALLS_CHUNK + XTC__GOCALLS_CHUNK - 1;
		CHECK(xtc__gocall_submit(t, i, 0, (void *)f_ident,
		                         (uintptr_t)(c + 1), NULL, NULL, 0) == 0);
		CHECK(xtc__gocalls_done(t, i) != NULL);
	}
	CHECK(xtc__gocalls_chunk(t, 2, &base) == XTC_OK);
	CHECK((char *)xtc__gocalls_done(t, 2 * XTC__GOCALLS_CHUNK + 3) ==
	      (char *)base + 3 * (size_t)xtc__gocalls_stride());
	xtc_exec_set_service_mode(e, 1);
	REQUIRE(pthread_create(&th, NULL, run_main, e) == 0);
	dl = now_ns() + 60 * SEC;
	while (got < 4 && now_ns() < dl) {
		int n = xtc__gocalls_pop(t, buf, 8);
		for (int k = 0; k < n; k++) {
			uint32_t c = buf[k] / XTC__GOCALLS_CHUNK;
			CHECK(buf[k] % XTC__GOCALLS_CHUNK == XTC__GOCALLS_CHUNK - 1);
			CHECK(xtc__gocalls_done(t, buf[k])->status == 0);
			CHECK(xtc__gocalls_done(t, buf[k])->value == (int64_t)c + 1);
			seen |= 1u << c;
		}
		got += n;
		if (n == 0)
			sched_yield();
	}
	CHECK_EQ(got, 4);
	CHECK_EQ(seen, 0xfu);
	CHECK(xtc__gocalls_done(t, 5) == d0); /* never moved */
	stop_exec(e, th);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	xtc__gocalls_destroy(t);
}

/* The words a consumer that is not the reader checks without a call
 * (gocall.go, help): the head is NULL exactly when nothing settled waits
 * for a pop; an armed reader's word is 1 until a settlement rings it (then
 * 0, and the eventfd is written), and a helper that took the arm (0) keeps
 * the settlements from ringing. */
static void test_head_armed(void)
{
	xtc_exec_t *e = NULL;
	xtc__gocalls_t *t = NULL;
	pthread_t th;
	uint32_t buf[4];
	uint64_t v;
	int n = 0;
	int64_t dl;

	REQUIRE(xtc_exec_init(&e, 1) == XTC_OK);
	REQUIRE(xtc__gocalls_create(e, 16, &t) == XTC_OK);
	_Atomic(void *) *head = xtc__gocalls_head(t);
	_Atomic int *armed = xtc__gocalls_armed(t);
	REQUIRE(head != NULL && armed != NULL);
	CHECK(xtc__gocalls_head(NULL) == NULL && xtc__gocalls_armed(NULL) == NULL);
	CHECK(atomic_load(head) == NULL);
	CHECK(xtc__gocalls_arm(t) == 0);
	CHECK_EQ(atomic_load(armed), 1);
	/* a helper takes the arm: this settlement must not ring */
	CHECK_EQ(atomic_exchange(armed, 0), 1);
	CHECK(xtc__gocall_submit(t, 0, 0, (void *)f_ident, 7, NULL, NULL, 0) == 0);
	xtc_exec_set_service_mode(e, 1);
	REQUIRE(pthread_create(&th, NULL, run_main, e) == 0);
	dl = now_ns() + 60 * SEC;
	while (atomic_load(head) == NULL && now_ns() < dl)
		sched_yield();
	CHECK(atomic_load(head) != NULL);
	CHECK(read(xtc__gocalls_fd(t), &v, sizeof(v)) < 0); /* not rung */
	CHECK(xtc__gocalls_arm(t) == 1); /* the head is seen at the arm */
	n = xtc__gocalls_pop(t, buf, 4);
	CHECK_EQ(n, 1);
	CHECK_EQ(buf[0], 0u);
	CHECK(atomic_load(head) == NULL);
	/* armed (by the arm above): the next settlement rings */
	CHECK(xtc__gocall_submit(t, 0, 0, (void *)f_ident, 8, NULL, NULL, 0) == 0);
	while (atomic_load(armed) != 0 && now_ns() < dl)
		sched_yield();
	CHECK_EQ(atomic_load(armed), 0);
	while (read(xtc__gocalls_fd(t), &v, sizeof(v)) < 0 && now_ns() < dl)
		sched_yield();
	CHECK(v >= 1);
	CHECK_EQ(xtc__gocalls_pop(t, buf, 4), 1);
	CHECK_EQ(xtc__gocalls_done(t, 0)->value, 8);
	stop_exec(e, th);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	xtc__gocalls_destroy(t);
}

/* the per-loop counts the Go side places calls by: raised by a
 * submission or spawn on that loop, lowered by its settlement, untouched
 * by a refused submission */
static void test_loads(void)
{
	xtc_exec_t *e = NULL;
	xtc__gocalls_t *t = NULL;
	int32_t *ld;
	xtc_pid_t pid;
	int n = 0;

	REQUIRE(xtc_exec_init(&e, 3) == XTC_OK);
	REQUIRE(xtc__gocalls_create(e, 16, &t) == XTC_OK);
	CHECK(xtc__gocalls_loads(NULL, &n) == NULL);
	CHECK(xtc__gocalls_loads(t, NULL) == NULL);
	ld = xtc__gocalls_loads(t, &n);
	REQUIRE(ld != NULL);
	CHECK_EQ(n, 3);
	CHECK(xtc__gocall_submit(t, 0, 1, (void *)f_ident, 1, NULL, NULL, 0) == 0);
	CHECK(xtc__gocall_submit(t, 1, 1, (void *)f_ident, 2, NULL, NULL, 0) == 0);
	CHECK(xtc__gocall_spawn(t, 2, 2, (void *)f_ident, 3, NULL, NULL, &pid) == XTC_OK);
	CHECK(xtc__gocall_submit(t, 3, 3, (void *)f_ident, 4, NULL, NULL, 0) == XTC_E_INVAL);
	CHECK(xtc__gocall_submit(t, 4, -1, (void *)f_ident, 4, NULL, NULL, 0) == XTC_E_INVAL);
	CHECK_EQ(__atomic_load_n(&ld[0], __ATOMIC_RELAXED), 0);
	CHECK_EQ(__atomic_load_n(&ld[1], __ATOMIC_RELAXED), 2);
	CHECK_EQ(__atomic_load_n(&ld[2], __ATOMIC_RELAXED), 1);
	/* never run: the fini drops them, their settlement lowers the counts */
	CHECK(xtc_exec_fini(e) == XTC_OK);
	(void)xtc__gocalls_settle(t);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(__atomic_load_n(&ld[i], __ATOMIC_RELAXED), 0);
	xtc__gocalls_destroy(t);
}

/* Submit's C half (completion.go, Dispatch): the result comes back
 * through the cq under its tag; the return says 1 when the loop was
 * parked (the Go waiter polls longer), else 0 */
static intptr_t co_plus_one(void *a) { return (intptr_t)a + 1; }

static void test_gofut(void)
{
	pthread_t th;
	xtc_exec_t *e = start_exec(1, &th);
	xtc_cq_t *cq = NULL;
	xtc_dispatch_handle_t *h = NULL;
	int parked = 0, rc;

	REQUIRE(xtc_cq_create(64, &cq) == XTC_OK);
	for (int k = 0; k < 100 && !parked; k++) {
		xtc_cq_entry_t ent;
		int64_t dl = now_ns() + 30 * SEC;

		wait_parked(e, dl);
		rc = xtc__gofut_submit(xtc_exec_loop(e, 0), (void *)co_plus_one,
		                       (void *)(intptr_t)k, cq, 1000 + (uint64_t)k, &h);
		REQUIRE(rc == 0 || rc == 1);
		parked = rc == 1;
		while (xtc_cq_pop(cq, &ent, 1) == 0 && now_ns() < dl)
			sched_yield();
		CHECK_EQ(ent.tag, 1000 + (uint64_t)k);
		CHECK_EQ(ent.value, k + 1);
		CHECK_EQ(ent.status, 0);
		xtc_dispatch_handle_free(h); /* the Go side's, at completion */
		h = NULL;
	}
	CHECK(parked);
	stop_exec(e, th);
	CHECK(xtc_exec_fini(e) == XTC_OK);
	CHECK(xtc_cq_destroy(cq) == XTC_OK);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		test_only = argv[1];
	RUN(test_args);
	RUN(test_value);
	RUN(test_kill_before_start);
	RUN(test_kill_running);
	RUN(test_exactly_once);
	RUN(test_fallback);
	RUN(test_fini_settles);
	RUN(test_class);
	RUN(test_spawn);
	RUN(test_growth);
	RUN(test_head_armed);
	RUN(test_loads);
	RUN(test_gofut);
	return failures ? 1 : 0;
}
