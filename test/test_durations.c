/*
 * test_durations.c - INT64_MAX passed to every duration argument of the C
 * API (issue 27): a timeout or slice that large means "as good as never",
 * so each call must behave as with a long finite value (the wait ends by
 * its event, the slice never cuts), and no "now + d" may overflow. The
 * ASan+UBSan build runs this file with halt_on_error: a signed overflow
 * anywhere on these paths fails it there. Before the saturating deadline
 * helper (base_int.h xtc__deadline_after), xtc_launch returned
 * XTC_E_AGAIN at once and killed its child, xtc_exec_submit_wait refused a
 * full ring at once, and an INT64_MAX preemption interval re-armed a timer
 * at a negative time forever (xtc_exec_run never returned); recv, wait_fd,
 * proc_sleep and the batch exec_timeout only worked because the overflow
 * wrapped twice.
 *
 * Ordering is by events: on one loop a waiter parks before its peer runs
 * (procs run in spawn order), and each peer action follows the waiter's
 * published stage. Waits that would never end are ended by their event,
 * or by a kill, never by a clock.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "xtc.h"
#include "xtc_exec.h"
#include "xtc_fn.h"
#include "xtc_future.h"
#include "xtc_launch.h"
#include "xtc_osproc.h"
#include "xtc_preempt.h"
#include "xtc_proc.h"

#include "test_util.h"

#define FOREVER INT64_MAX

/* ---- one loop: a waiter proc and its peer ------------------------------- */

static atomic_int stage;    /* what the waiter waits for now */
static atomic_int acted;    /* the last stage the peer acted on */
static xtc_pid_t waiter_pid;
static int pipe_fd[2];
static xtc_promise_t *prom;
static xtc_future_t *fut;
static int slept_returned;
static int waits_ok;

static intptr_t child_42(void *arg)
{
	(void)arg;
	return 42;
}

static int match_any(const void *data, size_t size, void *user)
{
	(void)data;
	(void)size;
	(void)user;
	return 1;
}

static void waiter(void *arg)
{
	void *m = NULL;
	size_t n = 0;
	uint32_t rev = 0;
	intptr_t v = 0;
	xtc_msg_t msgs[1];
	int got = 0;
	(void)arg;

	atomic_store(&stage, 1);
	REQUIRE(xtc_recv(&m, &n, FOREVER) == XTC_OK);
	xtc_free(m);
	atomic_store(&stage, 2);
	REQUIRE(xtc_recv_match(match_any, NULL, &m, &n, FOREVER) == XTC_OK);
	xtc_free(m);
	atomic_store(&stage, 3);
	REQUIRE(xtc_recv_correlate(NULL, 0, 1, msgs, &got, FOREVER) == XTC_OK);
	REQUIRE(got == 1);
	xtc_free(msgs[0].data);
	atomic_store(&stage, 4);
	REQUIRE(xtc_proc_wait_fd(pipe_fd[0], XTC_IO_READABLE, FOREVER, &rev) ==
	        XTC_OK);
	CHECK(rev & XTC_IO_READABLE);
	atomic_store(&stage, 5);
	xtc_future_t *g = NULL;
	REQUIRE(xtc_future_with_timeout(fut, FOREVER, &g) == XTC_OK);
	REQUIRE(xtc_future_wait(g, &v, FOREVER) == XTC_OK); /* consumes g */
	CHECK(v == 7);
	/* launch: the child returns at once; the deadline never comes */
	v = 0;
	CHECK(xtc_launch(NULL, child_42, NULL, FOREVER, NULL, &v) == XTC_OK);
	CHECK(v == 42);
	waits_ok = 1;
	/* a sleep of INT64_MAX ns only ends by the peer's kill */
	atomic_store(&stage, 6);
	(void)xtc_proc_sleep(FOREVER);
	slept_returned = 1;
}

static void peer(void *arg)
{
	(void)arg;
	for (;;) {
		int s = atomic_load(&stage);
		/* on one loop the waiter is parked whenever this runs */
		if (s != atomic_load(&acted)) {
			switch (s) {
			case 1:
			case 2:
			case 3:
				REQUIRE(xtc_send(waiter_pid, "x", 1) == XTC_OK);
				break;
			case 4:
				REQUIRE(write(pipe_fd[1], "x", 1) == 1);
				break;
			case 5:
				REQUIRE(xtc_promise_set(prom, 7, 0) == XTC_OK);
				break;
			case 6:
				REQUIRE(xtc_exit_pid(waiter_pid, 1) == XTC_OK);
				return;
			}
			atomic_store(&acted, s);
		}
		REQUIRE(xtc_proc_sleep(0) == XTC_OK);
	}
}

static void test_proc_waits(void)
{
	xtc_loop_t *l = new_loop();
	xtc_proc_opts_t o = { 0 };
	REQUIRE(pipe(pipe_fd) == 0);
	REQUIRE(xtc_future_new_pair(&prom, &fut) == XTC_OK);
	REQUIRE(xtc_proc_spawn(l, waiter, NULL, &o, &waiter_pid) == XTC_OK);
	REQUIRE(xtc_proc_spawn(l, peer, NULL, NULL, NULL) == XTC_OK);
	test_watchdog_start(60, "test_proc_waits");
	run_fini(l);
	test_watchdog_stop();
	CHECK(waits_ok);
	CHECK(!slept_returned);
	close(pipe_fd[0]);
	close(pipe_fd[1]);
}

/* ---- loop timers and tasks --------------------------------------------- */

static int timer_fired;
static xtc_timer_t *far_timer;
static xtc_task_t *parked_task;
static int park_state;

static void on_far_timer(void *user)
{
	(void)user;
	timer_fired = 1;
}

static int parker(xtc_task_t *self, void *user)
{
	(void)user;
	if (park_state == 0) {
		park_state = 1;
		REQUIRE(xtc_task_park_on_timer(self, FOREVER) == XTC_OK);
		return XTC_TASK_PENDING;
	}
	park_state = 2; /* woken by its waker, not by the timer */
	return XTC_TASK_DONE;
}

static int canceller(xtc_task_t *self, void *user)
{
	xtc_waker_t w;
	(void)self;
	(void)user;
	CHECK(xtc_timer_cancel(far_timer) == XTC_OK);
	REQUIRE(xtc_task_waker(parked_task, &w) == XTC_OK);
	CHECK(xtc_waker_wake(&w) == XTC_OK);
	return XTC_TASK_DONE;
}

static void test_loop_timers(void)
{
	xtc_loop_t *l = new_loop();
	xtc_yield_set_budget(l, FOREVER);
	REQUIRE(xtc_timer_set(l, FOREVER, on_far_timer, NULL, &far_timer) ==
	        XTC_OK);
	REQUIRE(xtc_task_spawn(l, parker, NULL, &parked_task) == XTC_OK);
	REQUIRE(xtc_task_spawn(l, canceller, NULL, NULL) == XTC_OK);
	test_watchdog_start(60, "test_loop_timers");
	run_fini(l);
	test_watchdog_stop();
	CHECK(!timer_fired);
	CHECK(park_state == 2);
}

/* ---- the executor -------------------------------------------------------- */

static atomic_int ran;

static void count_fn(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ran, 1);
}

struct runner {
	xtc_exec_t *e;
	int rc;
};

static int stop_task(xtc_task_t *self, void *user)
{
	(void)self;
	xtc_exec_stop(user);
	return XTC_TASK_DONE;
}

/* A full ring: submit_wait(INT64_MAX) waits for room, however long the
 * carrier takes to start (it starts only after the call is in flight). */
static atomic_int waiting_now;

static void *late_start(void *arg)
{
	struct runner *r = arg;
	while (!atomic_load(&waiting_now))
		usleep(1000);
	r->rc = xtc_exec_run(r->e);
	return NULL;
}

static void test_submit_wait(void)
{
	xtc_exec_t *e = NULL;
	int n = 0;
	REQUIRE(xtc_exec_init(&e, 1) == XTC_OK);
	xtc_exec_set_service_mode(e, 1);
	while (xtc_exec_submit(e, 0, count_fn, NULL) == XTC_OK)
		n++;
	REQUIRE(n > 0);
	struct runner r = { e, -1 };
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, late_start, &r) == 0);
	atomic_store(&waiting_now, 1);
	test_watchdog_start(60, "test_submit_wait");
	REQUIRE(xtc_exec_submit_wait(e, 0, count_fn, NULL, FOREVER) == XTC_OK);
	while (atomic_load(&ran) < n + 1)
		usleep(1000);
	REQUIRE(xtc_exec_spawn_on(e, 0, stop_task, e, NULL) == XTC_OK);
	pthread_join(th, NULL);
	test_watchdog_stop();
	CHECK(r.rc == XTC_OK);
	CHECK(xtc_exec_fini(e) == XTC_OK);
}

/* Every executor knob at INT64_MAX: a slice that never cuts (with the
 * involuntary path on, two procs that never yield run one after the
 * other), a spin that never parks, a latency and a stall budget never
 * reached; the run ends when the work does. */
static atomic_int procs_done;

static void bounded_proc(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg;
	volatile uint64_t acc = 0;
	for (uint64_t i = 0; i < n; i++)
		acc += i;
	atomic_fetch_add(&procs_done, 1);
}

static void test_exec_knobs(void)
{
	xtc_exec_t *e = NULL;
	xtc_exec_class_t cls;
	xtc_proc_opts_t o = { 0 };
	REQUIRE(xtc_exec_init(&e, 1) == XTC_OK);
	CHECK(xtc_exec_set_preempt(e, FOREVER) == XTC_OK);
	CHECK(xtc_exec_set_spin(e, FOREVER) == XTC_OK);
	xtc_exec_set_stall_budget(e, FOREVER);
	REQUIRE(xtc_exec_class_create(xtc_exec_loop(e, 0), 100, FOREVER, &cls) ==
	        XTC_OK);
	xtc_preempt_set_involuntary(xtc_preempt_involuntary_supported());
	o.sched_class = cls;
	for (int i = 0; i < 2; i++)
		REQUIRE(xtc_proc_spawn(xtc_exec_loop(e, 0), bounded_proc,
		                       (void *)(uintptr_t)5000000, i ? &o : NULL,
		                       NULL) == XTC_OK);
	test_watchdog_start(60, "test_exec_knobs");
	CHECK(xtc_exec_run(e) == XTC_OK);
	test_watchdog_stop();
	xtc_preempt_set_involuntary(0);
	CHECK(atomic_load(&procs_done) == 2);
	CHECK(xtc_loop_stall_count(xtc_exec_loop(e, 0)) == 0);
	CHECK(xtc_exec_fini(e) == XTC_OK);
}

/* ---- deadline functions, preemption, futures, OS processes -------------- */

static intptr_t sum_fn(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg;
	volatile uint64_t acc = 0;
	for (uint64_t i = 0; i < n; i++)
		acc += i;
	return 5;
}

static void test_fn_and_preempt(void)
{
	if (xtc_preempt_involuntary_supported()) {
		xtc_fn_t f = { 0 };
		test_watchdog_start(60, "test_fn_and_preempt");
		CHECK(xtc_fn_launch(&f, sum_fn, (void *)(uintptr_t)2000000,
		                    FOREVER) == XTC_OK);
		CHECK(f.result == 5);
		test_watchdog_stop();
	}
	xtc_fn_quantum_t *q = NULL;
	xtc_fn_quantum_opts_t qo = { .max_ns = FOREVER, .period_ns = FOREVER };
	int rc = xtc_fn_quantum_create(&qo, &q);
	CHECK(rc == XTC_OK || rc == XTC_E_RANGE);
	if (rc == XTC_OK) {
		CHECK(xtc_fn_quantum_record(q, FOREVER) == XTC_OK);
		CHECK(xtc_fn_quantum_add_busy(q, FOREVER) == XTC_OK);
		CHECK(xtc_fn_quantum_update(q) > 0);
		xtc_fn_quantum_destroy(q);
	}
	/* a plain thread armed at INT64_MAX: no tick ever comes; disarm */
	CHECK(xtc_preempt_arm(FOREVER) == XTC_OK);
	uint64_t t = xtc_preempt_ticks();
	CHECK(xtc_preempt_disarm() == XTC_OK);
	CHECK(xtc_preempt_ticks() == t);
	rc = xtc_preempt_arm_ring(FOREVER);
	CHECK(rc == XTC_OK || rc == XTC_E_NOSYS);
	if (rc == XTC_OK)
		CHECK(xtc_preempt_disarm() == XTC_OK);
}

static void *set_soon(void *arg)
{
	usleep(1000); /* order does not matter: set before or after the wait */
	CHECK(xtc_promise_set(arg, 9, 0) == XTC_OK);
	return NULL;
}

static void test_futures_and_osproc(void)
{
	xtc_promise_t *p;
	xtc_future_t *f;
	intptr_t v = 0;
	pthread_t th;

	/* a thread's wait (a futex with a deadline) */
	REQUIRE(xtc_future_new_pair(&p, &f) == XTC_OK);
	REQUIRE(pthread_create(&th, NULL, set_soon, p) == 0);
	test_watchdog_start(60, "test_futures_and_osproc");
	CHECK(xtc_future_wait(f, &v, FOREVER) == XTC_OK);
	CHECK(v == 9);
	pthread_join(th, NULL);

	char *argv[] = { "/bin/true", NULL };
	xtc_osproc_opts_t oo = { .name = "true", .argv = argv };
	xtc_osproc_t *op = NULL;
	int st = -1;
	if (xtc_osproc_spawn(&oo, &op) == XTC_OK) {
		CHECK(xtc_osproc_wait(op, &st, FOREVER) == XTC_OK);
		CHECK(st == 0);
		xtc_osproc_destroy(op);
	}
	test_watchdog_stop();
}

int main(int argc, char **argv)
{
	test_only = argc > 1 ? argv[1] : NULL;
	RUN(test_proc_waits);
	RUN(test_loop_timers);
	RUN(test_submit_wait);
	RUN(test_exec_knobs);
	RUN(test_fn_and_preempt);
	RUN(test_futures_and_osproc);
	if (failures) {
		fprintf(stderr, "test_durations: %d failure(s)\n", failures);
		return 1;
	}
	return 0;
}
